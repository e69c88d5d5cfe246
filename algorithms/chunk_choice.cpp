#include "chunk_choice.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "registry.hpp"

namespace nnpccl {

namespace {

bool model_picks_chunk(const CollectiveArgs &args, const Topology &t) {
    return t.machine().shape() != Shape::Flat && !t.spans_hosts() && !is_point_to_point(args.collective) &&
           args.collective != Collective::Barrier && args.nranks > 1 && args.count > 0;
}

// A call shape and the machine it is planned on. The machine is named by
// its address, its name and its size, enough to tell apart the topologies
// one process holds at once.
using ChoiceKey = std::tuple<const char *, int, size_t, size_t, size_t, int, int, bool, const Topology *, std::string,
                             size_t, size_t>;

ChoiceKey key_of(const AlgorithmInfo &a, const CollectiveArgs &args, const Topology &t) {
    return {a.name,
            static_cast<int>(args.collective),
            args.count,
            args.elem_size,
            args.chunk_elems,
            args.root,
            args.nranks,
            args.in_place,
            &t,
            t.name(),
            t.machine().links().size(),
            t.machine().chips().size()};
}

// Bounded: a long run of distinct calls starts it afresh.
constexpr size_t kMostRemembered = 4096;

size_t search_chunk(const AlgorithmInfo &a, const CollectiveArgs &args, const Topology &t) {
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    const size_t least = std::max<size_t>(1, kLeastPlannedChunkBytes / std::max<size_t>(1, args.elem_size));
    const CostInputs costs; // off the host no figure of CostInputs enters a prediction
    CollectiveArgs at = args;
    size_t best = chunk;
    double best_us = a.predict_us(args, t, costs);
    size_t candidate = chunk;
    double last_us = best_us;
    int slower_in_a_row = 0;
    for (int k = 1; k < kMostChunkCandidates && candidate > least; ++k) {
        candidate = std::max(least, candidate / 2);
        at.chunk_elems = candidate;
        const double us = a.predict_us(at, t, costs);
        if (us < best_us * (1 - kSmallerChunkGain)) {
            best = candidate;
            best_us = us;
        }
        // Past the pipeline's best depth each halving adds α per message
        // and gains nothing: once two halvings in a row are slower, the
        // smaller ones are slower still (one may be, where a smaller
        // message changes how a torus phase cuts its slices).
        slower_in_a_row = us > last_us ? slower_in_a_row + 1 : 0;
        if (slower_in_a_row == 2) break;
        last_us = us;
    }
    return best;
}

} // namespace

size_t planned_chunk_elems(const AlgorithmInfo &algorithm, const CollectiveArgs &args, const Topology &topology) {
    const size_t chunk = std::max<size_t>(1, args.chunk_elems);
    // A call no larger than the least candidate runs in the same messages whichever is chosen.
    if (!model_picks_chunk(args, topology) || call_bytes(args) <= kLeastPlannedChunkBytes ||
        chunk * args.elem_size <= kLeastPlannedChunkBytes)
        return chunk;
    static std::mutex mutex;
    static std::map<ChoiceKey, size_t> remembered;
    const ChoiceKey key = key_of(algorithm, args, topology);
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (auto it = remembered.find(key); it != remembered.end()) return it->second;
    }
    const size_t chosen = search_chunk(algorithm, args, topology);
    std::lock_guard<std::mutex> lock(mutex);
    if (remembered.size() >= kMostRemembered) remembered.clear();
    remembered.emplace(key, chosen);
    return chosen;
}

} // namespace nnpccl
