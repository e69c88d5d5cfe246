// What a local peer announces of its shared-memory segment is read
// strictly: only "PID FD" in range makes a /proc path.
#include <catch2/catch.hpp>

#include <string>

#include "shm/shm_transport.hpp"

using namespace nnpccl;

TEST_CASE("a peer's shm segment announcement names only a process's descriptor", "[shm]") {
    long pid = 0, fd = 0;
    REQUIRE(parse_shm_segment_entry("4242 17", &pid, &fd));
    CHECK(pid == 4242);
    CHECK(fd == 17);
    CHECK(parse_shm_segment_entry("1 0", &pid, &fd));
    for (const char *bad :
         {"", "4242", "4242 ", " 4242 17", "4242  17", "4242 17 ", "-1 3", "0 3", "4242 -3", "4242 +3", "../../etc 3",
          "4242 3/../../x", "99999999999999999999 3", "4194305 3", "4242 1073741825", "4242 17\n"})
        CHECK_FALSE(parse_shm_segment_entry(bad, &pid, &fd));
    CHECK_FALSE(parse_shm_segment_entry(std::string("4242 17\0/x", 10), &pid, &fd));
    CHECK_FALSE(parse_shm_segment_entry(std::string(100000, '1') + " 3", &pid, &fd));
}
