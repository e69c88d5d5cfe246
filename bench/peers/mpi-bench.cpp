// mpi-bench — the MPI reference for ccl-bench.
//
// Measures the MPI library's own collectives (MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce) on host
// buffers, with nccl-tests's flags and row format, so that its rows can be
// read next to ccl-bench's for the same collective, size, type and rank
// count on the same machine. Each row has an out-of-place group (separate
// send and receive buffers) and an in-place group (MPI_IN_PLACE).
//
// time = the average over -n iterations of one call, taken on each rank
// between an MPI_Barrier and the end of the last call, and the largest over
// ranks; algbw = S / time; busbw = algbw x the collective's bus factor.
//
// Side by side with ccl-bench (same flags; build dir "build"):
//   build/bench/ccl-bench allreduce -b 1M -e 64M -f 2 --np 2
//   mpirun -np 2 build/bench/peers/mpi-bench allreduce -b 1M -e 64M -f 2
//   mpirun -np 2 --mca btl tcp,self build/bench/peers/mpi-bench allreduce -b 1M -e 64M
// The second MPI line forces Open MPI onto TCP loopback instead of its shared
// memory transport (vader). As root, mpirun also needs --allow-run-as-root
// (or OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1), and more
// ranks than cores need --oversubscribe (ranks then share cores and wait
// for each other's time slices, which the times show).
//
// Open MPI mallocs its reduction scratch on every call; from 32 MiB up glibc
// maps it fresh each time, and on machines where page faults are dear (VMs)
// those rows drop several-fold. That is what an application sees too; to
// see the transport alone, add
//   -x MALLOC_MMAP_THRESHOLD_=1073741824 -x MALLOC_TRIM_THRESHOLD_=1073741824
//
// Broadcast has no out-of-place form in MPI: its out-of-place group is what
// an application pays for one, a copy on the root then MPI_Bcast.

// Only MPI's C API is used; the deprecated C++ bindings that mpi.h pulls in
// otherwise do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "peer_bench.hpp"

namespace {

using namespace peer_bench;

MPI_Datatype mpi_type(Dtype d) {
    switch (d) {
    case Dtype::Int8: return MPI_INT8_T;
    case Dtype::Uint8: return MPI_UINT8_T;
    case Dtype::Int32: return MPI_INT32_T;
    case Dtype::Uint32: return MPI_UINT32_T;
    case Dtype::Int64: return MPI_INT64_T;
    case Dtype::Uint64: return MPI_UINT64_T;
    case Dtype::Float: return MPI_FLOAT;
    case Dtype::Double: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(RedOp op) {
    switch (op) {
    case RedOp::Sum: return MPI_SUM;
    case RedOp::Prod: return MPI_PROD;
    case RedOp::Min: return MPI_MIN;
    case RedOp::Max: return MPI_MAX;
    }
    return MPI_OP_NULL;
}

// "Open MPI v4.1.4": the library's own version string up to its first comma.
std::string library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string version(text, static_cast<size_t>(length));
    const size_t end = version.find_first_of(",\n");
    return version.substr(0, end);
}

// One call of the collective, in the placement's form.
template <typename T> void run_once(const Case &c, Placement placement, Buffers<T> &buffers) {
    const MPI_Datatype type = mpi_type(c.dtype);
    const MPI_Op op = mpi_op(c.op);
    const bool in_place = placement == Placement::InPlace;
    const void *send = in_place ? MPI_IN_PLACE : buffers.send.data();
    T *recv = buffers.recv.data();
    // Counts were checked against INT_MAX before the row started.
    const int send_count = static_cast<int>(c.layout.send_count);
    const int recv_count = static_cast<int>(c.layout.recv_count);
    switch (c.collective) {
    case Collective::AllReduce: MPI_Allreduce(send, recv, recv_count, type, op, MPI_COMM_WORLD); break;
    case Collective::ReduceScatter: MPI_Reduce_scatter_block(send, recv, recv_count, type, op, MPI_COMM_WORLD); break;
    case Collective::AllGather: MPI_Allgather(send, send_count, type, recv, send_count, type, MPI_COMM_WORLD); break;
    case Collective::Broadcast:
        if (!in_place && c.rank == c.root) std::memcpy(recv, buffers.send.data(), c.layout.send_count * sizeof(T));
        MPI_Bcast(recv, recv_count, type, c.root, MPI_COMM_WORLD);
        break;
    case Collective::Reduce:
        // MPI_IN_PLACE is the root's alone; the others send from the buffer.
        if (in_place && c.rank != c.root)
            MPI_Reduce(recv, nullptr, recv_count, type, op, c.root, MPI_COMM_WORLD);
        else
            MPI_Reduce(send, recv, recv_count, type, op, c.root, MPI_COMM_WORLD);
        break;
    }
}

// Times one group of the row (warm-up, then -n calls between a barrier and
// the last return) and, with -c 1, checks one more call on fresh input.
template <typename T>
void run_group(const Options &opts, const Case &c, Placement placement, Buffers<T> &buffers, Report &report) {
    prepare_input(c, placement, buffers);
    for (int i = 0; i < opts.warmup_iters; ++i) run_once(c, placement, buffers);

    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opts.iters; ++i) run_once(c, placement, buffers);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double my_seconds = elapsed.count() / opts.iters;
    double slowest_seconds = 0;
    MPI_Allreduce(&my_seconds, &slowest_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    unsigned long long wrong = 0;
    if (opts.check) {
        // Timed in-place calls fed their output back as input: start afresh.
        prepare_input(c, placement, buffers);
        run_once(c, placement, buffers);
        const unsigned long long my_wrong = count_wrong(c, buffers);
        MPI_Allreduce(&my_wrong, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
    report.group(c, slowest_seconds, wrong, opts.check);
}

template <typename T> void run_row(const Options &opts, const Case &c, Report &report) {
    Buffers<T> buffers(c.layout);
    report.begin_row(c);
    run_group(opts, c, Placement::OutOfPlace, buffers, report);
    run_group(opts, c, Placement::InPlace, buffers, report);
    report.end_row();
}

} // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    Options opts;
    if (const int status = read_command_line("mpi-bench", argc, argv, /*launcher=*/false, &opts, rank == 0);
        status >= 0) {
        MPI_Finalize();
        return status;
    }
    if (opts.root >= nranks) {
        if (rank == 0) std::fprintf(stderr, "mpi-bench: root %d is not a rank of %d\n", opts.root, nranks);
        MPI_Finalize();
        return 2;
    }

    Report report(rank == 0);
    report.begin("mpi-bench: " + library_version() + ", " + std::to_string(nranks) + " ranks", opts);
    int status = 0;
    for (size_t bytes : size_series(opts)) {
        const Case c = case_for(opts, rank, nranks, bytes);
        if (c.layout.buffer_count > static_cast<size_t>(INT_MAX)) {
            if (rank == 0)
                std::fprintf(stderr, "mpi-bench: %zu bytes is more elements than an MPI count holds\n", bytes);
            status = 2;
            break;
        }
        with_type(opts.dtype, [&](auto type) { run_row<decltype(type)>(opts, c, report); });
    }
    const int check_status = report.finish();
    MPI_Finalize();
    return status != 0 ? status : check_status;
}
