// What a network transport (socket, ofi) keeps of its peers' signs of
// life and of its own first failure, for Transport::check_peers(),
// silent_peers() and flush(). Over shared memory a rank sees its peers'
// progress counters; over a network a peer is heard only when it sends, so
// a rank that waits sends its peers empty messages now and then, and a
// timeout's message names the peers that sent nothing for a while.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "deadline.hpp"
#include "status.hpp"

namespace nnpccl {

class PeerLiveness {
public:
    // A waiting rank says it is alive this often, once its transport has
    // been quiet for kBeatAfter: well within the half second (at the
    // least) of silence after which a timeout's message names a peer (a
    // timeout is 1 s or more), and a round of empty messages costs nothing
    // beside a wait that long. Not sooner: a wait cut short by a failure
    // elsewhere should not open connections while the job goes down.
    static constexpr std::chrono::milliseconds kBeatPeriod{250};
    static constexpr std::chrono::milliseconds kBeatAfter{400};
    // How long a broken connection waits for the bootstrap to say whose
    // fault it is: the peer at its other end is often not the rank at fault
    // (a rank that fails because another died closes its connections, and
    // its peers' messages to it fail), and the bootstrap hears every rank's
    // failure with its reason, or a death.
    static constexpr std::chrono::seconds kErrorGrace{1};

    // Every peer counts as heard from at the start.
    void start(int rank, int nranks) {
        rank_ = rank;
        heard_.assign(static_cast<size_t>(nranks), Clock::now());
        departed_.assign(static_cast<size_t>(nranks), 0);
        left_at_.assign(static_cast<size_t>(nranks), Clock::time_point{});
        quiet_since_ = Clock::now();
    }

    void heard_from(int peer, Clock::time_point now) { heard_[static_cast<size_t>(peer)] = now; }
    // The peer destroyed its communicator cleanly: its silence from then on is no fault.
    void left(int peer) {
        if (departed_[static_cast<size_t>(peer)] == 0) left_at_[static_cast<size_t>(peer)] = Clock::now();
        departed_[static_cast<size_t>(peer)] = 1;
    }
    bool has_left(int peer) const { return departed_[static_cast<size_t>(peer)] != 0; }
    // Whether the peer left kErrorGrace ago or more: its farewell may
    // overtake messages it sent before it on other streams (or another
    // connection), which have all landed by then.
    bool left_a_while_ago(int peer) const {
        return has_left(peer) && Clock::now() - left_at_[static_cast<size_t>(peer)] >= kErrorGrace;
    }

    // Whether to send the peers a sign of life now; `events` is the
    // transport's event count (anything happening ends the quiet).
    bool beat_due(uint64_t events) {
        const Clock::time_point now = Clock::now();
        if (events != events_at_check_) {
            events_at_check_ = events;
            quiet_since_ = now;
        }
        if (now - quiet_since_ < kBeatAfter || now - last_beat_ < kBeatPeriod) return false;
        last_beat_ = now;
        return true;
    }

    // "rank 3 has given no sign of life over sockets for 2.1 s, rank 5 has
    // left: ..." for the peers `concerns` accepts; "" when none.
    template <typename Concerns>
    std::string silent(std::chrono::milliseconds quiet, const char *over, Concerns concerns) const {
        const Clock::time_point now = Clock::now();
        std::string text;
        for (int peer = 0; peer < static_cast<int>(heard_.size()); ++peer) {
            if (peer == rank_ || !concerns(peer)) continue;
            const auto since = now - heard_[static_cast<size_t>(peer)];
            if (has_left(peer))
                text += format("%srank %d has left: it destroyed its communicator", text.empty() ? "" : ", ", peer);
            else if (since >= quiet)
                text += format("%srank %d has given no sign of life over %s for %.1f s", text.empty() ? "" : ", ",
                               peer, over, std::chrono::duration<double>(since).count());
        }
        return text;
    }

    // flush()'s error when messages to `late` were still unsent at its
    // deadline; `silent` is what silent() says of the peers.
    static Status unsent_at_deadline(const char *transport, const std::set<int> &late, const std::string &silent) {
        std::string peers;
        for (int peer : late) peers += format("%srank %d", peers.empty() ? "" : ", ", peer);
        return timeout_error("%s: messages to %s were still in flight at the deadline (NNPCCL_TIMEOUT)%s%s", transport,
                             peers.c_str(), silent.empty() ? "" : "; ", silent.c_str());
    }

    // A transport's first failure, `error`, met at `at`, as check_peers()
    // reports it: only once the bootstrap has had kErrorGrace to name the
    // rank at fault.
    static Status after_grace(const Status &error, Clock::time_point at) {
        if (!error.is_ok() && Clock::now() - at < kErrorGrace) return Status::ok();
        return error;
    }

private:
    int rank_ = 0;
    std::vector<Clock::time_point> heard_;
    std::vector<char> departed_;
    std::vector<Clock::time_point> left_at_;
    Clock::time_point last_beat_{};
    Clock::time_point quiet_since_{};
    uint64_t events_at_check_ = 0;
};

} // namespace nnpccl
