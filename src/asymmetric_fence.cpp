#include "asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace nnpccl {

namespace {

bool register_private_expedited() {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

} // namespace

// A child of fork() runs one thread and need not inherit the parent's
// registration: it asks again before anything can use the fence.
AsymmetricFence::AsymmetricFence() : asymmetric_(register_private_expedited()) {
    pthread_atfork(nullptr, nullptr, [] {
        process().asymmetric_.store(register_private_expedited(), std::memory_order_relaxed);
    });
}

AsymmetricFence &AsymmetricFence::process() {
    // Never destroyed: threads may still fence while the process exits.
    static AsymmetricFence *fence = new AsymmetricFence;
    return *fence;
}

void AsymmetricFence::heavy() {
    if (asymmetric_.load(std::memory_order_relaxed) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
        // Refused after all (a process that lost its registration): the
        // frequent side fences for itself from now on, and a light side
        // already past its store has long left the store buffer.
        asymmetric_.store(false, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

} // namespace nnpccl
