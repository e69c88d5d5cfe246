// Runs every rank's schedule of a collective together in one thread over the
// in-process loop transport, with tiny chunks and few slots per stream, and
// checks: no message exceeds a chunk, every rank finishes (a stuck pass is a
// deadlock), no message is left over, and every output is bit-exact. Shared by the schedule tests.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
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
    std::vector<std::vector<unsigned char>> outputs; // each rank's receive buffer, shape.total() elements
};

// Fails the test on a deadlock, an executor error or a message left over.
inline SimResult run(CallShape shape, const Builder &build, size_t chunk_elems, int slots = 2,
                     const InputWriter &write_input = nullptr) {
    using namespace nnpccl;
    const size_t es = datatype_size(shape.dt);
    const int p = shape.nranks;
    LoopFabric fabric(p, chunk_elems * es + kDescriptorBytes, slots);
    std::vector<std::vector<unsigned char>> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p));
    std::vector<std::vector<Transport *>> routes(static_cast<size_t>(p));
    std::vector<std::vector<unsigned char>> scratches(static_cast<size_t>(p));
    std::vector<std::unique_ptr<ScheduleRun>> runs;
    std::vector<unsigned char> scratch(chunk_elems * es);
    std::vector<CallShape> shapes;
    std::vector<const void *> outputs;
    for (int r = 0; r < p; ++r) {
        auto ur = static_cast<size_t>(r);
        shape.rank = r;
        shapes.push_back(shape);
        send[ur].assign(shape.send_elems() * es + 1, 0);
        recv[ur].assign(shape.total() * es + 1, 0);
        const void *sp = nullptr;
        void *rp = nullptr;
        nnpccl_check::lay_out(shape, send[ur].data(), recv[ur].data(), &sp, &rp);
        if (write_input) write_input(r, const_cast<void *>(sp), shape.send_elems());
        outputs.push_back(rp);
        CollectiveArgs args;
        args.collective = shape.collective;
        args.count = shape.count;
        args.root = shape.root;
        args.in_place = shape.in_place;
        args.rank = r;
        args.nranks = p;
        args.chunk_elems = chunk_elems;
        args.elem_size = es;
        auto schedule = std::make_shared<const Schedule>(build(args));
        // A message larger than a chunk would overrun the transport's slot.
        for (const auto &channel : schedule->channels)
            for (const Step &step : channel)
                if ((step.has(kSend) || step.has(kRecv)) && step.count > chunk_elems)
                    FAIL("rank " << r << " moves " << step.count << " elements in one message; a chunk is "
                                  << chunk_elems);
        scratches[ur].resize(schedule->scratch_elems * es);
        OperationBuffers bufs;
        bufs.scratch = scratches[ur].data();
        bufs.send = sp;
        bufs.recv = rp;
        bufs.datatype = shape.dt;
        bufs.op = shape.op;
        bufs.nranks = static_cast<uint32_t>(p);
        routes[ur].assign(static_cast<size_t>(p), fabric.endpoint(r));
        runs.push_back(std::make_unique<ScheduleRun>(schedule, bufs, routes[ur], scratch.data()));
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
        result.wrong += nnpccl_check::count_wrong(shapes[ur], outputs[ur]);
        const auto *out = static_cast<const unsigned char *>(outputs[ur]);
        // In place, a reduce-scatter's output is one block inside the buffer.
        const size_t out_elems =
            shape.collective == nnpccl::Collective::ReduceScatter ? shape.count : shape.total();
        result.outputs.emplace_back(out, out + out_elems * es);
    }
    return result;
}

// The number of wrong elements over all ranks.
inline size_t simulate(CallShape shape, const Builder &build, size_t chunk_elems, int slots = 2) {
    return run(shape, build, chunk_elems, slots).wrong;
}

inline CallShape make_shape(nnpccl::Collective coll, int p, size_t count, bool in_place, int root,
                            nnpccl_datatype_t dt, nnpccl_redop_t op) {
    CallShape s;
    s.collective = coll;
    s.nranks = p;
    s.count = count;
    s.in_place = in_place;
    s.root = root;
    s.dt = dt;
    s.op = op;
    return s;
}

} // namespace schedule_sim
