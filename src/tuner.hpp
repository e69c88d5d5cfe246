// Measured tuning on the host. The cost model plans `flat` with one figure
// for the host's links and a rough term for ranks that share cores, and on
// such a host the real order of close algorithms moves with the machine's
// state (which cores are busy, how fast copies between them run). So where
// the model leaves more than one algorithm within kTuningWindow of its
// fastest prediction, the communicator's first calls of that (collective,
// element size, power-of-two size class) try those algorithms in turn,
// every rank timing its own runs; then one internal allreduce (each
// candidate's figure summed over the ranks) gives every rank the same
// figures, and the fastest measured runs from then on. Cost: candidates x
// (1 + rounds x batch) calls of the class at its start, plus one allreduce
// of a few doubles. Topologies that simulate another machine (the NNP-T
// presets) are left to the model: this host's timings say nothing about
// them. docs/performance.md, "Selection", has how well it chooses.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "planner.hpp"
#include "planning.hpp" // kTuningWindow

namespace nnpccl {

// A communicator's first collectives are left to the model: a fresh job
// runs cold (first-touched pages, caches, the progress thread's start),
// which would time the first trials against later ones.
constexpr uint64_t kTuningAfterCalls = 16;

// floor(log2(bytes)), -1 for none: the size classes of tuning and of INFO's plan log.
int size_class(size_t bytes);

// The trials: every candidate runs once untimed (its first call at a size
// pays for first touches of its memory), then in each of kTuningRounds
// rounds every candidate runs a batch of consecutive calls, the order
// turning by one each round. Every batch starts with a barrier, as
// ccl-bench's timed calls do: without it the root of a broadcast runs
// ahead into the next batch, whose algorithm then pays for the wait. A
// rank's figure for a batch is its calls' mean time; its figure for a
// candidate is its fastest batch. Noise on a shared host only ever adds
// time (a core taken away for a while, a call that runs cold), so the
// fastest batch is the one least disturbed; the median of the batches let
// that noise decide. A batch holds enough calls for about kTuningBatchUs
// of predicted time, 2 to 8 of them: with fewer, a pipelined algorithm's
// start behind the barrier is charged to too few calls and it loses to
// one-shot algorithms it beats in a real loop.
constexpr int kTuningRounds = 5;
constexpr double kTuningBatchUs = 4000;
int tuning_batch(double predicted_us);

// The tuning of one (collective, element size, size class). The issuing
// thread asks next() per call; timings arrive from whichever thread
// finishes the operations.
class TuningEntry {
public:
    TuningEntry(std::vector<const AlgorithmInfo *> candidates, int batch);

    // The algorithm of the next call: a trial's (*trial set to identify it
    // for record()) while trials remain; the decision once the agreement
    // has finished; otherwise nullptr, meaning "decided by the time the call
    // runs" (the agreement runs before it). *sync_before is set on the
    // first call of each timed batch: the caller issues a barrier ahead of
    // it, so that every rank starts the batch together. *agree_after is set
    // on the last trial: the caller then issues the agreement behind it.
    const AlgorithmInfo *next(int *trial, bool *sync_before, bool *agree_after);
    // Trial calls still to be issued (the same count on every rank).
    size_t trials_left() const { return trials() - issued_; }

    void record(int trial, double us);
    // This rank's figure per candidate, in candidate order (0: not timed):
    // the mean time per call of its fastest batch.
    std::vector<double> figures() const;
    // Takes the agreement's result (each candidate's figure over all ranks,
    // 0 where some rank did not time it) and fixes the choice: the fastest
    // candidate timed everywhere, else the model's first.
    void decide(const std::vector<double> &agreed);
    // nullptr until decide().
    const AlgorithmInfo *decided() const { return decided_.load(std::memory_order_acquire); }

    const std::vector<const AlgorithmInfo *> &candidates() const { return candidates_; }
    int batch() const { return batch_; }
    size_t trials() const { return candidates_.size() * static_cast<size_t>(1 + kTuningRounds * batch_); }

private:
    std::vector<const AlgorithmInfo *> candidates_;
    int batch_;
    size_t issued_ = 0; // trials issued; touched by the issuing thread only
    mutable std::mutex mutex_;
    struct Batch {
        double sum_us = 0;
        int calls = 0;
    };
    // By (trial - candidates) / batch_, after the untimed first calls:
    // round-major, then position in the round.
    std::vector<Batch> batches_;
    // The candidate of timed batch b: round b / n starts one further on.
    size_t candidate_of_batch(size_t b) const {
        const size_t n = candidates_.size();
        return (b % n + b / n) % n;
    }
    std::atomic<const AlgorithmInfo *> decided_{nullptr};
};

// A communicator's tuning entries, by what every rank of a call shares:
// the collective, the element size and the size class. Not in-place, which
// ranks of one call may see differently, and not the root or the op, which
// change no algorithm's standing.
class Tuner {
public:
    using Key = std::tuple<int, size_t, int>;
    static Key key_for(const CollectiveArgs &args);
    static Key key_for(const CollectiveArgs &args, size_t bytes); // bytes: call_bytes(args)

    // The entry of `key`, or null when it has none yet.
    std::shared_ptr<TuningEntry> find(const Key &key) const;
    // Makes the key's entry from the model's predictions; null when at most
    // one algorithm is close enough to need measuring (the model decides).
    std::shared_ptr<TuningEntry> add(const Key &key, const std::vector<Prediction> &predictions);
    // Keys the model decided, so the predictions are not made again.
    bool model_decides(const Key &key) const { return model_only_.count(key) != 0; }

private:
    std::map<Key, std::shared_ptr<TuningEntry>> entries_;
    std::set<Key> model_only_;
};

} // namespace nnpccl
