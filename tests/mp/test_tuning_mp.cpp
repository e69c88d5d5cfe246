// Measured tuning on real ranks: calls that run while the tuner measures,
// and calls issued before it has decided (planned only when they run), give
// bit-exact results; every rank decides alike; and rank 0's NNPCCL_TUNE
// holds for every rank, so ranks never disagree about whether to measure.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"
#include "nnpccl_inspect.h"
#include "tuner.hpp"

namespace {

// The algorithm the next allreduce of `count` int32 runs ("" while the
// ranks measure), and the calls the tuner still spends measuring.
std::string next_algorithm(nnpccl_comm_t comm, size_t count, size_t *tuning_calls_left) {
    nnpccl_call_t call{};
    call.collective = NNPCCL_COLL_ALLREDUCE;
    call.count = count;
    call.datatype = NNPCCL_INT32;
    call.op = NNPCCL_SUM;
    char name[64];
    if (nnpccl_comm_get_algorithm(comm, &call, name, sizeof name, tuning_calls_left) != NNPCCL_SUCCESS)
        return "(failed)";
    return name;
}

size_t tuning_calls_left(nnpccl_comm_t comm, size_t count) {
    size_t left = 0;
    next_algorithm(comm, count, &left);
    return left;
}

int registry_index(const std::string &name) {
    for (int i = 0; i < nnpccl_algorithm_count(); ++i) {
        nnpccl_algorithm_info_t a;
        if (nnpccl_algorithm_get(i, &a) == NNPCCL_SUCCESS && name == a.name) return i;
    }
    return -1;
}

// Past the communicator's first calls, which the model plans alone.
bool warm_up(nnpccl_comm_t comm) {
    for (uint64_t i = 0; i < nnpccl::kTuningAfterCalls; ++i)
        if (nnpccl_barrier(comm) != NNPCCL_SUCCESS) return false;
    return true;
}

// The smallest allreduce of int32 the tuner measures, 0 when none is.
size_t tuned_count(nnpccl_comm_t comm) {
    for (size_t count = 256; count <= (size_t{1} << 22); count *= 2)
        if (tuning_calls_left(comm, count) > 0) return count;
    return 0;
}

int through_the_trials(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 60);
    if (comm == nullptr) return 1;
    int failures = 0;
    EXPECT(warm_up(comm));
    const size_t count = tuned_count(comm);
    EXPECT(count > 0);
    if (count == 0) return failures;
    // Every trial, the agreement and calls behind it in flight at once.
    const size_t calls = tuning_calls_left(comm, count) + 8;
    std::vector<std::vector<int32_t>> in(calls, std::vector<int32_t>(count)), out(calls, std::vector<int32_t>(count));
    std::vector<nnpccl_request_t> requests(calls, nullptr);
    for (size_t k = 0; k < calls; ++k) {
        for (size_t i = 0; i < count; ++i)
            in[k][i] = (rank + 1) * static_cast<int32_t>(k + 1) + static_cast<int32_t>(i % 7);
        EXPECT(nnpccl_iallreduce(in[k].data(), out[k].data(), count, NNPCCL_INT32, NNPCCL_SUM, comm, &requests[k]) ==
               NNPCCL_SUCCESS);
    }
    for (size_t k = calls; k-- > 0;) EXPECT(nnpccl_wait(requests[k]) == NNPCCL_SUCCESS);
    size_t wrong = 0;
    for (size_t k = 0; k < calls; ++k)
        for (size_t i = 0; i < count; ++i)
            wrong += out[k][i] != static_cast<int32_t>(k + 1) * nranks * (nranks + 1) / 2 +
                                      nranks * static_cast<int32_t>(i % 7);
    EXPECT(wrong == 0);
    EXPECT(tuning_calls_left(comm, count) == 0);
    // Every rank runs the same decision.
    size_t left = 0;
    const std::string decided = next_algorithm(comm, count, &left);
    int32_t mine = registry_index(decided);
    EXPECT(mine >= 0);
    std::vector<int32_t> all(static_cast<size_t>(nranks), -2);
    EXPECT(nnpccl_allgather(&mine, all.data(), 1, NNPCCL_INT32, comm) == NNPCCL_SUCCESS);
    for (int32_t theirs : all) EXPECT(theirs == mine);
    // Blocking calls, in place, run it as well.
    std::vector<int32_t> data(count, rank);
    EXPECT(nnpccl_allreduce(data.data(), data.data(), count, NNPCCL_INT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    for (int32_t v : data) wrong += v != nranks * (nranks - 1) / 2;
    EXPECT(wrong == 0);
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

int rank_zero_says_no(int rank, int nranks, const nnpccl_unique_id_t &id) {
    if (rank == 0) setenv("NNPCCL_TUNE", "0", 1);
    nnpccl_comm_t comm = join_job(rank, nranks, id, 60);
    if (comm == nullptr) return 1;
    int failures = 0;
    EXPECT(warm_up(comm));
    EXPECT(tuned_count(comm) == 0);
    // The same calls as above, planned by the model alone on every rank.
    std::vector<int32_t> data(1 << 16, rank + 1);
    for (int k = 0; k < 20; ++k) {
        std::fill(data.begin(), data.end(), rank + 1);
        EXPECT(nnpccl_allreduce(data.data(), data.data(), data.size(), NNPCCL_INT32, NNPCCL_SUM, comm) ==
               NNPCCL_SUCCESS);
        EXPECT(data.back() == nranks * (nranks + 1) / 2);
    }
    EXPECT(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
    return failures;
}

} // namespace

TEST_CASE("calls during and right after the tuner's trials are bit-exact, and every rank decides alike",
          "[mp][tuning]") {
    setenv("NNPCCL_TUNE", "1", 1);
    unsetenv("NNPCCL_TOPO");
    unsetenv("NNPCCL_ALGO");
    CHECK(run_local_ranks(4, through_the_trials) == 0);
    CHECK(run_local_ranks(3, through_the_trials) == 0);
    unsetenv("NNPCCL_TUNE");
}

TEST_CASE("rank 0's NNPCCL_TUNE=0 turns measuring off on every rank", "[mp][tuning]") {
    setenv("NNPCCL_TUNE", "1", 1);
    CHECK(run_local_ranks(3, rank_zero_says_no) == 0);
    unsetenv("NNPCCL_TUNE");
}
