// emulation-bench: how closely the link emulation paces a stream to the
// configured rate. Streams 64 MiB per iteration from rank 0 through the
// decorator over the in-process loop transport, driven the way the engine
// drives a transport (poll, move what can move, else wait_for_event with the
// engine's 10 ms slice over an inner transport that sleeps its whole timeout,
// as shm does when no peer rings), and reports the achieved rate against the
// configured one. A ratio of 1 is exact pacing; the goal is within
// 10%. BM_unpaced is the same stream without emulation: the host's ceiling,
// which the configured rates must stay well below.
//
// BM_paced_stream arguments: configured link rate (MB/s, before scale),
// message KiB, NNPCCL_EMULATE_SCALE, senders sharing the link (each to its
// own peer), hops (the first is the configured link, the others are 4x
// faster, so the first stays the bottleneck).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "emulated/emulated_transport.hpp"
#include "loop/loop_transport.hpp"
#include "quiet_doorbell.hpp"

namespace {

using namespace nnpccl;

constexpr size_t kStreamBytes = size_t{64} << 20;
constexpr int kSleepSliceMs = 10; // the engine's
constexpr int kLoopSlots = 4;

struct StreamResult {
    double gbytes_per_sec = 0;
    double waits_per_mib = 0; // how often the driver slept
};

// Streams kStreamBytes per iteration from rank 0 of `fabric` through `tx`,
// split evenly over `senders` peers, and receives it on those peers.
StreamResult stream(benchmark::State &state, Transport &tx, LoopFabric &fabric, int senders, size_t message_bytes) {
    const auto peers = static_cast<size_t>(senders) + 1;
    const size_t per_sender = kStreamBytes / static_cast<size_t>(senders);
    std::vector<unsigned char> source(message_bytes, 0x3c);
    double seconds = 0;
    size_t waits = 0;
    for (auto _ : state) {
        std::vector<size_t> sent(peers, 0);
        size_t received = 0;
        const auto start = std::chrono::steady_clock::now();
        while (received < per_sender * static_cast<size_t>(senders)) {
            const uint64_t seen = tx.event_count();
            tx.poll();
            bool moved = false;
            for (int peer = 1; peer <= senders; ++peer) {
                size_t &done = sent[static_cast<size_t>(peer)];
                while (done < per_sender) {
                    const size_t bytes = std::min(message_bytes, per_sender - done);
                    void *slot = tx.try_acquire_send(peer, 0, bytes);
                    if (slot == nullptr) break;
                    std::memcpy(slot, source.data(), bytes);
                    tx.commit_send(peer, 0, bytes);
                    done += bytes;
                    moved = true;
                }
                Transport &rx = *fabric.endpoint(peer);
                size_t bytes = 0;
                while (const void *in = rx.try_peek_recv(0, 0, &bytes)) {
                    benchmark::DoNotOptimize(in);
                    rx.release_recv(0, 0);
                    received += bytes;
                    moved = true;
                }
            }
            if (!moved) {
                tx.wait_for_event(seen, kSleepSliceMs);
                ++waits;
            }
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const auto iterations = static_cast<double>(state.iterations());
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kStreamBytes));
    StreamResult result;
    result.gbytes_per_sec = static_cast<double>(kStreamBytes) * iterations / seconds / 1e9;
    result.waits_per_mib = static_cast<double>(waits) / (iterations * static_cast<double>(kStreamBytes >> 20));
    return result;
}

void BM_paced_stream(benchmark::State &state) {
    const double link_gbps = static_cast<double>(state.range(0)) / 1000.0;
    const size_t message_bytes = static_cast<size_t>(state.range(1)) << 10;
    const double scale = static_cast<double>(state.range(2));
    const int senders = static_cast<int>(state.range(3));
    const int hops = static_cast<int>(state.range(4));
    const int nranks = 1 + senders;

    // Rank 0 reaches every peer over link 0 (shared by all of them), then
    // over a private chain of faster links per peer.
    EmulationModel model;
    model.scale = scale;
    model.links.push_back({link_gbps, 1.0});
    model.path.assign(static_cast<size_t>(nranks), std::vector<std::vector<int>>(static_cast<size_t>(nranks)));
    for (int peer = 1; peer < nranks; ++peer) {
        std::vector<int> &path = model.path[0][static_cast<size_t>(peer)];
        path.push_back(0);
        for (int h = 1; h < hops; ++h) {
            path.push_back(static_cast<int>(model.links.size()));
            model.links.push_back({link_gbps * 4, 1.0});
        }
    }
    LoopFabric fabric(nranks, message_bytes, kLoopSlots);
    nnpccl_emulation_test::QuietDoorbell quiet(fabric.endpoint(0));
    EmulatedTransport tx(&quiet, 0, model);

    const StreamResult run = stream(state, tx, fabric, senders, message_bytes);
    const double configured = link_gbps / scale;
    state.counters["configured_GBps"] = configured;
    state.counters["achieved_GBps"] = run.gbytes_per_sec;
    state.counters["achieved/configured"] = run.gbytes_per_sec / configured;
    state.counters["waits_per_MiB"] = run.waits_per_mib;
}

void BM_unpaced(benchmark::State &state) {
    const size_t message_bytes = static_cast<size_t>(state.range(0)) << 10;
    LoopFabric fabric(2, message_bytes, kLoopSlots);
    const StreamResult run = stream(state, *fabric.endpoint(0), fabric, 1, message_bytes);
    state.counters["achieved_GBps"] = run.gbytes_per_sec;
}

} // namespace

BENCHMARK(BM_unpaced)->ArgName("KiB")->Arg(512)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_paced_stream)
    ->ArgNames({"MBps", "KiB", "scale", "senders", "hops"})
    ->Args({2000, 512, 1, 1, 1})   // the pacing goal: 2 GB/s, scale 1
    ->Args({2000, 64, 1, 1, 1})    // small messages
    ->Args({2000, 512, 1, 1, 3})   // three hops, link 0 the bottleneck
    ->Args({2000, 512, 1, 2, 1})   // two streams sharing link 0: 2 GB/s in total
    ->Args({56000, 512, 28, 1, 1}) // one NNP-T ICL port (56 GB/s) at scale 28
    ->Args({500, 512, 1, 1, 1})    // a slow link
    ->Args({10000, 512, 1, 1, 1})  // a fast one: host overhead starts to show
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

int main(int argc, char **argv) {
    // The loop transport allocates a fresh buffer per message. Without this,
    // glibc hands 512 KiB blocks back to the kernel on every free, and the
    // page faults of re-touching them cap the host at a few hundred MB/s:
    // the benchmark would measure the allocator, not the pacing.
    mallopt(M_MMAP_THRESHOLD, 16 << 20); // glibc caps it at 32 MiB
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
