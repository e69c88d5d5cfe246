// Dekker's pattern between a side that runs on every call and a side that
// runs rarely: each stores, fences, then loads what the other stored, so
// the two cannot both miss each other. A full fence waits for the core's
// earlier stores to leave it, and a small call's last store went into a
// line its peer is reading: a full fence (or a locked instruction) per
// call put a transfer between cores on every call. So where the process
// registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED, the rare side has
// membarrier(2) run that fence on every running thread of the process,
// and the frequent side need only keep its store and load in order in the
// compiler (a thread that is not running has passed the scheduler's full
// barrier). Elsewhere both sides take full fences.
//
// Users: a call's hold on its communicator against destroy (LiveComms,
// src/api_support.hpp) and the drive lock's biased entry against a
// revocation (src/drive_lock.hpp).
#pragma once

#include <atomic>

namespace nnpccl {

class AsymmetricFence {
public:
    // The process's; registered at first use, and again in a fork() child.
    static AsymmetricFence &process();

    // The frequent side's fence, between its store and its load.
    void light() const {
        if (asymmetric_.load(std::memory_order_relaxed)) std::atomic_signal_fence(std::memory_order_seq_cst);
        else std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // The rare side's: a membarrier, or a full fence once that is refused.
    // Costs a system call that interrupts the process's running threads.
    void heavy();
    // Whether light() is only a compiler fence.
    bool asymmetric() const { return asymmetric_.load(std::memory_order_relaxed); }

private:
    AsymmetricFence();
    std::atomic<bool> asymmetric_{false};
};

} // namespace nnpccl
