// The engine's drive lock: a thread that takes it call after call comes to
// hold it without the mutex, any other thread takes it back, and no two
// threads are ever inside at once, whichever way each entered.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "asymmetric_fence.hpp"
#include "drive_lock.hpp"

using namespace nnpccl;

namespace {

// Enters the short way, retrying while another thread holds the lock.
DriveLock::Held enter_short(DriveLock &lock) {
    DriveLock::Held how;
    while ((how = lock.try_enter_short()) == DriveLock::Held::No) std::this_thread::yield();
    return how;
}

// Enters the short way until this thread enters on the bias (or gives up).
DriveLock::Held enter_biased(DriveLock &lock) {
    DriveLock::Held how = DriveLock::Held::No;
    for (int i = 0; i < 1000 && how != DriveLock::Held::Biased; ++i) {
        lock.leave(how);
        how = enter_short(lock);
    }
    return how;
}

// Whether try_lock succeeds on another thread (which lets go at once).
bool try_lock_elsewhere(DriveLock &lock) {
    bool taken = false;
    std::thread([&] {
        taken = lock.try_lock();
        if (taken) lock.unlock();
    }).join();
    return taken;
}

} // namespace

TEST_CASE("a thread that takes the drive lock the short way over and over comes to hold it biased, until another "
          "thread takes it",
          "[drive-lock]") {
    DriveLock lock;
    const bool can_bias = AsymmetricFence::process().asymmetric();
    int biased = 0;
    for (int i = 0; i < 100; ++i) {
        const DriveLock::Held how = enter_short(lock);
        biased += how == DriveLock::Held::Biased;
        lock.leave(how);
    }
    // Where membarrier(2) is refused, the lock stays a plain mutex.
    CHECK(biased == (can_bias ? 100 - 16 : 0));

    std::thread([&] { std::lock_guard<DriveLock> other(lock); }).join();
    const DriveLock::Held after = enter_short(lock);
    CHECK(after == DriveLock::Held::Mutex);
    lock.leave(after);

    // try_lock from another thread while the holder is inside on its bias
    // fails without waiting, and the holder's next entry takes the mutex.
    if (can_bias) {
        const DriveLock::Held how = enter_biased(lock);
        REQUIRE(how == DriveLock::Held::Biased);
        CHECK_FALSE(try_lock_elsewhere(lock));
        lock.leave(how);
        const DriveLock::Held next = enter_short(lock);
        CHECK(next == DriveLock::Held::Mutex);
        lock.leave(next);

        // Another thread never earns it: only the lock's first biased
        // thread writes the holder's flag (src/drive_lock.cpp).
        int other_biased = 0;
        std::thread([&] {
            for (int i = 0; i < 100; ++i) {
                const DriveLock::Held other = enter_short(lock);
                other_biased += other == DriveLock::Held::Biased;
                lock.leave(other);
            }
        }).join();
        CHECK(other_biased == 0);
    }
}

TEST_CASE("a thread that takes the drive lock after a try_lock gave up waits for the biased holder to leave",
          "[drive-lock]") {
    if (!AsymmetricFence::process().asymmetric()) return; // no bias to hold
    DriveLock lock;
    const DriveLock::Held how = enter_biased(lock);
    REQUIRE(how == DriveLock::Held::Biased);
    // The try revokes the bias, finds the holder inside and gives up; the
    // bias is gone now, but the holder is still inside.
    CHECK_FALSE(try_lock_elsewhere(lock));
    std::atomic<bool> locked{false};
    std::thread locker([&] {
        std::lock_guard<DriveLock> held(lock);
        locked = true;
    });
    // However long this waits, the locker must not get in before the leave.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(locked.load());
    lock.leave(how);
    locker.join();
    CHECK(locked.load());
}

TEST_CASE("no two threads are inside the drive lock at once, whichever way each entered", "[drive-lock]") {
    DriveLock lock;
    std::atomic<int> inside{0};
    std::atomic<bool> overlapped{false};
    // Written only inside the lock: a data race (and a wrong total) if it
    // ever is not. Each entry stays a while, so a revocation that did not
    // wait for the holder would find it inside.
    volatile long counted = 0;
    constexpr int kWork = 64;
    auto critical = [&] {
        if (inside.fetch_add(1) != 0) overlapped = true;
        for (int k = 0; k < kWork; ++k) counted = counted + 1;
        inside.fetch_sub(1);
    };
    constexpr int kShort = 100000, kLocked = 200, kTried = 200;
    std::atomic<int> tried_in{0};
    // The other threads take the lock now and then, so the short way's
    // thread keeps earning the bias back (at ever longer streaks) and
    // loses it while inside.
    std::thread short_way([&] {
        for (int i = 0; i < kShort; ++i) {
            const DriveLock::Held how = enter_short(lock);
            critical();
            lock.leave(how);
        }
    });
    std::thread locker([&] {
        for (int i = 0; i < kLocked; ++i) {
            {
                std::lock_guard<DriveLock> held(lock);
                critical();
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    });
    std::thread trier([&] {
        for (int i = 0; i < kTried; ++i) {
            if (lock.try_lock()) {
                critical();
                lock.unlock();
                ++tried_in;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    });
    short_way.join();
    locker.join();
    trier.join();
    CHECK_FALSE(overlapped.load());
    CHECK(counted == long{kWork} * (kShort + kLocked + tried_in.load()));
}
