// The scratch pool hands freed buffers to the next operation that fits in
// them, keeps only a few, and outlives the communicator for leases still out.
#include <catch2/catch.hpp>

#include <memory>

#include "scratch_pool.hpp"

using namespace nnpccl;

TEST_CASE("a freed scratch buffer serves the next call that fits in it", "[scratch]") {
    auto pool = std::make_shared<ScratchPool>();
    unsigned char *first = nullptr;
    {
        ScratchPool::Lease lease = pool->acquire(1 << 20);
        first = lease.get();
        REQUIRE(first != nullptr);
        first[(1 << 20) - 1] = 7; // the whole size is usable
    }
    REQUIRE(pool->free_buffers() == 1);
    ScratchPool::Lease smaller = pool->acquire(1000);
    CHECK(smaller.get() == first);
    CHECK(pool->free_buffers() == 0);
    // While it is out, a second caller gets a buffer of its own.
    ScratchPool::Lease other = pool->acquire(1000);
    CHECK(other.get() != first);
}

TEST_CASE("a call larger than every free buffer gets a new one, and the smaller ones go", "[scratch]") {
    auto pool = std::make_shared<ScratchPool>();
    { ScratchPool::Lease small = pool->acquire(64), other = pool->acquire(128); }
    REQUIRE(pool->free_buffers() == 2);
    unsigned char *big_buffer = nullptr;
    {
        ScratchPool::Lease big = pool->acquire(4096);
        big_buffer = big.get();
        CHECK(pool->free_buffers() == 0); // a growing workload keeps only its largest
    }
    CHECK(pool->free_buffers() == 1);
    ScratchPool::Lease again = pool->acquire(64);
    CHECK(again.get() == big_buffer);
}

TEST_CASE("the pool keeps its largest free buffers, no more than its limit", "[scratch]") {
    auto pool = std::make_shared<ScratchPool>(2);
    unsigned char *largest = nullptr;
    {
        ScratchPool::Lease a = pool->acquire(100), b = pool->acquire(300), c = pool->acquire(200);
        largest = b.get();
    }
    CHECK(pool->free_buffers() == 2);
    ScratchPool::Lease again = pool->acquire(250);
    CHECK(again.get() == largest);
    ScratchPool::Lease next = pool->acquire(150);
    CHECK(next.get() != nullptr);
    CHECK(pool->free_buffers() == 0); // the 100-byte buffer was the one dropped
}

TEST_CASE("no bytes need no buffer", "[scratch]") {
    auto pool = std::make_shared<ScratchPool>();
    ScratchPool::Lease none = pool->acquire(0);
    CHECK(none.get() == nullptr);
}

TEST_CASE("a lease returned after its pool's owner let go frees cleanly", "[scratch]") {
    auto pool = std::make_shared<ScratchPool>();
    ScratchPool::Lease lease = pool->acquire(128);
    std::weak_ptr<ScratchPool> watch = pool;
    pool.reset(); // the communicator is destroyed while an operation still holds its scratch
    CHECK_FALSE(watch.expired());
    lease = ScratchPool::Lease();
    CHECK(watch.expired());
}
