#include "loop_transport.hpp"

namespace nnpccl {

namespace {

class LoopEndpoint final : public Transport {
public:
    LoopEndpoint(LoopFabric &fabric, int rank) : fabric_(fabric), rank_(rank) {}
    const char *name() const override { return "loop"; }
    size_t max_message_bytes() const override { return fabric_.max_message_bytes(); }

    void *try_acquire_send(int peer, int channel) override {
        LoopFabric::Stream &s = fabric_.stream(rank_, peer, channel);
        if (s.messages.size() >= static_cast<size_t>(fabric_.slots())) return nullptr;
        if (!s.staged) {
            s.staging.assign(fabric_.max_message_bytes(), 0);
            s.staged = true;
        }
        return s.staging.data();
    }
    void commit_send(int peer, int channel, size_t bytes) override {
        LoopFabric::Stream &s = fabric_.stream(rank_, peer, channel);
        s.staging.resize(bytes);
        s.messages.push_back(std::move(s.staging));
        s.staging.clear();
        s.staged = false;
    }
    const void *try_peek_recv(int peer, int channel, size_t *bytes) override {
        LoopFabric::Stream &s = fabric_.stream(peer, rank_, channel);
        if (s.messages.empty()) return nullptr;
        *bytes = s.messages.front().size();
        // A zero-byte message still needs a non-null address.
        static const unsigned char empty = 0;
        return s.messages.front().empty() ? &empty : s.messages.front().data();
    }
    void release_recv(int peer, int channel) override { fabric_.stream(peer, rank_, channel).messages.pop_front(); }
    uint64_t event_count() const override { return 0; }
    void wait_for_event(uint64_t, int) override {}
    Status check_peers() override { return Status::ok(); }
    void announce_abort(nnpccl_result_t) override {}

private:
    LoopFabric &fabric_;
    int rank_;
};

} // namespace

LoopFabric::LoopFabric(int nranks, size_t max_message_bytes, int slots)
    : max_message_bytes_(max_message_bytes), slots_(slots) {
    for (int r = 0; r < nranks; ++r) endpoints_.push_back(std::make_unique<LoopEndpoint>(*this, r));
}

size_t LoopFabric::in_flight() const {
    size_t n = 0;
    for (const auto &entry : streams_) n += entry.second.messages.size();
    return n;
}

} // namespace nnpccl
