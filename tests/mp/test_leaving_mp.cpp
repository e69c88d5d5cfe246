// Leaving is failing: a rank that destroys its communicator, or whose
// process ends, while the others are inside or later enter a call that needs
// it, fails every such rank within about a second, naming it and why, over
// every transport; a rank whose own call failed locally tells the others
// its reason.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "local_launch.hpp"
#include "mp_support.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How the leaving rank goes.
enum class Leaving { Destroy, Exit };

struct LeaveCase {
    Leaving how;
    bool others_inside; // the others are already waiting when it leaves
};

LeaveCase g_case;

// Three ranks; rank 2 makes one call with the others, then leaves. Ranks 0
// and 1 make an allreduce that needs it: it must fail with
// NNPCCL_ERR_REMOTE naming rank 2 well before the 30 s deadline.
int leave_while_needed(int rank, int nranks, const nnpccl_unique_id_t &id) {
    nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
    if (comm == nullptr) return 1;
    std::vector<float> buf(1 << 16, 1.0f);
    if (nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS)
        return 1;
    if (rank == 2) {
        if (g_case.others_inside) usleep(300000);
        if (g_case.how == Leaving::Exit) return 0; // the process ends with its communicator
        return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const nnpccl_result_t rc = nnpccl_allreduce(buf.data(), buf.data(), buf.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm);
    const double seconds = seconds_since(t0);
    const std::string message = nnpccl_get_last_error(comm);
    nnpccl_result_t async = NNPCCL_SUCCESS;
    nnpccl_comm_get_async_error(comm, &async);
    const bool ok = rc == NNPCCL_ERR_REMOTE && async == NNPCCL_ERR_REMOTE && seconds < 3 &&
                    message.find("rank 2") != std::string::npos;
    std::fprintf(stderr, "rank %d: %s after %.2f s: %s%s\n", rank, nnpccl_get_error_string(rc), seconds,
                 message.c_str(), ok ? "" : " (FAILED)");
    nnpccl_comm_abort(comm);
    return ok ? 0 : 1;
}

void run_leave_case(const char *transport, LeaveCase c) {
    g_case = c;
    setenv("NNPCCL_TRANSPORT", transport, 1);
    std::vector<int> statuses;
    run_local_ranks(3, leave_while_needed, false, &statuses);
    unsetenv("NNPCCL_TRANSPORT");
    CHECK(statuses == std::vector<int>{0, 0, 0});
}

} // namespace

TEST_CASE("a rank that destroys its communicator fails, within a second, every rank whose call needs it",
          "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    const bool others_inside = GENERATE(true, false);
    CAPTURE(transport, others_inside);
    run_leave_case(transport, {Leaving::Destroy, others_inside});
}

TEST_CASE("a rank whose process ends with its communicator fails, within a second, every rank whose call needs it",
          "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    run_leave_case(transport, {Leaving::Exit, true});
}

TEST_CASE("a rank with unmatched pending work destroys promptly once its peer has left", "[mp][leaving]") {
    const char *transport = GENERATE("shm", "socket", "ofi");
    CAPTURE(transport);
    setenv("NNPCCL_TRANSPORT", transport, 1);
    CHECK(run_local_ranks(2, [](int rank, int nranks, const nnpccl_unique_id_t &id) {
              nnpccl_comm_t comm = join_job(rank, nranks, id, 30);
              if (comm == nullptr) return 1;
              float one = 1, sum = 0;
              if (nnpccl_allreduce(&one, &sum, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm) != NNPCCL_SUCCESS) return 1;
              if (rank == 1) return nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS ? 0 : 1;
              // A receive rank 1 never matches, left pending at destroy.
              std::vector<float> buf(1024);
              nnpccl_request_t request = nullptr;
              if (nnpccl_irecv(buf.data(), buf.size(), NNPCCL_FLOAT32, 1, comm, &request) != NNPCCL_SUCCESS) return 1;
              if (nnpccl_request_free(request) != NNPCCL_SUCCESS) return 1;
              const auto t0 = std::chrono::steady_clock::now();
              const nnpccl_result_t rc = nnpccl_comm_destroy(comm);
              const double seconds = seconds_since(t0);
              const std::string message = nnpccl_get_last_error(nullptr);
              const bool ok = rc == NNPCCL_ERR_REMOTE && seconds < 3 && message.find("rank 1") != std::string::npos;
              std::fprintf(stderr, "rank 0: destroy: %s after %.2f s: %s%s\n", nnpccl_get_error_string(rc), seconds,
                           message.c_str(), ok ? "" : " (FAILED)");
              return ok ? 0 : 1;
          }) == 0);
    unsetenv("NNPCCL_TRANSPORT");
}
