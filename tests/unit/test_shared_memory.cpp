// Memory shared by the ranks of a host: what a peer announces is read
// strictly (only "PID FD" in range makes a /proc path), and a region made
// here maps elsewhere with the same contents.
#include <catch2/catch.hpp>

#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "shared_memory.hpp"

using namespace nnpccl;

TEST_CASE("a shared region's announcement names only a process's descriptor", "[shm]") {
    long pid = 0, fd = 0;
    REQUIRE(parse_pid_fd("4242 17", &pid, &fd));
    CHECK(pid == 4242);
    CHECK(fd == 17);
    CHECK(parse_pid_fd("1 0", &pid, &fd));
    for (const char *bad :
         {"", "4242", "4242 ", " 4242 17", "4242  17", "4242 17 ", "-1 3", "0 3", "4242 -3", "4242 +3", "../../etc 3",
          "4242 3/../../x", "99999999999999999999 3", "4194305 3", "4242 1073741825", "4242 17\n"})
        CHECK_FALSE(parse_pid_fd(bad, &pid, &fd));
    CHECK_FALSE(parse_pid_fd(std::string("4242 17\0/x", 10), &pid, &fd));
    CHECK_FALSE(parse_pid_fd(std::string(100000, '1') + " 3", &pid, &fd));
}

TEST_CASE("a shared region is seen by another process, and only at its size", "[shm]") {
    SharedRegion mine;
    REQUIRE(SharedRegion::create(8192, "nnpccl-test", &mine).is_ok());
    std::memset(mine.data(), 0x5a, mine.size());
    const std::string announced = mine.announcement();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        SharedRegion theirs;
        SharedRegion wrong_size;
        bool ok = SharedRegion::map(announced, 8192, "the test's region", &theirs).is_ok() &&
                  static_cast<unsigned char *>(theirs.data())[8191] == 0x5a &&
                  !SharedRegion::map(announced, 4096, "the test's region", &wrong_size).is_ok() &&
                  !SharedRegion::map("1 x", 8192, "the test's region", &wrong_size).is_ok();
        if (ok) static_cast<unsigned char *>(theirs.data())[0] = 0xa5;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(static_cast<unsigned char *>(mine.data())[0] == 0xa5);
    mine.close_descriptor();
    CHECK(mine.announcement().empty());
}
