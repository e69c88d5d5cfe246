// Google Benchmark micro-benchmarks of the reduction kernels: bytes per
// second of output for each datatype; and of the data path's copy.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "copy.hpp"
#include "reduce.hpp"
#include "reduce_kernels.hpp"
#include "dtype.hpp"

namespace {

struct Buffers {
    void *a, *b, *d;
    explicit Buffers(size_t bytes) {
        for (void **p : {&a, &b, &d}) {
            *p = std::aligned_alloc(4096, bytes);
            std::memset(*p, 1, bytes);
        }
    }
    ~Buffers() {
        for (void *p : {a, b, d}) std::free(p);
    }
};

// The argument is the size of each buffer in bytes, so every datatype is
// measured at the same footprint.
void BM_reduce(benchmark::State &state, nnpccl_datatype_t dt) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    const size_t count = bytes / nnpccl::datatype_size(dt);
    Buffers buf(bytes);
    for (auto _ : state) {
        nnpccl::reduce(buf.d, buf.a, buf.b, count, dt, NNPCCL_SUM, 1);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

// One kernel set's own sum, whichever set reduce() runs: the library
// times the vector sets' 16-bit sums once per process and keeps the
// fastest (NNPCCL_DEBUG=INFO says which), and these show why.
void BM_kernel_set(benchmark::State &state, nnpccl::kernels::ReduceFn sum, nnpccl_datatype_t dt) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    const size_t count = bytes / nnpccl::datatype_size(dt);
    Buffers buf(bytes);
    for (auto _ : state) {
        sum(buf.d, buf.a, buf.b, count, NNPCCL_SUM, 1);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void register_kernel_sets() {
    nnpccl::kernels::KernelSet sets[nnpccl::kernels::kMaxKernelSets];
    const int n = nnpccl::kernels::usable_kernel_sets(sets);
    for (int i = 1; i < n; ++i) {
        for (nnpccl_datatype_t dt : {NNPCCL_FLOAT16, NNPCCL_BFLOAT16}) {
            const std::string name = std::string("BM_kernel_set/") + sets[i].name + "/" + nnpccl::datatype_name(dt);
            benchmark::RegisterBenchmark(name.c_str(), BM_kernel_set, sets[i].reduce[dt], dt)
                ->Arg(256 << 10)
                ->Arg(4 << 20);
        }
    }
}

// A copy of 64 KiB whose destination lies `distance` bytes past its
// source modulo 4 KiB (common/copy.hpp): 8 is one `rep movsb` crawls
// at on AMD Zen 4, 64 one it does not.
template <bool kLibc> void BM_copy(benchmark::State &state) {
    const size_t bytes = 64 << 10;
    const size_t distance = static_cast<size_t>(state.range(0));
    Buffers buf(bytes + 4096);
    auto *dst = static_cast<unsigned char *>(buf.d) + distance;
    for (auto _ : state) {
        if (kLibc) std::memcpy(dst, buf.a, bytes);
        else nnpccl::copy_bytes(dst, buf.a, bytes);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

} // namespace

BENCHMARK_TEMPLATE(BM_copy, true)->Name("BM_copy/memcpy")->Arg(0)->Arg(8)->Arg(64);
BENCHMARK_TEMPLATE(BM_copy, false)->Name("BM_copy/copy_bytes")->Arg(0)->Arg(8)->Arg(64);

// 256 KiB per buffer (three of them fit in L2), the 512 KiB default
// NNPCCL_CHUNK_SIZE, and 4 MiB (beyond L2; the three buffers fill 12 MiB).
BENCHMARK_CAPTURE(BM_reduce, float32, NNPCCL_FLOAT32)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, float16, NNPCCL_FLOAT16)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, bfloat16, NNPCCL_BFLOAT16)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, float64, NNPCCL_FLOAT64)->Arg(512 << 10);
BENCHMARK_CAPTURE(BM_reduce, int8, NNPCCL_INT8)->Arg(512 << 10);

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    register_kernel_sets();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
