#include "drive_lock.hpp"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "asymmetric_fence.hpp"

namespace nnpccl {

namespace {

// Unique among live threads, and read without a thread-local lookup. A
// thread that reuses an exited one's id may enter on its bias: the bias
// only says no other live thread enters without revoking it.
uintptr_t this_thread_id() { return static_cast<uintptr_t>(pthread_self()); }

} // namespace

DriveLock::Held DriveLock::try_enter_short() {
    const uintptr_t me = this_thread_id();
    if (biased_to_.load(std::memory_order_relaxed) == me) {
        inside_.store(true, std::memory_order_relaxed);
        AsymmetricFence::process().light();
        // Ordered after the store above: a revoker either sees this thread
        // inside, or this load sees the bias gone.
        if (biased_to_.load(std::memory_order_acquire) == me) return Held::Biased;
        inside_.store(false, std::memory_order_release);
    }
    if (!mutex_.try_lock()) return Held::No;
    if (!revoke(false)) {
        mutex_.unlock();
        return Held::No;
    }
    if (streak_thread_ == me) {
        ++streak_;
    } else {
        streak_thread_ = me;
        streak_ = 1;
    }
    // Takes effect at this thread's next entry, after it has let go of the
    // mutex. Only ever this lock's first biased thread: `inside_` is
    // written without a read-modify-write, so a second thread's late
    // entry attempt (one that read the bias just before it was revoked,
    // then stalled) could clear the flag of a holder inside.
    if (streak_ >= bias_after_ && (bias_thread_ == 0 || bias_thread_ == me) &&
        AsymmetricFence::process().asymmetric()) {
        bias_thread_ = me;
        biased_to_.store(me, std::memory_order_relaxed);
    }
    return Held::Mutex;
}

void DriveLock::lock() {
    mutex_.lock();
    revoke(true);
    streak_thread_ = 0;
}

bool DriveLock::try_lock() {
    if (!mutex_.try_lock()) return false;
    if (!revoke(false)) {
        mutex_.unlock();
        return false;
    }
    streak_thread_ = 0;
    return true;
}

bool DriveLock::revoke(bool wait) {
    const uintptr_t holder = biased_to_.load(std::memory_order_relaxed);
    if (holder != 0) {
        biased_to_.store(0, std::memory_order_relaxed);
        // This thread's own bias: it is not inside, since it is here, and
        // no one else was when it was given (see try_enter_short).
        if (holder == this_thread_id()) return true;
        bias_after_ = std::min(bias_after_ * 2, kMaxBiasAfter);
        AsymmetricFence::process().heavy();
    }
    // Looked at even when no bias is left: a try_lock that revoked it
    // while its holder was inside gave up, and the holder may still be
    // there. It cannot enter again on the bias, so the flag only clears.
    if (!inside_.load(std::memory_order_acquire)) return true;
    if (!wait) return false;
    // The holder is inside one blocking call, which may wait on its peers
    // for long: yield briefly, then nap. Only a lock that changes hands
    // pays this, once, since the bias is gone.
    for (int turns = 0; inside_.load(std::memory_order_acquire); ++turns) {
        if (turns < 100) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
}

} // namespace nnpccl
