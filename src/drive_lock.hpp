// The engine's drive lock (src/engine.hpp): whichever thread drives the
// transports holds it, since no transport may be driven by two threads at
// once.
//
// A mutex, biased towards the one thread that takes it call after call for
// small blocking calls (Engine::try_drive_alone): that thread enters and
// leaves with plain stores. A mutex's locked instructions wait for the
// call's last stores to leave the core, and a small call's last store went
// into a line its peer is reading, so the lock put a transfer between
// cores on every small call. Any other thread takes the mutex and revokes
// the bias: the holder's next entry goes through the mutex, and the
// revoker waits while the holder is inside (Dekker's pattern,
// src/asymmetric_fence.hpp: a membarrier on the revoker's side, a
// compiler fence on the holder's).
//
// A thread earns the bias by taking the lock the short way bias_after_
// times in a row with nobody else between; each revocation by another
// thread doubles that (to kMaxBiasAfter), so a lock that keeps changing
// hands (a progress thread finishing sends after every call, say) stays a
// plain mutex and pays no membarrier. Only one thread per lock ever earns
// it, the first (a training loop's, usually): see try_enter_short. Where
// membarrier(2) is not there, no bias is given: it would cost the holder a
// full fence, as the mutex does.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace nnpccl {

class DriveLock {
public:
    // Lockable, for every thread and purpose (waits, the progress thread,
    // close, abort); a bias held by another thread is revoked. lock()
    // waits while the bias holder is inside; try_lock() does not.
    void lock();
    bool try_lock();
    void unlock() { mutex_.unlock(); }

    // The short way of a blocking call: how this thread now holds the
    // lock, or Held::No when another thread does. Give it back with leave().
    enum class Held : uint8_t { No, Biased, Mutex };
    Held try_enter_short();
    void leave(Held how) {
        if (how == Held::Biased) inside_.store(false, std::memory_order_release);
        else if (how == Held::Mutex) mutex_.unlock();
    }

private:
    static constexpr uint32_t kFirstBiasAfter = 16;
    static constexpr uint32_t kMaxBiasAfter = uint32_t{1} << 16;

    // Under mutex_: takes the bias back, if any. With `wait`, returns once
    // no thread is inside on a bias; without, returns false when one is.
    bool revoke(bool wait);

    std::mutex mutex_;
    std::atomic<uintptr_t> biased_to_{0}; // the holder's thread (pthread_self), 0 when none
    std::atomic<bool> inside_{false};     // the holder is inside, entered without the mutex
    // Under mutex_: who took it the short way last, how many times in a
    // row, and how many such takes earn the bias.
    uintptr_t streak_thread_ = 0;
    uint32_t streak_ = 0;
    uint32_t bias_after_ = kFirstBiasAfter;
    uintptr_t bias_thread_ = 0; // the one thread that may hold the bias, once one has
};

} // namespace nnpccl
