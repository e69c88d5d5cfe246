// Runs every rank's schedule of a collective together in one thread over the
// in-process loop transport, with tiny chunks and few slots per stream, and
// checks: no message exceeds a chunk, every rank finishes (a stuck pass is a
// deadlock), no message is left over, every output is bit-exact, and no
// byte outside what the call may write changes (the send buffer never; the
// receive storage past bytes_written()). Unwritten memory holds a value no
// check pattern has, so a step that is missing shows. Shared by the
// schedule tests.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "builders.hpp"
#include "check_data.hpp"
#include "dtype.hpp"
#include "executor.hpp"
#include "loop/loop_transport.hpp"

namespace schedule_sim {

using nnpccl_check::CallShape;

using Builder = std::function<nnpccl::Schedule(const nnpccl::CollectiveArgs &)>;

// Rewrites a rank's input (`elems` elements at `send`) before the run, for
// inputs other than the check patterns.
using InputWriter = std::function<void(int rank, void *send, size_t elems)>;

struct SimResult {
    size_t wrong = 0; // elements that differ from the check patterns' result, over all ranks
    std::vector<std::vector<unsigned char>> outputs; // each rank's output (output_elems() elements)
};

// The elements of a rank's output, from its receive pointer: one block
// for the collectives that hand each rank its own, the whole buffer else.
inline size_t output_elems(const CallShape &s) {
    const bool one_block =
        s.collective == NNPCCL_COLL_REDUCE_SCATTER || s.collective == NNPCCL_COLL_SCATTER;
    return one_block ? s.count : s.total();
}

template <typename T> void fill_with(void *dst, size_t elems, T value) {
    auto *out = static_cast<unsigned char *>(dst);
    for (size_t i = 0; i < elems; ++i) std::memcpy(out + i * sizeof value, &value, sizeof value);
}

// Fills `elems` elements with a value that no check pattern produces: NaN,
// or the least signed / greatest unsigned integer.
inline void fill_unwritten(void *dst, size_t elems, nnpccl_datatype_t dt) {
    switch (dt) {
    case NNPCCL_INT8: fill_with(dst, elems, std::numeric_limits<int8_t>::min()); break;
    case NNPCCL_INT32: fill_with(dst, elems, std::numeric_limits<int32_t>::min()); break;
    case NNPCCL_INT64: fill_with(dst, elems, std::numeric_limits<int64_t>::min()); break;
    // All ones: NaN in every float type, the top of every unsigned one.
    default: std::memset(dst, 0xff, elems * nnpccl::datatype_size(dt)); break;
    }
}

// One run of every rank's call over a loop fabric whose sends copy or go
// in place; see run_ranks.
inline SimResult run_ranks_with(std::vector<CallShape> shapes, const Builder &build, size_t chunk_elems, int slots,
                                const InputWriter &write_input, nnpccl::LoopFabric::Sends sends) {
    using namespace nnpccl;
    const int p = static_cast<int>(shapes.size());
    size_t largest_elem = 1;
    for (const CallShape &s : shapes) largest_elem = std::max(largest_elem, datatype_size(s.dt));
    LoopFabric fabric(p, chunk_elems * largest_elem + kDescriptorBytes, slots, sends);
    std::vector<std::vector<unsigned char>> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p));
    std::vector<std::vector<unsigned char>> send_before(static_cast<size_t>(p)), recv_before(static_cast<size_t>(p));
    std::vector<std::vector<Transport *>> routes(static_cast<size_t>(p));
    std::vector<std::vector<unsigned char>> scratches(static_cast<size_t>(p));
    std::vector<std::unique_ptr<ScheduleRun>> runs;
    std::vector<unsigned char> scratch(chunk_elems * largest_elem);
    std::vector<const void *> outputs;
    for (int r = 0; r < p; ++r) {
        auto ur = static_cast<size_t>(r);
        CallShape &shape = shapes[ur];
        shape.rank = r;
        shape.nranks = p;
        const size_t es = datatype_size(shape.dt);
        // One element more than the call owns, to catch a write just past it.
        send[ur].resize((shape.send_elems() + 1) * es);
        recv[ur].resize((shape.total() + 1) * es);
        fill_unwritten(send[ur].data(), shape.send_elems() + 1, shape.dt);
        fill_unwritten(recv[ur].data(), shape.total() + 1, shape.dt);
        const void *sp = nullptr;
        void *rp = nullptr;
        nnpccl_check::lay_out(shape, send[ur].data(), recv[ur].data(), &sp, &rp);
        if (write_input) write_input(r, const_cast<void *>(sp), shape.send_elems());
        send_before[ur] = send[ur];
        recv_before[ur] = recv[ur];
        outputs.push_back(rp);
        Call args;
        args.collective = static_cast<Collective>(shape.collective); // nnpccl_inspect.h mirrors the enum
        args.count = shape.count;
        args.root = shape.root;
        args.in_place = shape.in_place;
        args.rank = r;
        args.nranks = p;
        args.chunk_elems = chunk_elems;
        args.elem_size = es;
        auto schedule = std::make_shared<const Schedule>(build(args));
        // A message larger than a chunk would overrun the transport's slot,
        // and a step past the end of scratch would write outside the
        // operation's lease (the executor does not check either).
        for (const auto &channel : schedule->channels)
            for (const Step &step : channel) {
                if ((step.has(kSend) || step.has(kRecv)) && step.count > chunk_elems)
                    FAIL("rank " << r << " moves " << step.count << " elements in one message; a chunk is "
                                  << chunk_elems);
                for (const BufRef &ref : {step.src, step.dst})
                    if (ref.buf == Buf::Scratch && step.count > 0 && ref.offset + step.count > schedule->scratch_elems)
                        FAIL("rank " << r << " uses scratch elements " << ref.offset << " to "
                                      << ref.offset + step.count << " of " << schedule->scratch_elems);
            }
        // Scratch is not zeroed in real runs (engine.hpp): a builder that
        // reads it before writing it must get garbage here too.
        scratches[ur].assign(schedule->scratch_elems * es, 0xa5);
        args.send = sp;
        args.recv = rp;
        args.datatype = shape.dt;
        args.op = shape.op;
        routes[ur].assign(static_cast<size_t>(p), fabric.endpoint(r));
        runs.push_back(std::make_unique<ScheduleRun>(schedule, args, scratches[ur].data(), Announcement{}, routes[ur],
                                                     scratch.data()));
    }
    bool all_done = false;
    while (!all_done) {
        size_t moved = 0;
        all_done = true;
        for (auto &run : runs) {
            size_t n = 0;
            Status st = run->advance(&n);
            if (!st.is_ok()) FAIL("executor error: " << st.message());
            moved += n;
            all_done = all_done && run->finished();
        }
        if (!all_done && moved == 0) {
            for (size_t r = 0; r < runs.size(); ++r)
                if (!runs[r]->finished()) UNSCOPED_INFO("rank " << r << " waits for " << runs[r]->blocked_on());
            FAIL("deadlock: no rank can make progress");
        }
    }
    REQUIRE(fabric.in_flight() == 0);
    SimResult result;
    for (int r = 0; r < p; ++r) {
        auto ur = static_cast<size_t>(r);
        const CallShape &shape = shapes[ur];
        result.wrong += nnpccl_check::count_wrong(shape, outputs[ur]);
        if (send[ur] != send_before[ur]) FAIL("rank " << r << "'s send buffer changed");
        const size_t owned = nnpccl_check::bytes_written(shape);
        if (!std::equal(recv[ur].begin() + static_cast<std::ptrdiff_t>(owned), recv[ur].end(),
                        recv_before[ur].begin() + static_cast<std::ptrdiff_t>(owned)))
            FAIL("rank " << r << " wrote past the first " << owned << " bytes of its receive storage");
        const auto *out = static_cast<const unsigned char *>(outputs[ur]);
        result.outputs.emplace_back(out, out + output_elems(shape) * datatype_size(shape.dt));
    }
    return result;
}

// Runs rank r's call `shapes[r]` (shapes[r].rank is set to r): ranks may
// run different calls, as the two ends of a send and recv do. Fails the
// test on a deadlock, an executor error, a message left over or a byte
// written where the call may not write. Runs twice: with sends copied out
// of the caller's memory, and with sends read from it in place (as over
// libfabric), which must give the same bits.
inline SimResult run_ranks(std::vector<CallShape> shapes, const Builder &build, size_t chunk_elems, int slots = 2,
                           const InputWriter &write_input = nullptr) {
    using Sends = nnpccl::LoopFabric::Sends;
    SimResult copied = run_ranks_with(shapes, build, chunk_elems, slots, write_input, Sends::Copied);
    SimResult in_place = run_ranks_with(shapes, build, chunk_elems, slots, write_input, Sends::InPlace);
    CHECK(in_place.wrong == copied.wrong);
    CHECK(in_place.outputs == copied.outputs);
    return copied;
}

// Every rank runs `shape` (its rank set to each in turn).
inline SimResult run(const CallShape &shape, const Builder &build, size_t chunk_elems, int slots = 2,
                     const InputWriter &write_input = nullptr) {
    return run_ranks(std::vector<CallShape>(static_cast<size_t>(shape.nranks), shape), build, chunk_elems, slots,
                     write_input);
}

// The number of wrong elements over all ranks.
inline size_t simulate(CallShape shape, const Builder &build, size_t chunk_elems, int slots = 2) {
    return run(shape, build, chunk_elems, slots).wrong;
}

inline CallShape make_shape(nnpccl::Collective coll, int p, size_t count, bool in_place, int root,
                            nnpccl_datatype_t dt, nnpccl_redop_t op) {
    CallShape s;
    s.collective = static_cast<nnpccl_collective_t>(coll);
    s.nranks = p;
    s.count = count;
    s.in_place = in_place;
    s.root = root;
    s.dt = dt;
    s.op = op;
    return s;
}

} // namespace schedule_sim
