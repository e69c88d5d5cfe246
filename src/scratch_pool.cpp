#include "scratch_pool.hpp"

#include <algorithm>

namespace nnpccl {

ScratchPool::Lease &ScratchPool::Lease::operator=(Lease &&other) noexcept {
    if (this != &other) {
        give_back();
        pool_ = std::move(other.pool_);
        buffer_ = std::move(other.buffer_);
    }
    return *this;
}

void ScratchPool::Lease::give_back() {
    if (pool_ != nullptr && buffer_.data != nullptr) pool_->give_back(std::move(buffer_));
    pool_.reset();
    buffer_ = {};
}

ScratchPool::Lease ScratchPool::acquire_buffer(size_t bytes) {
    std::vector<Lease::Buffer> dropped; // freed outside the lock
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto fits = std::find_if(free_.begin(), free_.end(), [&](const Lease::Buffer &b) { return b.bytes >= bytes; });
        if (fits != free_.end()) {
            Lease::Buffer buffer = std::move(*fits);
            free_.erase(fits);
            return Lease(shared_from_this(), std::move(buffer));
        }
        // Every free buffer is too small for this call, and goes: a workload
        // that grows keeps only its largest, while calls in flight together
        // keep one each.
        dropped.swap(free_);
    }
    // Not zeroed: every schedule writes its scratch before it reads it.
    Lease::Buffer buffer{std::unique_ptr<unsigned char[]>(new unsigned char[bytes]), bytes};
    return Lease(shared_from_this(), std::move(buffer));
}

size_t ScratchPool::free_buffers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
}

void ScratchPool::give_back(Lease::Buffer buffer) {
    Lease::Buffer dropped; // freed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto at = std::upper_bound(free_.begin(), free_.end(), buffer.bytes,
                               [](size_t bytes, const Lease::Buffer &b) { return bytes < b.bytes; });
    free_.insert(at, std::move(buffer));
    if (free_.size() > kept_) {
        dropped = std::move(free_.front());
        free_.erase(free_.begin());
    }
}

} // namespace nnpccl
