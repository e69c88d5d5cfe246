// gloo-bench — the Gloo reference for ccl-bench.
//
// Measures Gloo's collectives (gloo::allreduce, gloo::allgather,
// gloo::broadcast, gloo::reduce) over its TCP transport on loopback
// (127.0.0.1), with nccl-tests's flags and row format, so that its rows can
// be read next to ccl-bench's for the same collective, size, type and rank
// count on the same machine. Gloo is the CPU backend that PyTorch
// distributed uses, so these rows are what a training job would get without
// nnpccl. Each row has an out-of-place group (input and output buffers) and
// an in-place group (output buffer only, which Gloo then also reads as the
// input).
//
// time = the average over -n iterations of one call, taken on each rank
// between a gloo::barrier and the end of the last call, and the largest over
// ranks; algbw = S / time; busbw = algbw x the collective's bus factor.
//
// Side by side with ccl-bench (same flags; build dir "build"):
//   build/bench/ccl-bench allreduce -b 4M -e 64M -f 2 --np 2
//   build/bench/peers/gloo-bench allreduce -b 4M -e 64M -f 2 --np 2
// --np N forks N local ranks that meet through a FileStore in a fresh
// temporary directory, removed at the end. Without --np, each process takes
// its rank from RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/_SIZE
// (mpirun), PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS, and all ranks
// meet in the empty directory given by --store DIR or $GLOO_BENCH_STORE:
//   mkdir /tmp/store
//   mpirun -np 2 -x GLOO_BENCH_STORE=/tmp/store build/bench/peers/gloo-bench allreduce
//
// The Gloo that Debian ships (a 2022 snapshot, version 0.5.0) has no
// reduce_scatter in its collective API, so that collective is refused.
// Allreduce uses Gloo's default algorithm (ring).

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer_bench.hpp"

namespace {

using namespace peer_bench;

// Loopback only: the peers are single-machine references for ccl-bench.
constexpr const char *kHost = "127.0.0.1";

// Long enough for the largest row of a slow, oversubscribed run; Gloo's
// default (30 s) also bounds each collective.
constexpr std::chrono::seconds kTimeout{300};

using Kernel = void (*)(void *, const void *, const void *, size_t);

// Gloo's own element-wise kernels, as PyTorch's Gloo backend passes them.
template <typename T> Kernel reduce_kernel(RedOp op) {
    switch (op) {
    case RedOp::Sum: return static_cast<Kernel>(&gloo::sum<T>);
    case RedOp::Prod: return static_cast<Kernel>(&gloo::product<T>);
    case RedOp::Min: return static_cast<Kernel>(&gloo::min<T>);
    case RedOp::Max: return static_cast<Kernel>(&gloo::max<T>);
    }
    return nullptr;
}

using ContextPtr = std::shared_ptr<gloo::Context>;

void barrier(const ContextPtr &context) {
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
}

template <typename T> T allreduce_scalar(const ContextPtr &context, T value, Kernel kernel) {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(kernel);
    gloo::allreduce(opts);
    return value;
}

// Builds the options of one group once (they only describe the buffers) and
// returns the call that the timing loop repeats.
template <typename T>
std::function<void()> make_call(const ContextPtr &context, const Case &c, Placement placement, Buffers<T> &buffers) {
    const bool out_of_place = placement == Placement::OutOfPlace;
    T *send = buffers.send.data();
    T *recv = buffers.recv.data();
    const size_t send_count = c.layout.send_count;
    const size_t recv_count = c.layout.recv_count;
    // Rows too small for one element per rank move nothing; Gloo's
    // allgather would divide by the empty output's size.
    if (c.layout.total_count == 0) return [] {};
    switch (c.collective) {
    case Collective::AllReduce: {
        auto opts = std::make_shared<gloo::AllreduceOptions>(context);
        if (out_of_place) opts->setInput(send, send_count);
        opts->setOutput(recv, recv_count);
        opts->setReduceFunction(reduce_kernel<T>(c.op));
        return [opts] { gloo::allreduce(*opts); };
    }
    case Collective::AllGather: {
        // In place, this rank's block already sits at its offset in recv.
        auto opts = std::make_shared<gloo::AllgatherOptions>(context);
        if (out_of_place) opts->setInput(send, send_count);
        opts->setOutput(recv, recv_count);
        return [opts] { gloo::allgather(*opts); };
    }
    case Collective::Broadcast: {
        // Gloo refuses an input on the other ranks.
        auto opts = std::make_shared<gloo::BroadcastOptions>(context);
        if (out_of_place && c.rank == c.root) opts->setInput(send, send_count);
        opts->setOutput(recv, recv_count);
        opts->setRoot(c.root);
        return [opts] { gloo::broadcast(*opts); };
    }
    case Collective::Reduce: {
        // Every rank needs the output buffer: Gloo's ring uses it as scratch.
        auto opts = std::make_shared<gloo::ReduceOptions>(context);
        if (out_of_place) opts->setInput(send, send_count);
        opts->setOutput(recv, recv_count);
        opts->setRoot(c.root);
        opts->setReduceFunction(reduce_kernel<T>(c.op));
        return [opts] { gloo::reduce(*opts); };
    }
    case Collective::ReduceScatter: break; // refused in main()
    }
    throw std::logic_error("gloo-bench: collective not supported");
}

// Times one group of the row (warm-up, then -n calls between a barrier and
// the last return) and, with -c 1, checks one more call on fresh input.
template <typename T> void run_group(const ContextPtr &context, const Options &opts, const Case &c, Placement placement,
                                     Buffers<T> &buffers, Report &report) {
    const std::function<void()> call = make_call(context, c, placement, buffers);
    prepare_input(c, placement, buffers);
    for (int i = 0; i < opts.warmup_iters; ++i) call();

    barrier(context);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opts.iters; ++i) call();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double slowest_seconds =
        allreduce_scalar(context, elapsed.count() / opts.iters, static_cast<Kernel>(&gloo::max<double>));

    uint64_t wrong = 0;
    if (opts.check) {
        // Timed in-place calls fed their output back as input: start afresh.
        prepare_input(c, placement, buffers);
        call();
        wrong = allreduce_scalar(context, count_wrong(c, buffers), static_cast<Kernel>(&gloo::sum<uint64_t>));
    }
    report.group(c, slowest_seconds, wrong, opts.check);
}

template <typename T> void run_row(const ContextPtr &context, const Options &opts, const Case &c, Report &report) {
    Buffers<T> buffers(c.layout);
    report.begin_row(c);
    run_group(context, opts, c, Placement::OutOfPlace, buffers, report);
    run_group(context, opts, c, Placement::InPlace, buffers, report);
    report.end_row();
}

// One rank's whole run; returns its exit status.
int run_rank(const Options &opts, int rank, int nranks, const std::string &store_dir) {
    try {
        gloo::transport::tcp::attr attr;
        attr.hostname = kHost;
        auto device = gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::FileStore store(store_dir);
        auto rendezvous = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
        rendezvous->setTimeout(kTimeout);
        rendezvous->connectFullMesh(store, device);
        const ContextPtr context = rendezvous;

        Report report(rank == 0);
        report.begin("gloo-bench: Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                         std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + " (tcp, " +
                         kHost + "), " + std::to_string(nranks) + " ranks",
                     opts);
        for (size_t bytes : size_series(opts)) {
            const Case c = case_for(opts, rank, nranks, bytes);
            with_type(opts.dtype, [&](auto type) { run_row<decltype(type)>(context, opts, c, report); });
        }
        const int status = report.finish();
        barrier(context); // nobody closes its connections while others still use them
        return status;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-bench: rank %d: %s\n", rank, e.what());
        return 3;
    }
}

// Rank and size from the first launcher whose variables are set.
bool rank_from_environment(int *rank, int *nranks) {
    static const char *const kPairs[][2] = {
        {"RANK", "WORLD_SIZE"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
    };
    for (const auto &pair : kPairs) {
        const char *rank_text = std::getenv(pair[0]);
        const char *size_text = std::getenv(pair[1]);
        long r = 0;
        long n = 0;
        if (rank_text != nullptr && size_text != nullptr && nnpccl_tools::read_decimal(size_text, 1, 4096, &n) &&
            nnpccl_tools::read_decimal(rank_text, 0, n - 1, &r)) {
            *rank = static_cast<int>(r);
            *nranks = static_cast<int>(n);
            return true;
        }
    }
    return false;
}

// Forks nranks local ranks that meet in a fresh temporary directory; returns
// the first failing rank's status, or 0. If one rank fails the others are
// stopped rather than left waiting for it until Gloo's timeout.
int launch_local(const Options &opts, int nranks) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gloo-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        std::perror("gloo-bench: mkdtemp");
        return 3;
    }
    const std::string store_dir = pattern;
    std::fflush(nullptr); // children must not repeat the parent's buffered output

    std::vector<pid_t> children;
    int status = 0;
    for (int rank = 0; rank < nranks; ++rank) {
        const pid_t pid = fork();
        if (pid == 0) {
            const int rank_status = run_rank(opts, rank, nranks, store_dir);
            std::fflush(nullptr);
            _exit(rank_status);
        }
        if (pid < 0) {
            std::perror("gloo-bench: fork");
            status = 3;
            break;
        }
        children.push_back(pid);
    }
    if (status != 0)
        for (pid_t pid : children) kill(pid, SIGTERM);

    for (size_t remaining = children.size(); remaining > 0; --remaining) {
        int wait_status = 0;
        const pid_t pid = waitpid(-1, &wait_status, 0);
        if (pid < 0) break;
        const int child_status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
        if (child_status != 0 && status == 0) {
            status = child_status;
            for (pid_t other : children)
                if (other != pid) kill(other, SIGTERM);
        }
    }
    std::error_code ignored;
    std::filesystem::remove_all(store_dir, ignored);
    return status;
}

} // namespace

int main(int argc, char **argv) {
    Options opts;
    if (const int status = read_command_line("gloo-bench", argc, argv, /*launcher=*/true, &opts); status >= 0)
        return status;
    if (opts.collective == Collective::ReduceScatter) {
        std::fprintf(stderr, "gloo-bench: this Gloo (%d.%d.%d) has no reduce_scatter collective\n", GLOO_VERSION_MAJOR,
                     GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
        return kExitNoSuchCollective;
    }

    int rank = 0;
    int nranks = opts.launch_ranks;
    const bool launched = opts.launch_ranks == 0 && rank_from_environment(&rank, &nranks);
    if (!launched && nranks == 0) nranks = 1; // neither --np nor a launcher: one local rank, as nccl-tests
    if (opts.root >= nranks) {
        std::fprintf(stderr, "gloo-bench: root %d is not a rank of %d\n", opts.root, nranks);
        return 2;
    }
    if (!launched) return launch_local(opts, nranks);

    std::string store_dir = opts.store_dir;
    if (store_dir.empty() && std::getenv("GLOO_BENCH_STORE") != nullptr) store_dir = std::getenv("GLOO_BENCH_STORE");
    if (store_dir.empty()) {
        std::fprintf(stderr,
                     "gloo-bench: rank %d of %d needs --store DIR or GLOO_BENCH_STORE: an empty "
                     "directory that all ranks share\n",
                     rank, nranks);
        return 2;
    }
    return run_rank(opts, rank, nranks, store_dir);
}
