// Google Benchmark micro-benchmarks of the reduction kernels: bytes per
// second of output for each datatype.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>

#include "reduce.hpp"
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

} // namespace

// 256 KiB per buffer (three of them fit in L2), the 512 KiB default
// NNPCCL_CHUNK_SIZE, and 4 MiB (beyond L2; the three buffers fill 12 MiB).
BENCHMARK_CAPTURE(BM_reduce, float32, NNPCCL_FLOAT32)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, float16, NNPCCL_FLOAT16)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, bfloat16, NNPCCL_BFLOAT16)->Arg(256 << 10)->Arg(512 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_reduce, float64, NNPCCL_FLOAT64)->Arg(512 << 10);
BENCHMARK_CAPTURE(BM_reduce, int8, NNPCCL_INT8)->Arg(512 << 10);

BENCHMARK_MAIN();
