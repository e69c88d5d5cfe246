// Every public function, called with NULL, out-of-range and inconsistent
// arguments: each returns its documented error (never crashes), says what
// was wrong, and a communicator it was given stays usable.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nnpccl.h"

namespace {

nnpccl_comm_t single_rank_comm() {
    nnpccl_unique_id_t id;
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    nnpccl_comm_t comm = nullptr;
    REQUIRE(nnpccl_comm_init_rank(&comm, 1, id, 0, nullptr) == NNPCCL_SUCCESS);
    return comm;
}

bool usable(nnpccl_comm_t comm) {
    double x = 2.5, y = 0;
    return nnpccl_allreduce(&x, &y, 1, NNPCCL_FLOAT64, NNPCCL_SUM, comm) == NNPCCL_SUCCESS && y == 2.5;
}

} // namespace

TEST_CASE("functions without a communicator refuse bad arguments", "[hostile]") {
    CHECK(nnpccl_get_version(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_get_unique_id(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_get_error_string(static_cast<nnpccl_result_t>(12345)) != nullptr);
    CHECK(nnpccl_get_error_string(static_cast<nnpccl_result_t>(-1)) != nullptr);
    CHECK(nnpccl_get_last_error(nullptr) != nullptr);

    nnpccl_unique_id_t id;
    REQUIRE(nnpccl_get_unique_id(&id) == NNPCCL_SUCCESS);
    nnpccl_comm_t comm = nullptr;
    CHECK(nnpccl_comm_init_rank(nullptr, 1, id, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    for (int nranks : {0, -1, 1 << 20}) CHECK(nnpccl_comm_init_rank(&comm, nranks, id, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    for (int rank : {-1, 2, 1 << 30}) CHECK(nnpccl_comm_init_rank(&comm, 2, id, rank, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_unique_id_t garbage;
    std::memset(&garbage, 0xff, sizeof garbage);
    CHECK(nnpccl_comm_init_rank(&comm, 1, garbage, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_config_t bad = NNPCCL_CONFIG_INIT;
    bad.struct_size = 1;
    CHECK(nnpccl_comm_init_rank(&comm, 1, id, 0, &bad) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("struct_size"));
    bad = NNPCCL_CONFIG_INIT;
    bad.timeout_sec = -5;
    CHECK(nnpccl_comm_init_rank(&comm, 1, id, 0, &bad) == NNPCCL_ERR_INVALID_ARGUMENT);
    bad = NNPCCL_CONFIG_INIT;
    bad.chunk_bytes = 7;
    CHECK(nnpccl_comm_init_rank(&comm, 1, id, 0, &bad) == NNPCCL_ERR_INVALID_ARGUMENT);
    bad = NNPCCL_CONFIG_INIT;
    bad.algorithms = "allreduce:ring;bcast:ring";
    CHECK(nnpccl_comm_init_rank(&comm, 1, id, 0, &bad) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("config->algorithms: unknown collective 'bcast'"));
    CHECK(comm == nullptr);

    CHECK(nnpccl_comm_init_from_env(nullptr, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "2", 1);
    CHECK(nnpccl_comm_init_from_env(&comm, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("RANK"));
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");

    CHECK(nnpccl_comm_destroy(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_comm_abort(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    int value = 0;
    CHECK(nnpccl_comm_rank(nullptr, &value) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_comm_size(nullptr, &value) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_result_t async;
    CHECK(nnpccl_comm_get_async_error(nullptr, &async) == NNPCCL_ERR_INVALID_ARGUMENT);
    int done = 0;
    CHECK(nnpccl_wait(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_test(nullptr, &done) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_request_free(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_barrier(nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    nnpccl_request_t req = nullptr;
    CHECK(nnpccl_ibarrier(nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    float buf[2] = {0, 0};
    CHECK(nnpccl_gather(buf, buf, 1, NNPCCL_FLOAT32, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_scatter(buf, buf, 1, NNPCCL_FLOAT32, 0, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_alltoall(buf, buf, 1, NNPCCL_FLOAT32, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_send(buf, 1, NNPCCL_FLOAT32, 1, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_recv(buf, 1, NNPCCL_FLOAT32, 1, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_igather(buf, buf, 1, NNPCCL_FLOAT32, 0, nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_iscatter(buf, buf, 1, NNPCCL_FLOAT32, 0, nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_ialltoall(buf, buf, 1, NNPCCL_FLOAT32, nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_isend(buf, 1, NNPCCL_FLOAT32, 1, nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_irecv(buf, 1, NNPCCL_FLOAT32, 1, nullptr, &req) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(req == nullptr);
}

TEST_CASE("every collective refuses bad arguments by name and the communicator stays usable", "[hostile]") {
    nnpccl_comm_t comm = single_rank_comm();
    float buf[8] = {0};
    nnpccl_request_t req = nullptr;
    const auto bad_dt = static_cast<nnpccl_datatype_t>(NNPCCL_NUM_DATATYPES);
    const auto bad_op = static_cast<nnpccl_redop_t>(NNPCCL_NUM_OPS);
    const size_t huge = SIZE_MAX / 2;
    // Checked one by one: each call replaces the communicator's last error.
    auto refused = [&](const char *names, nnpccl_result_t rc) {
        INFO("the refusal naming " << names);
        CHECK(rc == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(nnpccl_get_last_error(comm), Catch::Contains(names));
    };
    refused("datatype", nnpccl_allreduce(buf, buf, 1, bad_dt, NNPCCL_SUM, comm));
    refused("op", nnpccl_allreduce(buf, buf, 1, NNPCCL_FLOAT32, bad_op, comm));
    refused("count", nnpccl_allreduce(buf, buf, huge, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("sendbuf", nnpccl_allreduce(nullptr, buf, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("recvbuf", nnpccl_reduce_scatter(buf, nullptr, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("recvcount", nnpccl_reduce_scatter(buf, buf, huge, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("datatype", nnpccl_allgather(buf, buf, 1, bad_dt, comm));
    refused("sendbuf", nnpccl_allgather(nullptr, buf, 1, NNPCCL_FLOAT32, comm));
    refused("root", nnpccl_broadcast(buf, buf, 1, NNPCCL_FLOAT32, 1, comm));
    refused("root", nnpccl_broadcast(buf, buf, 1, NNPCCL_FLOAT32, -1, comm));
    refused("root", nnpccl_reduce(buf, buf, 1, NNPCCL_FLOAT32, NNPCCL_MAX, 7, comm));
    refused("op", nnpccl_reduce(buf, buf, 1, NNPCCL_FLOAT32, bad_op, 0, comm));
    refused("request", nnpccl_iallreduce(buf, buf, 1, NNPCCL_FLOAT32, NNPCCL_SUM, comm, nullptr));
    refused("datatype", nnpccl_ireduce_scatter(buf, buf, 1, bad_dt, NNPCCL_SUM, comm, &req));
    refused("request", nnpccl_iallgather(buf, buf, 1, NNPCCL_FLOAT32, comm, nullptr));
    refused("root", nnpccl_ibroadcast(buf, buf, 1, NNPCCL_FLOAT32, 3, comm, &req));
    refused("root", nnpccl_ireduce(buf, buf, 1, NNPCCL_FLOAT32, NNPCCL_SUM, -2, comm, &req));
    refused("request", nnpccl_ibarrier(comm, nullptr));
    refused("datatype", nnpccl_gather(buf, buf, 1, bad_dt, 0, comm));
    refused("root", nnpccl_gather(buf, buf, 1, NNPCCL_FLOAT32, 1, comm));
    refused("sendcount", nnpccl_gather(buf, buf, huge, NNPCCL_FLOAT32, 0, comm));
    refused("sendbuf", nnpccl_gather(nullptr, buf, 1, NNPCCL_FLOAT32, 0, comm));
    refused("recvbuf", nnpccl_gather(buf, nullptr, 1, NNPCCL_FLOAT32, 0, comm)); // the root writes it
    refused("request", nnpccl_igather(buf, buf, 1, NNPCCL_FLOAT32, 0, comm, nullptr));
    refused("root", nnpccl_igather(buf, buf, 1, NNPCCL_FLOAT32, -1, comm, &req));
    refused("datatype", nnpccl_scatter(buf, buf, 1, bad_dt, 0, comm));
    refused("root", nnpccl_scatter(buf, buf, 1, NNPCCL_FLOAT32, 2, comm));
    refused("recvcount", nnpccl_scatter(buf, buf, huge, NNPCCL_FLOAT32, 0, comm));
    refused("sendbuf", nnpccl_scatter(nullptr, buf, 1, NNPCCL_FLOAT32, 0, comm)); // the root reads it
    refused("recvbuf", nnpccl_scatter(buf, nullptr, 1, NNPCCL_FLOAT32, 0, comm));
    refused("request", nnpccl_iscatter(buf, buf, 1, NNPCCL_FLOAT32, 0, comm, nullptr));
    refused("datatype", nnpccl_iscatter(buf, buf, 1, bad_dt, 0, comm, &req));
    refused("datatype", nnpccl_alltoall(buf, buf, 1, bad_dt, comm));
    refused("count", nnpccl_alltoall(buf, buf, huge, NNPCCL_FLOAT32, comm));
    refused("sendbuf", nnpccl_alltoall(nullptr, buf, 1, NNPCCL_FLOAT32, comm));
    refused("recvbuf", nnpccl_alltoall(buf, nullptr, 1, NNPCCL_FLOAT32, comm));
    refused("request", nnpccl_ialltoall(buf, buf, 1, NNPCCL_FLOAT32, comm, nullptr));
    refused("count", nnpccl_ialltoall(buf, buf, huge, NNPCCL_FLOAT32, comm, &req));
    // A call of no elements moves nothing, but its arguments are checked all the same.
    refused("datatype", nnpccl_allgather(buf, buf, 0, bad_dt, comm));
    refused("datatype", nnpccl_broadcast(buf, buf, 0, bad_dt, 0, comm));
    refused("op", nnpccl_allreduce(buf, buf, 0, NNPCCL_FLOAT32, bad_op, comm));
    refused("op", nnpccl_reduce_scatter(buf, buf, 0, NNPCCL_FLOAT32, bad_op, comm));
    refused("root", nnpccl_reduce(buf, buf, 0, NNPCCL_FLOAT32, NNPCCL_SUM, 1, comm));
    refused("root", nnpccl_gather(buf, buf, 0, NNPCCL_FLOAT32, -1, comm));
    refused("root", nnpccl_scatter(nullptr, nullptr, 0, NNPCCL_FLOAT32, 4, comm));
    refused("peer", nnpccl_send(nullptr, 0, NNPCCL_FLOAT32, 0, comm));
    // One rank has no peer: its own rank is not one, nor anything else.
    refused("peer", nnpccl_send(buf, 1, NNPCCL_FLOAT32, 0, comm));
    refused("peer", nnpccl_send(buf, 1, NNPCCL_FLOAT32, 1, comm));
    refused("peer", nnpccl_recv(buf, 1, NNPCCL_FLOAT32, -1, comm));
    refused("peer", nnpccl_isend(buf, 1, NNPCCL_FLOAT32, 0, comm, &req));
    refused("peer", nnpccl_irecv(buf, 1, NNPCCL_FLOAT32, 0, comm, &req));
    refused("datatype", nnpccl_send(buf, 1, bad_dt, 0, comm));
    refused("request", nnpccl_isend(buf, 1, NNPCCL_FLOAT32, 0, comm, nullptr));
    refused("request", nnpccl_irecv(buf, 1, NNPCCL_FLOAT32, 0, comm, nullptr));
    refused("rank", nnpccl_comm_rank(comm, nullptr));
    refused("size", nnpccl_comm_size(comm, nullptr));
    refused("async_error", nnpccl_comm_get_async_error(comm, nullptr));
    CHECK(req == nullptr); // no request escapes a refused call
    CHECK(usable(comm));
    // A request passed to test with a NULL out-pointer is refused and stays valid.
    REQUIRE(nnpccl_iallreduce(buf, buf, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &req) == NNPCCL_SUCCESS);
    CHECK(nnpccl_test(req, nullptr) == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK(nnpccl_wait(req) == NNPCCL_SUCCESS);
    CHECK(usable(comm));
    CHECK(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
}

TEST_CASE("buffers that overlap without being in place, and counts beyond the buffer's memory, are refused",
          "[hostile]") {
    nnpccl_comm_t comm = single_rank_comm();
    float buf[16] = {1, 2, 3, 4, 5, 6, 7, 8};
    auto refused = [&](const char *names, nnpccl_result_t rc) {
        INFO("the refusal naming " << names);
        CHECK(rc == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(nnpccl_get_last_error(comm), Catch::Contains(names));
    };
    refused("overlap", nnpccl_allreduce(buf, buf + 1, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("overlap", nnpccl_allreduce(buf + 4, buf, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("overlap", nnpccl_broadcast(buf, buf + 1, 8, NNPCCL_FLOAT32, 0, comm));
    refused("overlap", nnpccl_reduce(buf + 7, buf, 8, NNPCCL_FLOAT32, NNPCCL_MAX, 0, comm));
    refused("overlap", nnpccl_alltoall(buf, buf + 2, 4, NNPCCL_FLOAT32, comm));
    refused("recvbuf == sendbuf + rank", nnpccl_reduce_scatter(buf, buf + 1, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("sendbuf == recvbuf + rank", nnpccl_allgather(buf + 1, buf, 4, NNPCCL_FLOAT32, comm));
    // Adjacent buffers do not overlap, and the in-place layouts are in place.
    CHECK(nnpccl_allreduce(buf, buf + 8, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    CHECK(buf[15] == 8);
    CHECK(nnpccl_allreduce(buf, buf, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    CHECK(nnpccl_reduce_scatter(buf, buf, 8, NNPCCL_FLOAT32, NNPCCL_SUM, comm) == NNPCCL_SUCCESS);
    CHECK(nnpccl_allgather(buf, buf, 8, NNPCCL_FLOAT32, comm) == NNPCCL_SUCCESS);
    CHECK(buf[0] == 1);
    // A count that fits in memory arithmetic but far beyond the buffer: a
    // plan for it would not fit in memory either.
    const size_t beyond = size_t{1} << 42;
    refused("not mapped", nnpccl_allreduce(buf, buf + 8, beyond, NNPCCL_FLOAT32, NNPCCL_SUM, comm));
    refused("not mapped", nnpccl_broadcast(buf, buf + 8, beyond, NNPCCL_UINT8, 0, comm));
    nnpccl_request_t req = nullptr;
    refused("not mapped", nnpccl_iallgather(buf, buf + 8, beyond, NNPCCL_FLOAT32, comm, &req));
    CHECK(req == nullptr);
    CHECK(usable(comm));
    CHECK(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
}

TEST_CASE("a request waited, completed by test, or freed is refused afterwards, as is a garbage handle", "[hostile]") {
    nnpccl_comm_t comm = single_rank_comm();
    float buf[4] = {1, 2, 3, 4};
    auto refused = [](nnpccl_result_t rc) {
        CHECK(rc == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(nnpccl_get_last_error(nullptr), Catch::Contains("not a live request"));
    };
    nnpccl_request_t req = nullptr;
    REQUIRE(nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &req) == NNPCCL_SUCCESS);
    CHECK(nnpccl_wait(req) == NNPCCL_SUCCESS);
    refused(nnpccl_wait(req));
    int done = -1;
    refused(nnpccl_test(req, &done));
    CHECK(done == -1);
    refused(nnpccl_request_free(req));

    REQUIRE(nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &req) == NNPCCL_SUCCESS);
    done = 0;
    while (done == 0) REQUIRE(nnpccl_test(req, &done) == NNPCCL_SUCCESS);
    refused(nnpccl_test(req, &done));
    refused(nnpccl_wait(req));

    REQUIRE(nnpccl_iallreduce(buf, buf, 4, NNPCCL_FLOAT32, NNPCCL_SUM, comm, &req) == NNPCCL_SUCCESS);
    CHECK(nnpccl_request_free(req) == NNPCCL_SUCCESS);
    refused(nnpccl_request_free(req));
    refused(nnpccl_wait(req));

    // Never dereferenced: a pointer to something that is no request.
    refused(nnpccl_wait(reinterpret_cast<nnpccl_request_t>(buf)));
    refused(nnpccl_test(reinterpret_cast<nnpccl_request_t>(buf), &done));
    refused(nnpccl_request_free(reinterpret_cast<nnpccl_request_t>(buf)));
    CHECK(buf[0] == 1); // one rank's sum is its input, and the refusals wrote nothing
    CHECK(usable(comm));
    CHECK(nnpccl_comm_destroy(comm) == NNPCCL_SUCCESS);
}
