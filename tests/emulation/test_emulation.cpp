// Link emulation: the link model checked with exact times (LinkTimeline),
// then the decorator over the in-process loop transport checked in real time.
// Real-time checks are lower bounds (never visible before due) plus ordering;
// upper bounds are loose, since this runs on a 2-core, noisy machine.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "emulated/emulated_transport.hpp"
#include "loop/loop_transport.hpp"
#include "quiet_doorbell.hpp"

using namespace nnpccl;

namespace {

constexpr int64_t kMs = 1000000; // ns

// A model of `nranks` ranks with the given links and no paths yet.
EmulationModel model_with(int nranks, std::vector<EmulatedLink> links, double scale = 1.0) {
    EmulationModel m;
    m.links = std::move(links);
    m.path.assign(static_cast<size_t>(nranks), std::vector<std::vector<int>>(static_cast<size_t>(nranks)));
    m.scale = scale;
    return m;
}

// Zero-filled memory for a link table shared by LinkTimelines, as
// share_link_table makes it.
struct SharedTable {
    SharedTable(size_t links, int intervals_per_link = EmulationOptions().intervals_per_link)
        : words((LinkTimeline::table_bytes(links, intervals_per_link) + 7) / 8, 0) {}
    void *data() { return words.data(); }
    std::vector<uint64_t> words;
};

using Busy = std::vector<std::pair<int64_t, int64_t>>;

// Sends one message of `bytes` (filled with `fill`) from `tx` to `peer`.
void send_one(Transport &tx, int peer, int channel, size_t bytes, unsigned char fill) {
    void *buf = tx.try_acquire_send(peer, channel, bytes);
    REQUIRE(buf != nullptr);
    std::memset(buf, fill, bytes);
    tx.commit_send(peer, channel, bytes);
}

// Polls `senders` until `rx` sees a message from `from` on `channel`; returns
// the time it became visible. Gives up (failing the test) after 10 s.
int64_t poll_until_visible(std::vector<Transport *> senders, Transport &rx, int from, int channel) {
    const int64_t give_up = emulation_now_ns() + 10000 * kMs;
    size_t bytes = 0;
    while (true) {
        for (Transport *t : senders) t->poll();
        if (rx.try_peek_recv(from, channel, &bytes) != nullptr) return emulation_now_ns();
        if (emulation_now_ns() >= give_up) FAIL("no message from rank " << from << " within 10 s");
    }
}

} // namespace

TEST_CASE("link model: one hop costs latency plus bytes over bandwidth", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 2.0}}); // 1 GB/s = 1 byte/ns, 2 us
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0}, 1000, 10000) == 10000 + 2000 + 1000);
    CHECK(links.reserve({}, 1000, 10000) == 10000);
}

TEST_CASE("link model: latency adds per hop, bandwidth is the bottleneck's", "[emulation][model]") {
    EmulationModel m = model_with(2, {{4.0, 1.0}, {1.0, 2.0}, {4.0, 3.0}});
    LinkTimeline links(m, nullptr);
    // 4000 bytes: 1+2+3 us of latency and 4000 ns on the 1 GB/s link.
    CHECK(links.reserve({0, 1, 2}, 4000, 0) == 6000 + 4000);
    // One hop alone, long after: only its own latency and rate.
    CHECK(links.reserve({2}, 4000, 1000000) == 1000000 + 3000 + 1000);
}

TEST_CASE("link model: transfers sharing a link are served in turn", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}, {8.0, 0.0}, {8.0, 0.0}});
    LinkTimeline links(m, nullptr);
    // Two transfers ready at once over link 0: the second takes twice as long.
    CHECK(links.reserve({0}, 1000000, 0) == 1000000);
    CHECK(links.reserve({0}, 1000000, 0) == 2000000);
    // Once the link has drained, a transfer sees it free again.
    CHECK(links.reserve({0}, 1000000, 5000000) == 6000000);
    // Two paths that merge on link 0 (a fast link into a slow shared one):
    // the second waits for the first on link 0 only.
    CHECK(links.reserve({1, 0}, 1000000, 10000000) == 11000000);
    CHECK(links.reserve({2, 0}, 1000000, 10000000) == 12000000);
}

TEST_CASE("link model: scale dilates time", "[emulation][model]") {
    EmulationModel m = model_with(2, {{2.0, 1.0}}, 4.0);
    LinkTimeline links(m, nullptr);
    // 2 GB/s / 4 = 0.5 byte/ns; 1 us x 4.
    CHECK(links.reserve({0}, 1000, 0) == 2000 + 4000);
}

TEST_CASE("link model: a shared table makes two ranks' transfers contend", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    SharedTable table(1);
    LinkTimeline rank0(m, table.data()), rank1(m, table.data());
    CHECK(rank0.reserve({0}, 1000, 0) == 1000);
    CHECK(rank1.reserve({0}, 1000, 0) == 2000);
    // Private state: each rank sees the link free.
    LinkTimeline alone0(m, nullptr), alone1(m, nullptr);
    CHECK(alone0.reserve({0}, 1000, 0) == 1000);
    CHECK(alone1.reserve({0}, 1000, 0) == 1000);
}

TEST_CASE("link model: a message that fits in an idle gap before a later reservation goes there",
          "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}}); // 1 byte per ns
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0}, 1000, 10000) == 11000); // busy [10000, 11000)
    CHECK(links.reserve({0}, 1000, 0) == 1000);      // before it, not after
    CHECK(links.reserve({0}, 9000, 0) == 10000);     // exactly the rest of the gap
    CHECK(links.busy_intervals(0) == Busy{{0, 11000}});
    CHECK(links.reserve({0}, 1, 0) == 11001); // no gap left
}

TEST_CASE("link model: a message that does not fit in the gap goes after", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0}, 1000, 10000) == 11000);
    CHECK(links.reserve({0}, 20000, 0) == 31000); // the gap [0, 10000) is too short
    CHECK(links.busy_intervals(0) == Busy{{10000, 31000}});
    CHECK(links.reserve({0}, 10000, 0) == 10000); // the gap is still free for what fits
}

TEST_CASE("link model: a near message overtakes a far one committed before it", "[emulation][model]") {
    // Link 0 (5 us) leads to link 1: a message over both reaches link 1 at
    // 5000 ns. One committed after it that starts at link 1 uses the idle
    // time before, as a network serving the link in arrival order would.
    EmulationModel m = model_with(3, {{1.0, 5.0}, {1.0, 0.0}});
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0, 1}, 1000, 0) == 6000); // link 1 busy [5000, 6000)
    CHECK(links.reserve({1}, 1000, 0) == 1000);    // one word per link made this 7000
    CHECK(links.reserve({1}, 4500, 0) == 10500);   // [1000, 5000) holds 4000: after the far one
    CHECK(links.busy_intervals(0) == Busy{{0, 1000}});
    CHECK(links.busy_intervals(1) == Busy{{0, 1000}, {5000, 10500}});
}

TEST_CASE("link model: on two hops the gap must hold the tail from the hop before", "[emulation][model]") {
    // A 1 GB/s link into a 4 GB/s one: on the second the transfer lasts until
    // its tail comes out of the first, not bytes / 4 GB/s.
    EmulationModel m = model_with(3, {{1.0, 0.0}, {4.0, 0.0}});
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({1}, 4000, 2000) == 3000);   // link 1 busy [2000, 3000)
    CHECK(links.reserve({0, 1}, 1000, 0) == 1000);   // link 1 [0, 1000), not [0, 250)
    CHECK(links.reserve({0, 1}, 1000, 0) == 2000);   // link 0 [1000, 2000), link 1 [1000, 2000): just fits
    CHECK(links.reserve({0, 1}, 1000, 0) == 3250);   // link 1 is busy until 3000: 250 ns after
    CHECK(links.busy_intervals(0) == Busy{{0, 3000}});
    CHECK(links.busy_intervals(1) == Busy{{0, 3250}});
}

TEST_CASE("link model: a stream's messages keep their order on every link", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0}, 1000, 10000) == 11000);
    std::vector<int64_t> stream;
    CHECK(links.reserve({0}, 20000, 0, &stream) == 31000); // does not fit before
    CHECK(stream == std::vector<int64_t>{31000});
    // Fits in [0, 10000), but the stream's previous message is not through yet.
    CHECK(links.reserve({0}, 1000, 0, &stream) == 32000);
    // Another stream's may go there.
    std::vector<int64_t> other;
    CHECK(links.reserve({0}, 1000, 0, &other) == 1000);
}

TEST_CASE("link model: a full interval list merges the neighbours with the least usable gap", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    LinkTimeline links(m, nullptr, 2);
    CHECK(links.reserve({0}, 1000, 10000) == 11000);
    CHECK(links.reserve({0}, 1000, 13000) == 14000);
    CHECK(links.busy_intervals(0) == Busy{{10000, 11000}, {13000, 14000}});
    // A third interval: the gaps are 9000 and 2000 ns; the shorter is lost.
    CHECK(links.reserve({0}, 1000, 0) == 1000);
    CHECK(links.busy_intervals(0) == Busy{{0, 1000}, {10000, 14000}});
    // 1500 ns would have fitted in [11000, 13000): the link counts as busy there.
    CHECK(links.reserve({0}, 1500, 11000) == 15500);
    CHECK(links.busy_intervals(0) == Busy{{0, 1000}, {10000, 15500}});
    // The gap that was kept still takes what fits.
    CHECK(links.reserve({0}, 1000, 1000) == 2000);
    CHECK(links.busy_intervals(0) == Busy{{0, 2000}, {10000, 15500}});
}

TEST_CASE("link model: intervals long past are forgotten", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    LinkTimeline links(m, nullptr);
    CHECK(links.reserve({0}, 1000, 0) == 1000);
    CHECK(links.reserve({0}, 1000, 5000) == 6000);
    // A head kForgetPastNs after the first interval ended: it is dropped.
    const int64_t later = 1000 + LinkTimeline::kForgetPastNs;
    CHECK(links.reserve({0}, 1000, later) == later + 1000);
    CHECK(links.busy_intervals(0) == Busy{{5000, 6000}, {later, later + 1000}});
    CHECK(links.reserve({0}, 1000, later + 5000) == later + 6000);
    CHECK(links.busy_intervals(0) == Busy{{later, later + 1000}, {later + 5000, later + 6000}});
}

TEST_CASE("link model: two timelines over one table behave as one", "[emulation][model]") {
    EmulationModel m = model_with(3, {{1.0, 5.0}, {1.0, 0.0}, {4.0, 1.0}});
    SharedTable table(3, 4);
    LinkTimeline a(m, table.data(), 4), b(m, table.data(), 4);
    LinkTimeline one(m, nullptr, 4);
    struct Call {
        std::vector<int> path;
        size_t bytes;
        int64_t ready;
    };
    const std::vector<Call> calls = {{{0, 1}, 1000, 0},     {{1}, 1000, 0},     {{1}, 4500, 0},
                                     {{2, 1}, 8000, 300},   {{0, 1, 2}, 700, 0}, {{1, 2}, 3000, 20000},
                                     {{2}, 100, 0},         {{1}, 50, 1000},    {{0}, 9000, 100},
                                     {{2, 1, 0}, 2500, 40}, {{1}, 10, 1010},    {{0, 1}, 64, 0}};
    for (size_t i = 0; i < calls.size(); ++i) {
        const Call &c = calls[i];
        LinkTimeline &shared = i % 2 == 0 ? a : b;
        INFO("call " << i);
        CHECK(shared.reserve(c.path, c.bytes, c.ready) == one.reserve(c.path, c.bytes, c.ready));
    }
    for (int link = 0; link < 3; ++link) CHECK(a.busy_intervals(link) == one.busy_intervals(link));
}

TEST_CASE("link model: a lock held by a process that died is taken over", "[emulation][model]") {
    EmulationModel m = model_with(2, {{1.0, 0.0}});
    SharedTable table(1);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(0);
    REQUIRE(waitpid(child, nullptr, 0) == child);
    // A link's record starts with its lock word: the holder's pid << 32 and
    // its acquisition count.
    table.words[0] = static_cast<uint64_t>(child) << 32 | 1;
    LinkTimeline links(m, table.data());
    CHECK(links.reserve({0}, 1000, 0) == 1000);
    CHECK(links.reserve({0}, 1000, 0) == 2000);
    CHECK(table.words[0] == 0);
}

TEST_CASE("validate_emulation_model names what is wrong", "[emulation]") {
    EmulationModel m = model_with(2, {{1.0, 1.0}});
    m.path[0][1] = {0};
    CHECK(validate_emulation_model(m, 2).is_ok());
    CHECK_THAT(validate_emulation_model(m, 3).message(), Catch::Contains("2 source ranks"));
    EmulationModel bad_link = m;
    bad_link.path[1][0] = {0, 1};
    CHECK_THAT(validate_emulation_model(bad_link, 2).message(), Catch::Contains("rank 1 to rank 0 crosses link 1"));
    EmulationModel bad_rate = m;
    bad_rate.links[0].gbytes_per_sec = 0;
    CHECK_THAT(validate_emulation_model(bad_rate, 2).message(), Catch::Contains("link 0 has bandwidth 0"));
    EmulationModel bad_scale = m;
    bad_scale.scale = -1;
    CHECK_THAT(validate_emulation_model(bad_scale, 2).message(), Catch::Contains("scale"));
}

TEST_CASE("a peer without a path passes straight through", "[emulation]") {
    LoopFabric fabric(2, 1024, 2);
    EmulatedTransport tx(fabric.endpoint(0), 0, model_with(2, {{1.0, 1000.0}}));
    CHECK(tx.try_acquire_send(1, 0, 16) == fabric.endpoint(0)->try_acquire_send(1, 0, 16));
    send_one(tx, 1, 0, 16, 7);
    CHECK(tx.held_messages() == 0);
    size_t bytes = 0;
    CHECK(fabric.endpoint(1)->try_peek_recv(0, 0, &bytes) != nullptr);
}

TEST_CASE("a message is not visible before its due time", "[emulation]") {
    LoopFabric fabric(2, 1 << 20, 2);
    EmulationModel m = model_with(2, {{1.0, 2000.0}}); // 1 GB/s, 2 ms
    m.path[0][1] = {0};
    EmulatedTransport tx(fabric.endpoint(0), 0, m);
    const size_t bytes = 1 << 20;
    const int64_t due_after = 2 * kMs + static_cast<int64_t>(bytes); // 1 byte per ns
    const int64_t t0 = emulation_now_ns();
    send_one(tx, 1, 0, bytes, 0x5a);
    tx.poll();
    size_t seen_bytes = 0;
    CHECK(fabric.endpoint(1)->try_peek_recv(0, 0, &seen_bytes) == nullptr);
    CHECK(tx.held_messages() == 1);
    const int64_t visible = poll_until_visible({&tx}, *fabric.endpoint(1), 0, 0);
    CHECK(visible - t0 >= due_after);
    CHECK(visible - t0 < due_after + 2000 * kMs);
    const void *data = fabric.endpoint(1)->try_peek_recv(0, 0, &seen_bytes);
    REQUIRE(seen_bytes == bytes);
    CHECK(static_cast<const unsigned char *>(data)[bytes - 1] == 0x5a);
    CHECK(tx.held_messages() == 0);
}

TEST_CASE("latency adds per hop", "[emulation]") {
    LoopFabric fabric(3, 1024, 2);
    EmulationModel m = model_with(3, {{100.0, 4000.0}, {100.0, 4000.0}, {100.0, 4000.0}}); // 4 ms each
    m.path[0][1] = {0};
    m.path[0][2] = {0, 1, 2};
    EmulatedTransport tx(fabric.endpoint(0), 0, m);
    int64_t t0 = emulation_now_ns();
    send_one(tx, 1, 0, 64, 1);
    CHECK(poll_until_visible({&tx}, *fabric.endpoint(1), 0, 0) - t0 >= 4 * kMs);
    t0 = emulation_now_ns();
    send_one(tx, 2, 0, 64, 2);
    CHECK(poll_until_visible({&tx}, *fabric.endpoint(2), 0, 0) - t0 >= 12 * kMs);
}

TEST_CASE("order is kept per stream and the data arrives intact", "[emulation]") {
    const size_t max_bytes = 4096;
    LoopFabric fabric(2, max_bytes, 2);
    EmulationModel m = model_with(2, {{1.0, 50.0}, {4.0, 20.0}});
    m.path[0][1] = {1, 0};
    EmulationOptions options;
    options.held_per_stream = 3;
    EmulatedTransport tx(fabric.endpoint(0), 0, m, options);
    Transport &rx = *fabric.endpoint(1);
    const int messages = 200, channels = 2;
    std::vector<int> sent(channels, 0), received(channels, 0);
    auto size_of = [&](int seq) { return static_cast<size_t>(seq * 37) % max_bytes + 8; };
    const int64_t give_up = emulation_now_ns() + 20000 * kMs;
    while (received[0] < messages || received[1] < messages) {
        if (emulation_now_ns() >= give_up) FAIL("stuck: sent " << sent[0] << "/" << sent[1] << ", received "
                                                      << received[0] << "/" << received[1]);
        uint64_t seen = tx.event_count();
        tx.poll();
        bool moved = false;
        for (int c = 0; c < channels; ++c) {
            // Channel 1 sends in bursts, so that its queue fills and drains.
            while (sent[static_cast<size_t>(c)] < messages) {
                const int seq = sent[static_cast<size_t>(c)];
                const size_t bytes = size_of(seq);
                auto *buf = static_cast<unsigned char *>(tx.try_acquire_send(1, c, bytes));
                if (buf == nullptr) break;
                ++sent[static_cast<size_t>(c)];
                std::memset(buf, seq & 0xff, bytes);
                std::memcpy(buf, &seq, sizeof seq);
                tx.commit_send(1, c, bytes);
                moved = true;
                if (c == 0) break;
            }
            size_t bytes = 0;
            while (const void *in = rx.try_peek_recv(0, c, &bytes)) {
                int seq = -1;
                std::memcpy(&seq, in, sizeof seq);
                REQUIRE(seq == received[static_cast<size_t>(c)]);
                REQUIRE(bytes == size_of(seq));
                REQUIRE(static_cast<const unsigned char *>(in)[bytes - 1] == (seq & 0xff));
                rx.release_recv(0, c);
                ++received[static_cast<size_t>(c)];
                moved = true;
            }
        }
        if (!moved) tx.wait_for_event(seen, 10);
    }
    CHECK(tx.held_messages() == 0);
    CHECK(fabric.in_flight() == 0);
}

TEST_CASE("a full held queue refuses a send buffer; asking twice gives the same one", "[emulation]") {
    LoopFabric fabric(2, 256, 2);
    EmulationModel m = model_with(2, {{1.0, 60e6}}); // a minute of latency: nothing falls due
    m.path[0][1] = {0};
    EmulationOptions options;
    options.held_per_stream = 2;
    EmulatedTransport tx(fabric.endpoint(0), 0, m, options);
    void *first = tx.try_acquire_send(1, 0, 8);
    CHECK(tx.try_acquire_send(1, 0, 8) == first);
    tx.commit_send(1, 0, 8);
    void *second = tx.try_acquire_send(1, 0, 8);
    CHECK(second != nullptr);
    CHECK(second != first);
    tx.commit_send(1, 0, 8);
    CHECK(tx.try_acquire_send(1, 0, 8) == nullptr);
    CHECK(tx.try_acquire_send(1, 1, 8) != nullptr); // another stream has its own queue
    CHECK(tx.held_messages() == 2);
    // (The destructor logs a warning about the two messages it never delivered.)
}

TEST_CASE("two concurrent transfers over one link take about twice as long as one", "[emulation]") {
    const size_t bytes = 4 << 20;
    const int64_t one = static_cast<int64_t>(bytes); // ns at 1 GB/s
    LoopFabric fabric(3, bytes, 2);
    // Link 0 (1 GB/s) is shared; links 1 and 2 (100 GB/s) lead to ranks 1 and 2.
    EmulationModel m = model_with(3, {{1.0, 0.0}, {100.0, 0.0}, {100.0, 0.0}});
    m.path[0][1] = {0, 1};
    m.path[0][2] = {0, 2};
    EmulatedTransport tx(fabric.endpoint(0), 0, m);

    int64_t t0 = emulation_now_ns();
    send_one(tx, 1, 0, bytes, 1);
    const int64_t alone = poll_until_visible({&tx}, *fabric.endpoint(1), 0, 0) - t0;
    fabric.endpoint(1)->release_recv(0, 0);

    t0 = emulation_now_ns();
    send_one(tx, 1, 0, bytes, 2);
    send_one(tx, 2, 0, bytes, 3);
    const int64_t first = poll_until_visible({&tx}, *fabric.endpoint(1), 0, 0) - t0;
    const int64_t both = poll_until_visible({&tx}, *fabric.endpoint(2), 0, 0) - t0;
    INFO("one transfer " << alone / 1e6 << " ms, the first of two " << first / 1e6 << " ms, both " << both / 1e6
                         << " ms");
    CHECK(alone >= one);
    CHECK(first >= one);
    CHECK(both >= 2 * one);
    CHECK(both < 2 * one + 1000 * kMs);
}

TEST_CASE("with a shared link table, two ranks' transfers share the link", "[emulation]") {
    const size_t bytes = 2 << 20;
    LoopFabric fabric(3, bytes, 2);
    EmulationModel m = model_with(3, {{1.0, 0.0}});
    m.path[0][2] = {0};
    m.path[1][2] = {0};
    SharedTable table(1);
    EmulationOptions options;
    options.shared_link_table = table.data();
    EmulatedTransport tx0(fabric.endpoint(0), 0, m, options), tx1(fabric.endpoint(1), 1, m, options);
    const int64_t t0 = emulation_now_ns();
    send_one(tx0, 2, 0, bytes, 1);
    send_one(tx1, 2, 0, bytes, 2);
    const int64_t a = poll_until_visible({&tx0, &tx1}, *fabric.endpoint(2), 0, 0);
    const int64_t b = poll_until_visible({&tx0, &tx1}, *fabric.endpoint(2), 1, 0);
    CHECK(std::max(a, b) - t0 >= 2 * static_cast<int64_t>(bytes));
}

TEST_CASE("wait_for_event does not sleep past a held message's arrival", "[emulation]") {
    LoopFabric fabric(2, 64, 2);
    nnpccl_emulation_test::QuietDoorbell quiet(fabric.endpoint(0)); // sleeps its whole timeout
    EmulationModel m = model_with(2, {{1.0, 20000.0}});             // 20 ms
    m.path[0][1] = {0};
    EmulatedTransport tx(&quiet, 0, m);
    const int64_t t0 = emulation_now_ns();
    send_one(tx, 1, 0, 8, 9);
    size_t bytes = 0;
    int waits = 0;
    while (true) {
        uint64_t seen = tx.event_count();
        tx.poll();
        if (fabric.endpoint(1)->try_peek_recv(0, 0, &bytes) != nullptr) break;
        tx.wait_for_event(seen, 5000);
        REQUIRE(++waits < 1000);
    }
    const int64_t elapsed = emulation_now_ns() - t0;
    CHECK(elapsed >= 20 * kMs);
    CHECK(elapsed < 2000 * kMs); // far below the 5 s the inner wait would have slept

    // With nothing held, the inner transport's wait is used as is.
    const int64_t before = emulation_now_ns();
    tx.wait_for_event(tx.event_count(), 30);
    CHECK(emulation_now_ns() - before >= 30 * kMs);
}

TEST_CASE("flush hands every held message over as it falls due", "[emulation]") {
    LoopFabric fabric(2, 64, 4);
    EmulationModel m = model_with(2, {{1.0, 10000.0}}); // 10 ms
    m.path[0][1] = {0};
    EmulatedTransport tx(fabric.endpoint(0), 0, m);
    const int64_t t0 = emulation_now_ns();
    for (unsigned char i = 0; i < 3; ++i) send_one(tx, 1, 0, 8, i);
    CHECK(tx.has_pending_sends());
    Status flushed = tx.flush(Deadline::after_seconds(10));
    CHECK(flushed.is_ok());
    CHECK(emulation_now_ns() - t0 >= 10 * kMs);
    CHECK_FALSE(tx.has_pending_sends());
    CHECK(fabric.in_flight() == 3);
}

TEST_CASE("flush gives up at the deadline when a receiver keeps its slots full", "[emulation]") {
    LoopFabric fabric(2, 64, 1); // one slot, and nobody receives
    EmulationModel m = model_with(2, {{100.0, 0.0}});
    m.path[0][1] = {0};
    EmulatedTransport tx(fabric.endpoint(0), 0, m);
    send_one(tx, 1, 0, 8, 1);
    send_one(tx, 1, 0, 8, 2);
    Status flushed = tx.flush(Deadline::after_seconds(0.05));
    CHECK(flushed.code() == NNPCCL_ERR_TIMEOUT);
    CHECK_THAT(flushed.message(), Catch::Contains("1 committed message(s) were still held"));
    CHECK(fabric.in_flight() == 1);
}
