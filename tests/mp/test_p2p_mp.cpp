// Send and recv on real ranks: bit-exact between every ordered pair, with
// the ranks outside a pair calling nothing (their collectives must not
// notice); crossing nonblocking sends longer than the transport buffers
// (which would deadlock if a pending recv could not run beside a pending
// send); messages to one peer arrive in issue order; a received buffer
// relayed on is sent only once it has arrived; and a send and recv that
// disagree fail both ranks with NNPCCL_ERR_INVALID_USAGE, not a hang.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "check_data.hpp"
#include "dtype.hpp"
#include "local_launch.hpp"
#include "mp_support.hpp"

using nnpccl_check::CallShape;

namespace {

// Small chunks: every message beyond a few KiB crosses many of them, and
// one beyond 8 slots x 4 KiB cannot sit in the transport's buffers whole.
nnpccl_comm_t join(int rank, int nranks, const nnpccl_unique_id_t &id, int timeout_sec = 60) {
    return join_job(rank, nranks, id, timeout_sec, 4096);
}

CallShape p2p_shape(nnpccl_collective_t coll, int rank, int nranks, int peer, size_t count, nnpccl_datatype_t dt) {
    CallShape s;
    s.collective = coll;
    s.rank = rank;
    s.nranks = nranks;
    s.root = peer;
    s.count = count;
    s.dt = dt;
    return s;
}

// The send side's buffer, filled with the sender's tagged pattern.
std::vector<unsigned char> outgoing(const CallShape &s) {
    std::vector<unsigned char> buf(s.count * nnpccl_datatype_size(s.dt) + 1);
    nnpccl_check::tagged_pattern(s.dt, s.rank).fill(buf.data(), 0, s.count);
    return buf;
}

// Every ordered pair in turn, blocking calls; the other ranks call nothing.
int every_pair(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    const size_t counts[] = {0, 1, 17, 1009, 65537};
    const nnpccl_datatype_t types[] = {NNPCCL_INT8, NNPCCL_BFLOAT16, NNPCCL_UINT32, NNPCCL_FLOAT64};
    for (int from = 0; from < nranks; ++from)
        for (int to = 0; to < nranks; ++to) {
            if (from == to || (rank != from && rank != to)) continue;
            for (nnpccl_datatype_t dt : types)
                for (size_t count : counts) {
                    nnpccl_result_t rc;
                    size_t wrong = 0;
                    if (rank == from) {
                        CallShape s = p2p_shape(NNPCCL_COLL_SEND, rank, nranks, to, count, dt);
                        std::vector<unsigned char> buf = outgoing(s);
                        rc = nnpccl_check::issue(comm, s, buf.data(), nullptr);
                    } else {
                        CallShape s = p2p_shape(NNPCCL_COLL_RECV, rank, nranks, from, count, dt);
                        std::vector<unsigned char> buf(count * nnpccl_datatype_size(dt) + 1, 0);
                        rc = nnpccl_check::issue(comm, s, nullptr, buf.data());
                        wrong = rc == NNPCCL_SUCCESS ? nnpccl_check::count_wrong(s, buf.data()) : 0;
                        wrong += buf.back() != 0; // nothing past the message
                    }
                    if (rc != NNPCCL_SUCCESS || wrong != 0) {
                        std::fprintf(stderr, "rank %d/%d: %d -> %d, %zu x %s: %s, %zu wrong: %s\n", rank, nranks,
                                     from, to, count, nnpccl_datatype_name(dt), nnpccl_get_error_string(rc), wrong,
                                     nnpccl_get_last_error(comm));
                        ++failures;
                        if (rc != NNPCCL_SUCCESS) {
                            nnpccl_comm_abort(comm);
                            return failures;
                        }
                    }
                }
        }
    // Every rank has sat out most pairs: the collectives still line up.
    int64_t mine = rank + 1, sum = 0;
    EXPECT(nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT64, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    EXPECT(sum == static_cast<int64_t>(nranks) * (nranks + 1) / 2);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Each rank sends to rank+1 and receives from rank-1, both posted before
// either is waited for; then the same with the wait order reversed.
int ring_exchange(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (size_t count : {size_t{0}, size_t{3}, size_t{1} << 20})
        for (bool recv_first : {false, true}) {
            CallShape out = p2p_shape(NNPCCL_COLL_SEND, rank, nranks, next, count, NNPCCL_FLOAT32);
            CallShape in = p2p_shape(NNPCCL_COLL_RECV, rank, nranks, prev, count, NNPCCL_FLOAT32);
            std::vector<unsigned char> send = outgoing(out), recv(count * 4 + 1, 0);
            nnpccl_request_t s = nullptr, r = nullptr;
            if (recv_first) EXPECT(nnpccl_irecv(recv.data(), count, NNPCCL_FLOAT32, prev, comm, &r) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_isend(send.data(), count, NNPCCL_FLOAT32, next, comm, &s) == NNPCCL_SUCCESS);
            if (!recv_first) EXPECT(nnpccl_irecv(recv.data(), count, NNPCCL_FLOAT32, prev, comm, &r) == NNPCCL_SUCCESS);
            // Waiting for the send first: it can only finish if the recv behind it runs meanwhile.
            EXPECT(nnpccl_wait(s) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_wait(r) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_check::count_wrong(in, recv.data()) == 0);
            EXPECT(recv.back() == 0);
        }
    // A pending isend and a blocking recv: the recv runs beside the send.
    const size_t count = size_t{1} << 18;
    CallShape out = p2p_shape(NNPCCL_COLL_SEND, rank, nranks, next, count, NNPCCL_INT64);
    CallShape in = p2p_shape(NNPCCL_COLL_RECV, rank, nranks, prev, count, NNPCCL_INT64);
    std::vector<unsigned char> send = outgoing(out), recv(count * 8, 0);
    nnpccl_request_t s = nullptr;
    EXPECT(nnpccl_isend(send.data(), count, NNPCCL_INT64, next, comm, &s) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_recv(recv.data(), count, NNPCCL_INT64, prev, comm) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_wait(s) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_check::count_wrong(in, recv.data()) == 0);
    EXPECT(nnpccl_barrier(comm) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// An alltoall written by hand, many times over: every rank posts `rounds`
// isends to every other rank, then as many irecvs, then waits for all.
// Each message is larger than the transport's slots, so the sends can only
// finish while the receives posted after them run.
int many_pending(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id, 20);
    if (comm == nullptr) return 1;
    int failures = 0;
    const int rounds = 40;
    const size_t count = 16384; // 64 KiB against 8 slots of 4 KiB
    std::vector<std::vector<unsigned char>> sends, recvs;
    std::vector<CallShape> expected;
    std::vector<nnpccl_request_t> requests;
    for (int round = 0; round < rounds; ++round)
        for (int k = 1; k < nranks; ++k) {
            const int to = (rank + k) % nranks;
            sends.push_back(outgoing(p2p_shape(NNPCCL_COLL_SEND, rank, nranks, to, count, NNPCCL_INT32)));
            requests.emplace_back();
            EXPECT(nnpccl_isend(sends.back().data(), count, NNPCCL_INT32, to, comm, &requests.back()) == NNPCCL_SUCCESS);
        }
    for (int round = 0; round < rounds; ++round)
        for (int k = 1; k < nranks; ++k) {
            const int from = (rank + nranks - k) % nranks;
            expected.push_back(p2p_shape(NNPCCL_COLL_RECV, rank, nranks, from, count, NNPCCL_INT32));
            recvs.emplace_back(count * 4, 0);
        }
    for (size_t i = 0; i < recvs.size(); ++i) {
        requests.emplace_back();
        EXPECT(nnpccl_irecv(recvs[i].data(), count, NNPCCL_INT32, expected[i].root, comm, &requests.back()) ==
               NNPCCL_SUCCESS);
    }
    for (nnpccl_request_t r : requests)
        if (nnpccl_wait(r) != NNPCCL_SUCCESS) {
            std::fprintf(stderr, "rank %d: %s\n", rank, nnpccl_get_last_error(comm));
            ++failures;
            break;
        }
    for (size_t i = 0; i < recvs.size() && failures == 0; ++i)
        EXPECT(nnpccl_check::count_wrong(expected[i], recvs[i].data()) == 0);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Rank 0 posts several sends to rank 1 of different lengths, and rank 1 as
// many receives: the n-th send lands in the n-th receive. Then rank 1
// relays a received buffer to rank 2 (recv then send of one buffer, both
// pending): rank 2 must get rank 0's data, not what the buffer held before.
int ordering(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    const size_t lengths[] = {100000, 1, 0, 4099, 70000};
    const int n = 5;
    std::vector<std::vector<uint32_t>> bufs(n);
    std::vector<nnpccl_request_t> reqs(n, nullptr);
    for (int k = 0; k < n; ++k) {
        bufs[k].assign(lengths[k], 0);
        for (size_t i = 0; i < lengths[k]; ++i) bufs[k][i] = rank == 0 ? static_cast<uint32_t>(k * 1000003 + i) : 7;
        if (rank == 0)
            EXPECT(nnpccl_isend(bufs[k].data(), lengths[k], NNPCCL_UINT32, 1, comm, &reqs[k]) == NNPCCL_SUCCESS);
        if (rank == 1)
            EXPECT(nnpccl_irecv(bufs[k].data(), lengths[k], NNPCCL_UINT32, 0, comm, &reqs[k]) == NNPCCL_SUCCESS);
    }
    if (rank <= 1) {
        // Waited for last first: requests complete in issue order.
        for (int k = n - 1; k >= 0; --k) EXPECT(nnpccl_wait(reqs[k]) == NNPCCL_SUCCESS);
        size_t wrong = 0;
        for (int k = 0; k < n; ++k)
            for (size_t i = 0; i < lengths[k]; ++i) wrong += bufs[k][i] != static_cast<uint32_t>(k * 1000003 + i);
        EXPECT(wrong == 0);
    }
    if (nranks >= 3) {
        const size_t count = 300000;
        std::vector<uint32_t> buf(count, rank == 0 ? 0xabcdu : 0);
        if (rank == 0) EXPECT(nnpccl_send(buf.data(), count, NNPCCL_UINT32, 1, comm) == NNPCCL_SUCCESS);
        if (rank == 1) {
            nnpccl_request_t r = nullptr, s = nullptr;
            EXPECT(nnpccl_irecv(buf.data(), count, NNPCCL_UINT32, 0, comm, &r) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_isend(buf.data(), count, NNPCCL_UINT32, 2, comm, &s) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_wait(r) == NNPCCL_SUCCESS);
            EXPECT(nnpccl_wait(s) == NNPCCL_SUCCESS);
        }
        if (rank == 2) {
            EXPECT(nnpccl_recv(buf.data(), count, NNPCCL_UINT32, 1, comm) == NNPCCL_SUCCESS);
            size_t wrong = 0;
            for (uint32_t v : buf) wrong += v != 0xabcdu;
            EXPECT(wrong == 0);
        }
    }
    EXPECT(nnpccl_barrier(comm) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Sends and receives between collectives: rank 0 posts a long isend to
// rank 1 and then an allreduce, which may only start once the send has
// finished; rank 1 posts the irecv and the same allreduce; rank 2 and up
// only call the allreduce, and wait meanwhile. Then the nonblocking
// collectives (igather, iscatter, ialltoall) and an isend/irecv ring all
// pending at once, waited for in reverse.
int mixed_with_collectives(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    const size_t count = 200003;
    std::vector<double> big(count, rank == 0 ? 2.5 : 0.0);
    nnpccl_request_t p2p = nullptr;
    if (rank == 0) EXPECT(nnpccl_isend(big.data(), count, NNPCCL_FLOAT64, 1, comm, &p2p) == NNPCCL_SUCCESS);
    if (rank == 1) EXPECT(nnpccl_irecv(big.data(), count, NNPCCL_FLOAT64, 0, comm, &p2p) == NNPCCL_SUCCESS);
    int64_t mine = rank + 1, sum = 0;
    EXPECT(nnpccl_allreduce(&mine, &sum, 1, NNPCCL_INT64, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    EXPECT(sum == static_cast<int64_t>(nranks) * (nranks + 1) / 2);
    if (rank <= 1) {
        // Operations finish in issue order: the allreduce behind it returned, so it is done.
        int done = 0;
        EXPECT(nnpccl_test(p2p, &done) == NNPCCL_SUCCESS && done == 1);
        size_t wrong = 0;
        for (double v : big) wrong += v != 2.5;
        EXPECT(wrong == 0);
    }

    const size_t n = 1009;
    const auto un = static_cast<size_t>(nranks);
    std::vector<int32_t> gsend(n), gathered(n * un, -1), ssend(n * un), scattered(n, -1), asend(n * un),
        arecv(n * un, -1), ring_send(n), ring_recv(n, -1);
    for (size_t i = 0; i < n; ++i) {
        gsend[i] = static_cast<int32_t>(rank * 100000 + i);
        ring_send[i] = static_cast<int32_t>(rank * 7 + i);
    }
    for (size_t i = 0; i < n * un; ++i) {
        ssend[i] = static_cast<int32_t>(i * 3);
        asend[i] = static_cast<int32_t>(rank * 1000000 + i); // block j goes to rank j
    }
    const int root = nranks - 1;
    nnpccl_request_t reqs[5] = {};
    EXPECT(nnpccl_igather(gsend.data(), gathered.data(), n, NNPCCL_INT32, root, comm, &reqs[0]) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_iscatter(ssend.data(), scattered.data(), n, NNPCCL_INT32, root, comm, &reqs[1]) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_ialltoall(asend.data(), arecv.data(), n, NNPCCL_INT32, comm, &reqs[2]) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_isend(ring_send.data(), n, NNPCCL_INT32, (rank + 1) % nranks, comm, &reqs[3]) == NNPCCL_SUCCESS);
    EXPECT(nnpccl_irecv(ring_recv.data(), n, NNPCCL_INT32, (rank + nranks - 1) % nranks, comm, &reqs[4]) ==
           NNPCCL_SUCCESS);
    for (int k = 4; k >= 0; --k) EXPECT(nnpccl_wait(reqs[k]) == NNPCCL_SUCCESS);
    size_t wrong = 0;
    const int prev = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < n; ++i) {
        wrong += scattered[i] != static_cast<int32_t>((static_cast<size_t>(rank) * n + i) * 3);
        wrong += ring_recv[i] != static_cast<int32_t>(prev * 7 + i);
    }
    for (size_t q = 0; q < un; ++q)
        for (size_t i = 0; i < n; ++i) {
            if (rank == root) wrong += gathered[q * n + i] != static_cast<int32_t>(q * 100000 + i);
            wrong += arecv[q * n + i] != static_cast<int32_t>(q * 1000000 + static_cast<size_t>(rank) * n + i);
        }
    if (rank != root) for (int32_t v : gathered) wrong += v != -1; // written on the root only
    EXPECT(wrong == 0);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Messages of sizes on both sides of what a shm cell carries (200 bytes,
// the first 8 in its control line)
// and of the chunk, interleaved on one stream and posted all at once, so
// the cells and the chunk slots each wrap many times while the other is
// in use: every message arrives whole and in order. Then the same sizes
// as blocking collectives, whose first message carries the descriptor.
int mixed_sizes(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join(rank, nranks, id);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<size_t> counts; // bytes
    for (int round = 0; round < 6; ++round)
        for (size_t bytes : {1, 199, 200, 201, 64, 4096, 4097, 0, 8, 9, 12000, 192, 7})
            counts.push_back(bytes + static_cast<size_t>(round % 3));
    const int peer = rank == 0 ? 1 : 0;
    std::vector<std::vector<unsigned char>> bufs(counts.size());
    std::vector<nnpccl_request_t> reqs(counts.size(), nullptr);
    if (rank <= 1) {
        for (size_t k = 0; k < counts.size(); ++k) {
            bufs[k].assign(counts[k] + 1, 0);
            for (size_t i = 0; rank == 0 && i < counts[k]; ++i)
                bufs[k][i] = static_cast<unsigned char>(k * 31 + i * 7 + 1);
            EXPECT((rank == 0 ? nnpccl_isend(bufs[k].data(), counts[k], NNPCCL_UINT8, peer, comm, &reqs[k])
                              : nnpccl_irecv(bufs[k].data(), counts[k], NNPCCL_UINT8, peer, comm, &reqs[k])) ==
                   NNPCCL_SUCCESS);
        }
        size_t wrong = 0;
        for (size_t k = 0; k < counts.size(); ++k) {
            EXPECT(nnpccl_wait(reqs[k]) == NNPCCL_SUCCESS);
            for (size_t i = 0; rank == 1 && i < counts[k]; ++i)
                wrong += bufs[k][i] != static_cast<unsigned char>(k * 31 + i * 7 + 1);
            wrong += bufs[k].back() != 0;
        }
        EXPECT(wrong == 0);
    }
    for (size_t bytes : {4, 8, 12, 196, 200, 204, 4096, 12004}) {
        const size_t n = bytes / 4;
        std::vector<int32_t> mine(n * static_cast<size_t>(nranks)), out(n * static_cast<size_t>(nranks), -1);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<int32_t>(rank + 1 + i);
        EXPECT(nnpccl_allreduce(mine.data(), out.data(), n, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
            wrong += out[i] != static_cast<int32_t>(static_cast<size_t>(nranks) * (nranks + 1) / 2 + nranks * i);
        EXPECT(nnpccl_allgather(mine.data(), out.data(), n, NNPCCL_INT32, comm) == NNPCCL_SUCCESS);
        for (size_t q = 0; q < static_cast<size_t>(nranks); ++q)
            for (size_t i = 0; i < n; ++i) wrong += out[q * n + i] != static_cast<int32_t>(q + 1 + i);
        EXPECT(wrong == 0);
    }
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

// Rank 0 sends `send_count` x `send_dt` to rank 1, which receives
// `recv_count` x float32; rank 2 (if any) takes no part. Both must end in
// NNPCCL_ERR_INVALID_USAGE within seconds: the receiver at its recv; the
// sender at its send, or, when the send had already left, at its next
// call. Rank 2 is told by the failing ranks at its next call.
int mismatched(int rank, int nranks, const nnpccl_unique_id_t &id, size_t send_count, nnpccl_datatype_t send_dt,
               size_t recv_count) {
    nnpccl_comm_t comm = join(rank, nranks, id, 20);
    if (comm == nullptr) return 1;
    int failures = 0;
    std::vector<float> buf(std::max(send_count, recv_count) * 2 + 1, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    nnpccl_result_t rc = NNPCCL_SUCCESS;
    if (rank == 0) {
        rc = nnpccl_send(buf.data(), send_count, send_dt, 1, comm);
        // A call to the receiver, which has failed: it fails too, with its code.
        if (rc == NNPCCL_SUCCESS) rc = nnpccl_recv(buf.data(), 1, NNPCCL_FLOAT32, 1, comm);
    } else if (rank == 1) {
        rc = nnpccl_recv(buf.data(), recv_count, NNPCCL_FLOAT32, 0, comm);
        std::string message = nnpccl_get_last_error(comm);
        // The receiver saw the sender's descriptor: it names both calls.
        EXPECT(message.find("send #0 (count " + std::to_string(send_count)) != std::string::npos);
        EXPECT(message.find("recv #0 (count " + std::to_string(recv_count)) != std::string::npos);
        if (failures != 0) std::fprintf(stderr, "rank 1: %s\n", message.c_str());
    } else {
        rc = nnpccl_barrier(comm);
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != NNPCCL_ERR_INVALID_USAGE)
        std::fprintf(stderr, "rank %d: mismatched send/recv gave %s: %s\n", rank, nnpccl_get_error_string(rc),
                     nnpccl_get_last_error(comm));
    EXPECT(rc == NNPCCL_ERR_INVALID_USAGE);
    EXPECT(seconds < 10);
    nnpccl_result_t async = NNPCCL_SUCCESS;
    EXPECT(nnpccl_comm_get_async_error(comm, &async) == NNPCCL_SUCCESS && async == NNPCCL_ERR_INVALID_USAGE);
    nnpccl_comm_abort(comm);
    return failures;
}

} // namespace

TEST_CASE("send and recv are bit-exact between every pair, the other ranks calling nothing", "[mp][p2p]") {
    for (int nranks = 2; nranks <= 5; ++nranks) {
        INFO(nranks << " ranks");
        CHECK(run_local_ranks(nranks, every_pair) == 0);
    }
}

TEST_CASE("ranks that post a send to each other before receiving do not deadlock", "[mp][p2p]") {
    for (int nranks : {2, 3, 5}) {
        INFO(nranks << " ranks");
        CHECK(run_local_ranks(nranks, ring_exchange) == 0);
    }
}

TEST_CASE("hundreds of sends posted before their receives all complete", "[mp][p2p]") {
    for (int nranks : {2, 4}) {
        INFO(nranks << " ranks");
        CHECK(run_local_ranks(nranks, many_pending) == 0);
    }
}

TEST_CASE("messages either side of a shm cell's size and of the chunk interleave whole and in order", "[mp][p2p]") {
    CHECK(run_local_ranks(2, mixed_sizes) == 0);
    CHECK(run_local_ranks(3, mixed_sizes) == 0);
}

TEST_CASE("sends to one peer arrive in issue order, and a relayed buffer leaves only once filled", "[mp][p2p]") {
    CHECK(run_local_ranks(2, ordering) == 0);
    CHECK(run_local_ranks(3, ordering) == 0);
}

TEST_CASE("sends and receives interleave with collectives, blocking and nonblocking", "[mp][p2p]") {
    CHECK(run_local_ranks(2, mixed_with_collectives) == 0);
    CHECK(run_local_ranks(4, mixed_with_collectives) == 0);
}

TEST_CASE("a recv whose sender never sends ends at the deadline, naming the sender", "[mp][p2p][timeout]") {
    CHECK(run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
              nnpccl_comm_t comm = join(rank, nranks, id, 2);
              if (comm == nullptr) return 1;
              int failures = 0;
              if (rank == 0) { // alive, but never sends
                  std::this_thread::sleep_for(std::chrono::seconds(4));
                  nnpccl_comm_abort(comm);
                  return 0;
              }
              float x = 0;
              auto t0 = std::chrono::steady_clock::now();
              nnpccl_result_t rc = nnpccl_recv(&x, 1, NNPCCL_FLOAT32, 0, comm);
              double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              std::string message = nnpccl_get_last_error(comm);
              EXPECT(rc == NNPCCL_ERR_TIMEOUT);
              EXPECT(message.find("recv #0 from rank 0") != std::string::npos);
              EXPECT(seconds > 1.5 && seconds < 8);
              if (failures) std::fprintf(stderr, "rank 1: %s after %.1f s: %s\n", nnpccl_get_error_string(rc), seconds,
                                         message.c_str());
              nnpccl_comm_abort(comm);
              return failures;
          }) == 0);
}

TEST_CASE("a send and recv that disagree fail both ranks with NNPCCL_ERR_INVALID_USAGE", "[mp][p2p][desync]") {
    struct Case {
        size_t send_count;
        nnpccl_datatype_t send_dt;
        size_t recv_count;
    };
    // Short (the send leaves at once), long (the send waits for the
    // receiver), an empty send, and equal counts of another type.
    const Case cases[] = {{5, NNPCCL_FLOAT32, 6},
                          {200000, NNPCCL_FLOAT32, 100000},
                          {0, NNPCCL_FLOAT32, 5},
                          {5, NNPCCL_INT32, 5}};
    for (const Case &c : cases) {
        INFO("send " << c.send_count << " x " << nnpccl_datatype_name(c.send_dt) << ", recv " << c.recv_count);
        CHECK(run_local_ranks(3, [&c](int r, int n, const nnpccl_unique_id_t &id) {
                  return mismatched(r, n, id, c.send_count, c.send_dt, c.recv_count);
              }) == 0);
    }
}
