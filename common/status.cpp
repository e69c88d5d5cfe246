#include "status.hpp"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

namespace nnpccl {

namespace {

std::string vformat(const char *fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int needed = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string out;
    if (needed > 0) {
        std::vector<char> buf(static_cast<size_t>(needed) + 1);
        std::vsnprintf(buf.data(), buf.size(), fmt, args);
        out.assign(buf.data(), static_cast<size_t>(needed));
    }
    return out;
}

} // namespace

std::string format(const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::string out = vformat(fmt, args);
    va_end(args);
    return out;
}

#define NNPCCL_STATUS_CTOR(name, code)                                                            \
    Status name(const char *fmt, ...) {                                                           \
        va_list args;                                                                             \
        va_start(args, fmt);                                                                      \
        Status status(code, vformat(fmt, args));                                                  \
        va_end(args);                                                                             \
        return status;                                                                            \
    }
NNPCCL_STATUS_CTOR(invalid_argument, NNPCCL_ERR_INVALID_ARGUMENT)
NNPCCL_STATUS_CTOR(invalid_usage, NNPCCL_ERR_INVALID_USAGE)
NNPCCL_STATUS_CTOR(system_error, NNPCCL_ERR_SYSTEM)
NNPCCL_STATUS_CTOR(internal_error, NNPCCL_ERR_INTERNAL)
NNPCCL_STATUS_CTOR(remote_error, NNPCCL_ERR_REMOTE)
NNPCCL_STATUS_CTOR(timeout_error, NNPCCL_ERR_TIMEOUT)
#undef NNPCCL_STATUS_CTOR

Status errno_error(const std::string &what) {
    int saved = errno;
    return Status(NNPCCL_ERR_SYSTEM, what + ": " + std::strerror(saved));
}

} // namespace nnpccl
