// The header every operation's first message to a peer carries: what every
// rank must agree on before it trusts a peer's data (docs/design.md, "Life
// of a call", step 6). Its own header so that the executor and the trace
// recorder both see it without seeing each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nnpccl {

// What every rank must agree on for one operation. The first message an
// operation sends to each peer on each channel carries it in front of the
// data, and the receiver compares it with its own before it trusts the
// data: ranks that called different collectives, counts, datatypes, ops or
// roots at the same point get an error naming both sides, never corrupted
// data or a hang. kDescriptorBytes keeps the payload cache-line aligned.
struct OperationDescriptor {
    uint32_t magic = 0x6e6e6f70; // "nnop"
    uint32_t collective = 0;
    uint64_t sequence = 0;
    uint64_t count = 0;
    int32_t datatype = 0;
    int32_t op = 0;
    int32_t root = -1;
    // The schedule's algorithm, 1 + its index in the registry (0 for sends
    // and receives): ranks that forced different algorithms would
    // otherwise exchange messages of matching sizes and wrong meaning.
    uint32_t algorithm = 0;
    bool operator==(const OperationDescriptor &o) const {
        return magic == o.magic && collective == o.collective && sequence == o.sequence && count == o.count &&
               datatype == o.datatype && op == o.op && root == o.root && algorithm == o.algorithm;
    }
};
constexpr size_t kDescriptorBytes = 64;
static_assert(sizeof(OperationDescriptor) <= kDescriptorBytes);

// "allreduce #12 (count 6, float, sum)", "send #3 (count 6, float, to rank 1)"
std::string describe(const OperationDescriptor &d);

} // namespace nnpccl
