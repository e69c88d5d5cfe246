// A point in time after which a wait gives up.
#pragma once

#include <chrono>

namespace nnpccl {

using Clock = std::chrono::steady_clock;

class Deadline {
public:
    static Deadline after_seconds(double seconds) {
        return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds)));
    }
    explicit Deadline(Clock::time_point at) : at_(at) {}
    bool passed() const { return Clock::now() >= at_; }
    // Milliseconds left, clamped to [0, cap]: suits poll() and futex timeouts.
    int ms_left(int cap = 1 << 30) const {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
        if (left < 0) return 0;
        return left > cap ? cap : static_cast<int>(left);
    }
    Clock::time_point at() const { return at_; }

private:
    Clock::time_point at_;
};

} // namespace nnpccl
