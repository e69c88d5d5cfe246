// Inputs for which every reduction order gives the same, exact result, and
// the expected outputs, so ccl-bench and the tests can compare bit for bit.
//
// Rank r's element i is a small integer from a pattern that repeats every
// kPeriod elements: sums of them stay exactly representable even in
// bfloat16 for hundreds of ranks, products are powers of two (and signs),
// and integer overflow wraps identically in any order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nnpccl.h"
#include "nnpccl_inspect.h"

namespace nnpccl_check {

constexpr size_t kPeriod = 5 * 7 * 11 * 61; // every pattern's period divides it

// One period of a typed pattern, ready to be tiled over a buffer.
class Pattern {
public:
    Pattern() = default;
    Pattern(nnpccl_datatype_t dt, std::vector<unsigned char> bytes);
    // Writes elements [first, first + count) of the tiled pattern to dst.
    void fill(void *dst, size_t first, size_t count) const;
    // Counts elements of buf that differ bit for bit from [first, first + count).
    size_t count_wrong(const void *buf, size_t first, size_t count) const;

private:
    size_t elem_ = 1;
    std::vector<unsigned char> bytes_; // kPeriod elements
};

// What rank `rank` contributes.
Pattern input_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int rank);
// What rank `rank` contributes to a collective that only moves data
// (gather, scatter, alltoall, send and recv): element i names the rank and
// i, so a block from the wrong rank or the wrong offset is caught. In 4-
// and 8-byte types rank·32768 + (i mod kPeriod), ranks taken mod 512 (exact
// in float32); in 1- and 2-byte types (37·rank + i) mod 241, less 120 where
// the type is signed (exact in bfloat16). So two ranks' elements at the
// same i differ (among 512, or 241, ranks), and a block read from the wrong
// offset differs unless the offsets are a multiple of kPeriod (or of 241,
// in the narrow types) apart.
Pattern tagged_pattern(nnpccl_datatype_t dt, int rank);
// The reduction over ranks 0..nranks-1 of their inputs (avg divides by nranks).
Pattern reduced_pattern(nnpccl_datatype_t dt, nnpccl_redop_t op, int nranks);


// Has a root rank (broadcast, reduce, gather, scatter).
constexpr bool has_root(nnpccl_collective_t c) {
    return c == NNPCCL_COLL_BROADCAST || c == NNPCCL_COLL_REDUCE || c == NNPCCL_COLL_GATHER || c == NNPCCL_COLL_SCATTER;
}
// Combines the ranks' data with an op.
constexpr bool reduces(nnpccl_collective_t c) {
    return c == NNPCCL_COLL_ALLREDUCE || c == NNPCCL_COLL_REDUCE_SCATTER || c == NNPCCL_COLL_REDUCE;
}

// One call of a collective as one rank sees it, for laying out inputs and
// checking outputs the same way in ccl-bench and in the tests.
struct CallShape {
    nnpccl_collective_t collective = NNPCCL_COLL_ALLREDUCE;
    int rank = 0;
    int nranks = 1;
    // The API's count: the per-rank block for reduce_scatter, allgather,
    // gather, scatter and alltoall, the message for send and recv, the
    // whole buffer otherwise, as nnpccl.h counts.
    size_t count = 0;
    int root = 0; // the peer, for send and recv
    nnpccl_datatype_t dt = NNPCCL_FLOAT32;
    nnpccl_redop_t op = NNPCCL_SUM;
    bool in_place = false;

    bool blockwise() const;    // count is a per-rank block: total() is count·nranks
    size_t total() const;      // elements of the whole buffer
    size_t send_elems() const; // elements the send buffer needs (out of place)
};

// Fills this rank's inputs into send_storage (send_elems()) or, in place,
// into recv_storage (total()), and returns the pointers to pass to the call.
void lay_out(const CallShape &s, void *send_storage, void *recv_storage, const void **send, void **recv);

// Elements of the output that differ from the exact result (0 off the root
// of a reduce or gather, and for a send).
size_t count_wrong(const CallShape &s, const void *recv);

// Bytes of recv_storage the call may write, from its start (for guard checks).
size_t bytes_written(const CallShape &s);

// Makes the call through the public C API (blocking; a send or recv alone,
// so its peer must make the matching call).
nnpccl_result_t issue(nnpccl_comm_t comm, const CallShape &s, const void *send, void *recv);

} // namespace nnpccl_check
