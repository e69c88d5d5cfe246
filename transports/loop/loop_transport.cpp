#include "loop_transport.hpp"

namespace nnpccl {

namespace {

class LoopEndpoint final : public Transport {
public:
    LoopEndpoint(LoopFabric &fabric, int rank) : fabric_(fabric), rank_(rank) {}
    const char *name() const override { return "loop"; }
    size_t max_message_bytes() const override { return fabric_.max_message_bytes(); }

    void *try_acquire_send(int peer, int channel, size_t /*bytes*/) override {
        LoopFabric::Stream &s = fabric_.stream(rank_, peer, channel);
        if (s.messages.size() >= static_cast<size_t>(fabric_.slots())) return nullptr;
        if (!s.staged) {
            s.staging.assign(fabric_.max_message_bytes(), 0);
            s.staged = true;
        }
        return s.staging.data();
    }
    void commit_send(int peer, int channel, size_t bytes) override { commit_send_in_place(peer, channel, bytes, nullptr, 0); }
    bool sends_in_place(size_t) const override { return fabric_.sends_in_place(); }
    uint64_t commit_send_in_place(int peer, int channel, size_t header_bytes, const void *data, size_t bytes) override {
        LoopFabric::Stream &s = fabric_.stream(rank_, peer, channel);
        s.staging.resize(header_bytes);
        LoopFabric::Message m;
        m.bytes = std::move(s.staging);
        m.in_place = static_cast<const unsigned char *>(data);
        m.in_place_bytes = data != nullptr ? bytes : 0;
        s.messages.push_back(std::move(m));
        s.staging.clear();
        s.staged = false;
        return ++s.sent;
    }
    bool send_done(int peer, int channel, uint64_t ticket) const override {
        return fabric_.stream(rank_, peer, channel).delivered >= ticket;
    }
    const void *try_peek_recv(int peer, int channel, size_t *bytes) override {
        LoopFabric::Stream &s = fabric_.stream(peer, rank_, channel);
        if (s.messages.empty()) return nullptr;
        LoopFabric::Message &m = s.messages.front();
        if (m.in_place != nullptr) {
            m.bytes.insert(m.bytes.end(), m.in_place, m.in_place + m.in_place_bytes);
            m.in_place = nullptr;
        }
        *bytes = m.bytes.size();
        // A zero-byte message still needs a non-null address.
        static const unsigned char empty = 0;
        return m.bytes.empty() ? &empty : m.bytes.data();
    }
    void release_recv(int peer, int channel) override {
        LoopFabric::Stream &s = fabric_.stream(peer, rank_, channel);
        s.messages.pop_front();
        ++s.delivered;
    }
    uint64_t event_count() const override { return 0; }
    void wait_for_event(uint64_t, int) override {}
    Status check_peers() override { return Status::ok(); }
    void announce_abort(const Status &) override {}

private:
    LoopFabric &fabric_;
    int rank_;
};

} // namespace

LoopFabric::LoopFabric(int nranks, size_t max_message_bytes, int slots, Sends sends)
    : max_message_bytes_(max_message_bytes), slots_(slots), sends_(sends) {
    for (int r = 0; r < nranks; ++r) endpoints_.push_back(std::make_unique<LoopEndpoint>(*this, r));
}

size_t LoopFabric::in_flight() const {
    size_t n = 0;
    for (const auto &entry : streams_) n += entry.second.messages.size();
    return n;
}

} // namespace nnpccl
