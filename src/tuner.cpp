#include "tuner.hpp"

#include <algorithm>
#include <cmath>

namespace nnpccl {

int size_class(size_t bytes) {
    return bytes == 0 ? -1 : 63 - __builtin_clzll(static_cast<unsigned long long>(bytes));
}

int tuning_batch(double predicted_us) {
    if (!(predicted_us > 0)) return 8;
    return static_cast<int>(std::clamp(std::ceil(kTuningBatchUs / predicted_us), 2.0, 8.0));
}

TuningEntry::TuningEntry(std::vector<const AlgorithmInfo *> candidates, int batch)
    : candidates_(std::move(candidates)), batch_(std::max(1, batch)),
      batches_(candidates_.size() * static_cast<size_t>(kTuningRounds)) {}

const AlgorithmInfo *TuningEntry::next(int *trial, bool *sync_before, bool *agree_after) {
    *trial = -1;
    *sync_before = false;
    *agree_after = false;
    if (issued_ < trials()) {
        const size_t n = candidates_.size(), call = issued_;
        *trial = static_cast<int>(call);
        *sync_before = call >= n && (call - n) % static_cast<size_t>(batch_) == 0;
        *agree_after = ++issued_ == trials();
        return candidates_[call < n ? call : candidate_of_batch((call - n) / static_cast<size_t>(batch_))];
    }
    return decided();
}

void TuningEntry::record(int trial, double us) {
    const size_t n = candidates_.size();
    if (trial < 0 || static_cast<size_t>(trial) < n || static_cast<size_t>(trial) >= trials()) return; // untimed
    std::lock_guard<std::mutex> lock(mutex_);
    Batch &batch = batches_[(static_cast<size_t>(trial) - n) / static_cast<size_t>(batch_)];
    batch.sum_us += us;
    ++batch.calls;
}

std::vector<double> TuningEntry::figures() const {
    std::vector<double> best(candidates_.size(), 0);
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t b = 0; b < batches_.size(); ++b) {
        if (batches_[b].calls == 0) continue;
        const double mean = batches_[b].sum_us / batches_[b].calls;
        double &figure = best[candidate_of_batch(b)];
        if (figure == 0 || mean < figure) figure = mean;
    }
    return best;
}

void TuningEntry::decide(const std::vector<double> &agreed) {
    size_t best = 0;
    bool any = false;
    for (size_t k = 0; k < candidates_.size() && k < agreed.size(); ++k) {
        if (!(agreed[k] > 0)) continue; // a rank did not time it (operations still in flight)
        if (!any || agreed[k] < agreed[best]) best = k;
        any = true;
    }
    decided_.store(candidates_[any ? best : 0], std::memory_order_release);
}

Tuner::Key Tuner::key_for(const CollectiveArgs &args) { return key_for(args, call_bytes(args)); }

Tuner::Key Tuner::key_for(const CollectiveArgs &args, size_t bytes) {
    return {static_cast<int>(args.collective), args.elem_size, size_class(bytes)};
}

std::shared_ptr<TuningEntry> Tuner::find(const Key &key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second;
}

std::shared_ptr<TuningEntry> Tuner::add(const Key &key, const std::vector<Prediction> &predictions) {
    const std::vector<const AlgorithmInfo *> close = close_candidates(predictions, kTuningWindow);
    if (close.size() < 2) {
        model_only_.insert(key);
        return nullptr;
    }
    double fastest = 0;
    for (const Prediction &p : predictions)
        if (p.algorithm == close.front()) fastest = p.time_us;
    auto entry = std::make_shared<TuningEntry>(close, tuning_batch(fastest));
    entries_[key] = entry;
    return entry;
}

} // namespace nnpccl
