// Scratch buffers kept across operations. A schedule's scratch can be as
// large as the call (halving-doubling reduce-scatter holds all p blocks),
// and glibc maps allocations of 32 MiB and more afresh every time: each
// call would then fault every page in again, which costs more than the
// collective itself on a host where faults are slow (docs/performance.md,
// "Scratch and first touch"). The pool
// keeps a few freed buffers and hands out the smallest that fits; a call
// that none fits gets a new one, and the smaller free ones are released.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace nnpccl {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
public:
    // A buffer on loan; it goes back to the pool when the lease is destroyed,
    // whichever thread does that, and even after the communicator is gone.
    class Lease {
    public:
        Lease() = default;
        Lease(const Lease &) = delete;
        Lease &operator=(const Lease &) = delete;
        Lease(Lease &&) = default;
        Lease &operator=(Lease &&other) noexcept;
        ~Lease() {
            if (pool_ != nullptr) give_back();
        }
        unsigned char *get() const { return buffer_.data.get(); }

    private:
        friend class ScratchPool;
        struct Buffer {
            std::unique_ptr<unsigned char[]> data;
            size_t bytes = 0;
        };
        Lease(std::shared_ptr<ScratchPool> pool, Buffer buffer) : pool_(std::move(pool)), buffer_(std::move(buffer)) {}
        void give_back();
        std::shared_ptr<ScratchPool> pool_;
        Buffer buffer_;
    };

    // Free buffers kept beyond this many are released, smallest first.
    explicit ScratchPool(size_t kept = 4) : kept_(kept) {}

    // A buffer of at least `bytes` (not zeroed); an empty lease for 0.
    Lease acquire(size_t bytes) { return bytes == 0 ? Lease() : acquire_buffer(bytes); }
    size_t free_buffers() const;

private:
    Lease acquire_buffer(size_t bytes);
    void give_back(Lease::Buffer buffer);
    size_t kept_;
    mutable std::mutex mutex_;
    std::vector<Lease::Buffer> free_; // by size, smallest first
};

} // namespace nnpccl
