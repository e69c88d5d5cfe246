// A transport wrapper for the emulation tests and benchmark: forwards
// everything to the wrapped transport but, like shm when no peer rings, sleeps
// the whole timeout in wait_for_event. The loop transport returns at once,
// which would hide an emulation that sleeps too long.
#pragma once

#include <chrono>
#include <thread>

#include "transport.hpp"

namespace nnpccl_emulation_test {

class QuietDoorbell final : public nnpccl::Transport {
public:
    explicit QuietDoorbell(nnpccl::Transport *inner) : inner_(inner) {}
    const char *name() const override { return "quiet"; }
    size_t max_message_bytes() const override { return inner_->max_message_bytes(); }
    void *try_acquire_send(int peer, int channel, size_t bytes) override {
        return inner_->try_acquire_send(peer, channel, bytes);
    }
    void commit_send(int peer, int channel, size_t bytes) override { inner_->commit_send(peer, channel, bytes); }
    const void *try_peek_recv(int peer, int channel, size_t *bytes) override {
        return inner_->try_peek_recv(peer, channel, bytes);
    }
    void release_recv(int peer, int channel) override { inner_->release_recv(peer, channel); }
    uint64_t event_count() const override { return 0; }
    void wait_for_event(uint64_t, int timeout_ms) override {
        std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    }
    nnpccl::Status check_peers() override { return nnpccl::Status::ok(); }
    void announce_abort(const nnpccl::Status &why) override { inner_->announce_abort(why); }

private:
    nnpccl::Transport *inner_;
};

} // namespace nnpccl_emulation_test
