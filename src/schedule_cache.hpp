// The communicator's schedule cache: a repeated call (a training loop)
// builds nothing, and a workload of ever-new shapes cannot grow it without
// bound. Least recently used entries go first; lookups and inserts are
// O(log n).
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <tuple>

#include "collective.hpp"
#include "schedule.hpp"

namespace nnpccl {

class ScheduleCache {
public:
    // collective, count, element size, root, in place, and the algorithm
    // (an AlgorithmInfo) when one was asked for, null for the planner's choice
    using Key = std::tuple<int, size_t, size_t, int, bool, const void *>;
    static Key key_for(const CollectiveArgs &args, const void *algorithm) {
        return {static_cast<int>(args.collective), args.count, args.elem_size, args.root, args.in_place, algorithm};
    }
    explicit ScheduleCache(size_t capacity = 256) : capacity_(capacity) {}

    std::shared_ptr<const Schedule> find(const Key &key) {
        auto it = entries_.find(key);
        if (it == entries_.end()) return nullptr;
        order_.splice(order_.begin(), order_, it->second.second);
        return it->second.first;
    }
    void insert(const Key &key, std::shared_ptr<const Schedule> schedule) {
        if (entries_.size() >= capacity_) {
            entries_.erase(order_.back());
            order_.pop_back();
        }
        order_.push_front(key);
        entries_[key] = {std::move(schedule), order_.begin()};
    }
    size_t size() const { return entries_.size(); }

private:
    size_t capacity_;
    std::list<Key> order_; // most recently used first
    std::map<Key, std::pair<std::shared_ptr<const Schedule>, std::list<Key>::iterator>> entries_;
};

} // namespace nnpccl
