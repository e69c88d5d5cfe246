// Memory that the ranks of one host share without a name: one rank makes an
// anonymous memfd and announces "PID FD"; the others open it through
// /proc/PID/fd/FD while the maker holds it open (which the kernel allows
// only to processes of the same user that may inspect the maker), map it,
// and the maker closes the descriptor once all have. Nothing ever appears
// in /dev/shm, and the memory is gone when the last mapping is, however
// the processes end. The shm transport's segments and the emulation's
// shared link table are made this way.
#pragma once

#include <cstddef>
#include <string>

#include "status.hpp"

namespace nnpccl {

// A "PID FD" announcement, read strictly: two decimal numbers in range
// (pid > 0), one space, nothing else, so the /proc path built from it can
// name nothing but a descriptor of a process.
bool parse_pid_fd(const std::string &entry, long *pid, long *fd);

class SharedRegion {
public:
    SharedRegion() = default;
    ~SharedRegion();
    SharedRegion(SharedRegion &&other) noexcept;
    SharedRegion &operator=(SharedRegion &&other) noexcept;
    SharedRegion(const SharedRegion &) = delete;
    SharedRegion &operator=(const SharedRegion &) = delete;

    // A new zero-filled region of `bytes`, mapped here, its descriptor open.
    static Status create(size_t bytes, const char *name, SharedRegion *out);
    // Maps the region another process announced; `bytes` must be its size.
    // `what` names it in errors ("rank 3's link table").
    static Status map(const std::string &announcement, size_t bytes, const std::string &what, SharedRegion *out);

    // "PID FD" of the creator's open descriptor, for the others to map.
    std::string announcement() const;
    // After every other process has mapped it: the mappings keep it alive.
    void close_descriptor();

    void *data() const { return data_; }
    size_t size() const { return bytes_; }

private:
    void reset();
    void *data_ = nullptr;
    size_t bytes_ = 0;
    int fd_ = -1;
};

} // namespace nnpccl
