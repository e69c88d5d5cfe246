// The simulator's event loop parts (simulator.cpp): arrays on huge pages
// and the queue of pending events.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace nnpccl::sim {

// Large arrays on transparent huge pages: the event loop jumps between
// thousands of channels' steps and streams spread over hundreds of MB, and
// with 4 KiB pages nearly every such jump also misses the TLB.
template <typename T> struct HugePages {
    using value_type = T;
    static constexpr size_t kHuge = size_t{2} << 20;

    HugePages() = default;
    template <typename U> HugePages(const HugePages<U> &) {}

    T *allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        if (bytes < kHuge) {
            if (void *p = std::aligned_alloc(64, (std::max<size_t>(1, bytes) + 63) & ~size_t{63}))
                return static_cast<T *>(p);
            throw std::bad_alloc();
        }
        // Aligned to a huge page, which mmap alone does not promise.
        const size_t length = round_up(bytes), mapped = length + kHuge;
        void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        const auto at = reinterpret_cast<uintptr_t>(p);
        const uintptr_t aligned = (at + kHuge - 1) & ~(kHuge - 1);
        if (aligned > at) munmap(p, aligned - at);
        if (at + mapped > aligned + length)
            munmap(reinterpret_cast<void *>(aligned + length), at + mapped - aligned - length);
        madvise(reinterpret_cast<void *>(aligned), length, MADV_HUGEPAGE);
        return reinterpret_cast<T *>(aligned);
    }
    void deallocate(T *p, size_t n) {
        if (n * sizeof(T) < kHuge)
            std::free(p);
        else
            munmap(p, round_up(n * sizeof(T)));
    }
    static size_t round_up(size_t bytes) { return (bytes + kHuge - 1) & ~(kHuge - 1); }
    template <typename U> bool operator==(const HugePages<U> &) const { return true; }
    template <typename U> bool operator!=(const HugePages<U> &) const { return false; }
};
template <typename T> using BigVector = std::vector<T, HugePages<T>>;

enum EventKind : uint32_t { kHop, kDeliver, kStepDone };

// The pending events, earliest first, as a radix heap: event times never
// lie before the last one taken (a hop, a delivery, a reduction all end at
// or after the moment that schedules them), so each event is moved between
// buckets a few times at most instead of sifting through a binary heap of
// up to a million entries (direct's p(p-1) messages in flight). Times are
// non-negative doubles, whose bits order as unsigned integers. Events of
// one time come out last in first: nothing depends on their order but
// reproducibility, which this keeps.
class EventQueue {
public:
    struct Item {
        uint64_t key;
        uint32_t id;
        uint32_t kind;
        double time() const {
            double t;
            std::memcpy(&t, &key, sizeof t);
            return t;
        }
    };

    bool empty() const { return size_ == 0; }
    // False when the events went out of order: one was pushed before the
    // last one taken (a bug; the run then fails rather than mislead).
    bool in_order() const { return in_order_; }
    void push(double time, EventKind kind, uint32_t id) {
        uint64_t key;
        std::memcpy(&key, &time, sizeof key);
        in_order_ = in_order_ && key >= last_;
        buckets_[bucket(key)].push_back(Item{key, id, kind});
        ++size_;
    }
    Item pop() {
        settle();
        const Item item = buckets_[0].back();
        buckets_[0].pop_back();
        --size_;
        return item;
    }

private:
    // Moves the earliest events into bucket 0.
    void settle() {
        if (!buckets_[0].empty()) return;
        size_t b = 1;
        while (buckets_[b].empty()) ++b;
        BigVector<Item> &from = buckets_[b];
        last_ =
            std::min_element(from.begin(), from.end(), [](const Item &x, const Item &y) { return x.key < y.key; })->key;
        for (const Item &item : from) buckets_[bucket(item.key)].push_back(item);
        from.clear();
    }
    size_t bucket(uint64_t key) const {
        return key == last_ ? 0 : static_cast<size_t>(64 - __builtin_clzll(key ^ last_));
    }
    BigVector<Item> buckets_[65];
    uint64_t last_ = 0;
    size_t size_ = 0;
    bool in_order_ = true;
};

} // namespace nnpccl::sim
