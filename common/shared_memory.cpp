#include "shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace nnpccl {

bool parse_pid_fd(const std::string &entry, long *pid, long *fd) {
    if (entry.size() > 24) return false;
    char *end = nullptr;
    const char *text = entry.c_str();
    if (!std::isdigit(static_cast<unsigned char>(*text))) return false;
    errno = 0;
    *pid = std::strtol(text, &end, 10);
    if (errno != 0 || *end != ' ' || *pid <= 0 || *pid > (1L << 22)) return false;
    text = end + 1;
    if (!std::isdigit(static_cast<unsigned char>(*text))) return false;
    *fd = std::strtol(text, &end, 10);
    return errno == 0 && end == entry.c_str() + entry.size() && *fd >= 0 && *fd <= (1L << 30);
}

SharedRegion::~SharedRegion() { reset(); }

void SharedRegion::reset() {
    close_descriptor();
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
}

SharedRegion::SharedRegion(SharedRegion &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

SharedRegion &SharedRegion::operator=(SharedRegion &&other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

Status SharedRegion::create(size_t bytes, const char *name, SharedRegion *out) {
    SharedRegion region;
    region.fd_ = static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC));
    if (region.fd_ < 0) return errno_error(format("memfd_create of %s", name));
    if (ftruncate(region.fd_, static_cast<off_t>(bytes)) != 0) return errno_error(format("ftruncate of %s", name));
    void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, region.fd_, 0);
    if (mem == MAP_FAILED) return errno_error(format("mmap of %zu bytes of shared memory for %s", bytes, name));
    region.data_ = mem;
    region.bytes_ = bytes;
    *out = std::move(region);
    return Status::ok();
}

Status SharedRegion::map(const std::string &announcement, size_t bytes, const std::string &what, SharedRegion *out) {
    long pid = 0, fd = 0;
    if (!parse_pid_fd(announcement, &pid, &fd))
        return invalid_usage("%s was announced as '%.64s', not 'PID FD'", what.c_str(), announcement.c_str());
    std::string path = format("/proc/%ld/fd/%ld", pid, fd);
    int pfd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (pfd < 0)
        return errno_error(format("opening %s (%s); processes that cannot see each other's /proc (other users, other "
                                  "PID namespaces) cannot share memory",
                                  what.c_str(), path.c_str()));
    struct stat info {};
    void *mem = MAP_FAILED;
    if (fstat(pfd, &info) == 0 && static_cast<size_t>(info.st_size) == bytes)
        mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
    close(pfd);
    if (mem == MAP_FAILED)
        return invalid_usage("cannot map %s at %s: %lld bytes where %zu were expected", what.c_str(), path.c_str(),
                             static_cast<long long>(info.st_size), bytes);
    *out = SharedRegion();
    out->data_ = mem;
    out->bytes_ = bytes;
    return Status::ok();
}

std::string SharedRegion::announcement() const { return fd_ < 0 ? std::string() : format("%d %d", getpid(), fd_); }

void SharedRegion::close_descriptor() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

} // namespace nnpccl
