// Real ranks (processes) over the shared-memory transport: every collective
// (send and recv: test_p2p_mp.cpp), datatype and op, in place and out of
// place, on 1 to 5 ranks, with counts 0, 1, primes and counts that do not
// divide by the rank count, compared bit for bit with the exact result.
// Chunks are made small so that every call of any size crosses many
// pipelined chunks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check_data.hpp"
#include "dtype.hpp"
#include "local_launch.hpp"
#include "mp_support.hpp"
#include "nnpccl_inspect.h"

using nnpccl_check::CallShape;

namespace {

// One rank's share of the matrix; returns the number of failures it saw.
int run_matrix(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
    cfg.chunk_bytes = 4096;
    cfg.timeout_sec = 60;
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_comm_init_rank(&comm, nranks, id, rank, &cfg) != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d: init failed: %s\n", rank, nnpccl_get_last_error(nullptr));
        return 1;
    }
    int failures = 0;
    const size_t counts[] = {0, 1, 2, 17, 1009, 65537};
    const nnpccl_collective_t colls[] = {NNPCCL_COLL_ALLREDUCE, NNPCCL_COLL_REDUCE_SCATTER, NNPCCL_COLL_ALLGATHER,
                                NNPCCL_COLL_BROADCAST, NNPCCL_COLL_REDUCE,    NNPCCL_COLL_GATHER,
                                NNPCCL_COLL_SCATTER,   NNPCCL_COLL_ALLTOALL};
    std::vector<unsigned char> send, recv;
    for (nnpccl_collective_t coll : colls) {
        const bool reduces = nnpccl_check::reduces(coll);
        for (int d = 0; d < NNPCCL_NUM_DATATYPES; ++d)
            for (int o = 0; o < (reduces ? NNPCCL_NUM_OPS : 1); ++o)
                for (size_t count : counts)
                    for (bool in_place : {false, true}) {
                        CallShape s;
                        s.collective = coll;
                        s.rank = rank;
                        s.nranks = nranks;
                        s.count = count;
                        s.root = static_cast<int>((count + static_cast<size_t>(d)) % static_cast<size_t>(nranks));
                        s.dt = static_cast<nnpccl_datatype_t>(d);
                        s.op = static_cast<nnpccl_redop_t>(o);
                        s.in_place = in_place;
                        const size_t es = nnpccl_datatype_size(s.dt);
                        send.assign(s.send_elems() * es + 1, 0);
                        recv.assign(s.total() * es + 1, 0);
                        const void *sp = nullptr;
                        void *rp = nullptr;
                        nnpccl_check::lay_out(s, send.data(), recv.data(), &sp, &rp);
                        nnpccl_result_t rc = nnpccl_check::issue(comm, s, sp, rp);
                        size_t wrong = rc == NNPCCL_SUCCESS ? nnpccl_check::count_wrong(s, rp) : 0;
                        // What the call does not own (a gather's recvbuf off the root, the byte
                        // past the end) still holds the zeros it was given.
                        for (size_t b = nnpccl_check::bytes_written(s); b < recv.size(); ++b)
                            wrong += recv[b] != 0;
                        if (rc != NNPCCL_SUCCESS || wrong != 0) {
                            ++failures;
                            std::fprintf(stderr, "rank %d/%d: %s %s %s count=%zu %s: %s, %zu wrong: %s\n", rank, nranks,
                                         nnpccl_collective_name(coll), nnpccl_datatype_name(s.dt),
                                         nnpccl_redop_name(s.op), count, in_place ? "in place" : "out of place",
                                         nnpccl_get_error_string(rc), wrong, nnpccl_get_last_error(comm));
                            if (rc != NNPCCL_SUCCESS) {
                                nnpccl_comm_abort(comm);
                                return failures;
                            }
                        }
                    }
    }
    if (nnpccl_barrier(comm) != NNPCCL_SUCCESS) ++failures;
    if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++failures;
    return failures;
}

} // namespace

TEST_CASE("every collective, datatype and op is bit-exact on 1 to 5 ranks", "[mp]") {
    for (int nranks = 1; nranks <= 5; ++nranks) {
        INFO(nranks << " ranks");
        CHECK(run_local_ranks(nranks, run_matrix) == 0);
    }
}

namespace {

// Each rank's float32 and bfloat16 inputs where min, max and sum answer
// differently depending on which operand comes first: signed zeros, and
// NaNs whose payloads name their rank, on one or several ranks per element.
std::vector<uint32_t> order_sensitive_floats(int rank, size_t count) {
    std::vector<uint32_t> bits(count);
    for (size_t i = 0; i < count; ++i) {
        const bool nan = ((i >> rank) & 1) != 0;
        const bool negative = ((i >> (rank + 4)) & 1) != 0;
        bits[i] = nan ? 0x7fc00000u + static_cast<uint32_t>(rank + 1) * 0x10000u : negative ? 0x80000000u : 0;
    }
    return bits;
}

int run_order_sensitive(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 60, 4096);
    if (comm == nullptr) return 1;
    int failures = 0;
    constexpr size_t kCount = 2048; // every combination of the bits above, over several chunks
    const std::vector<uint32_t> input = order_sensitive_floats(rank, kCount);
    std::vector<uint16_t> input16(kCount);
    for (size_t i = 0; i < kCount; ++i) input16[i] = static_cast<uint16_t>(input[i] >> 16);
    for (const char *algorithm : {"ring", "double_binary_tree", "halving_doubling", "direct"}) {
        const std::string rule = std::string("allreduce:") + algorithm;
        EXPECT(nnpccl_comm_set_algorithms(comm, rule.c_str()) == NNPCCL_SUCCESS);
        for (nnpccl_redop_t op : {NNPCCL_MIN, NNPCCL_MAX, NNPCCL_SUM})
            for (nnpccl_datatype_t dt : {NNPCCL_FLOAT32, NNPCCL_BFLOAT16}) {
                const size_t bytes = kCount * nnpccl_datatype_size(dt);
                const void *in = dt == NNPCCL_FLOAT32 ? static_cast<const void *>(input.data()) : input16.data();
                std::vector<unsigned char> mine(bytes), everyone(bytes * static_cast<size_t>(nranks));
                EXPECT(nnpccl_allreduce(in, mine.data(), kCount, dt, op, comm) == NNPCCL_SUCCESS);
                EXPECT(nnpccl_allgather(mine.data(), everyone.data(), bytes, NNPCCL_UINT8, comm) == NNPCCL_SUCCESS);
                // And the bits are IEEE 754's minimum and maximum, whichever
                // rank holds the NaN or the signed zero: NaN if any rank's is,
                // else -0 for min if any rank's is -0, +0 for max if any is +0.
                for (size_t i = 0; dt == NNPCCL_FLOAT32 && op != NNPCCL_SUM && i < kCount; ++i) {
                    bool any_nan = false, any_negative = false, any_positive = false;
                    for (int r = 0; r < nranks; ++r) {
                        const uint32_t v = order_sensitive_floats(r, kCount)[i];
                        any_nan |= (v & 0x7fffffffu) > 0x7f800000u;
                        any_negative |= v == 0x80000000u;
                        any_positive |= v == 0;
                    }
                    uint32_t got = 0;
                    std::memcpy(&got, mine.data() + i * 4, 4);
                    const bool is_nan = (got & 0x7fffffffu) > 0x7f800000u;
                    const uint32_t zero = op == NNPCCL_MIN ? (any_negative ? 0x80000000u : 0) : (any_positive ? 0 : 0x80000000u);
                    if (any_nan ? !is_nan : got != zero) {
                        std::fprintf(stderr, "rank %d: %s %s element %zu: got 0x%08x\n", rank, algorithm,
                                     nnpccl_redop_name(op), i, got);
                        ++failures;
                        break;
                    }
                }
                for (int r = 0; r < nranks; ++r)
                    if (std::memcmp(everyone.data() + static_cast<size_t>(r) * bytes, mine.data(), bytes) != 0) {
                        std::fprintf(stderr, "rank %d: %s %s %s: rank %d got other bits\n", rank, algorithm,
                                     nnpccl_redop_name(op), nnpccl_datatype_name(dt), r);
                        ++failures;
                    }
            }
    }
    if (nnpccl_comm_destroy(comm) != NNPCCL_SUCCESS) ++failures;
    return failures;
}

} // namespace

TEST_CASE("an allreduce gives every rank the same bits where the operand order matters, and min and max keep NaNs",
          "[mp]") {
    for (int nranks = 2; nranks <= 4; ++nranks) {
        INFO(nranks << " ranks");
        CHECK(run_local_ranks(nranks, run_order_sensitive) == 0);
    }
}
