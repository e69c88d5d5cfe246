// Status: a result code plus the message that names what went wrong. Every
// internal function that can fail returns one; the C API turns it into an
// nnpccl_result_t and keeps the message for nnpccl_get_last_error().
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "nnpccl.h"

namespace nnpccl {

// A success carries no message and costs two words to make and nothing to
// destroy: a small call passes through a dozen of them.
class Status {
public:
    Status() = default;
    Status(nnpccl_result_t code, std::string message)
        : code_(code), message_(message.empty() ? nullptr : std::make_unique<std::string>(std::move(message))) {}
    Status(const Status &other) : code_(other.code_), message_(copy(other.message_)) {}
    Status &operator=(const Status &other) {
        if (this != &other) {
            code_ = other.code_;
            message_ = copy(other.message_);
        }
        return *this;
    }
    Status(Status &&) noexcept = default;
    Status &operator=(Status &&) noexcept = default;

    static Status ok() { return {}; }
    bool is_ok() const { return code_ == NNPCCL_SUCCESS; }
    explicit operator bool() const { return is_ok(); }
    nnpccl_result_t code() const { return code_; }
    const std::string &message() const { return message_ != nullptr ? *message_ : no_message(); }

private:
    static std::unique_ptr<std::string> copy(const std::unique_ptr<std::string> &m) {
        return m != nullptr ? std::make_unique<std::string>(*m) : nullptr;
    }
    static const std::string &no_message() {
        static const std::string empty;
        return empty;
    }
    nnpccl_result_t code_ = NNPCCL_SUCCESS;
    std::unique_ptr<std::string> message_;
};

// printf-style message formatting for Status and logs.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Statuses with a printf-style message; the compiler checks the arguments.
#define NNPCCL_STATUS_CTOR(name) Status name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
NNPCCL_STATUS_CTOR(invalid_argument)
NNPCCL_STATUS_CTOR(invalid_usage)
NNPCCL_STATUS_CTOR(system_error)
NNPCCL_STATUS_CTOR(internal_error)
NNPCCL_STATUS_CTOR(remote_error)
NNPCCL_STATUS_CTOR(timeout_error)
#undef NNPCCL_STATUS_CTOR

// A system_error whose message ends with strerror(errno).
Status errno_error(const std::string &what);

// Propagates a failed Status to the caller.
#define NNPCCL_TRY(expr)                                                                          \
    do {                                                                                          \
        ::nnpccl::Status try_status_ = (expr);                                                    \
        if (!try_status_.is_ok()) return try_status_;                                             \
    } while (0)

} // namespace nnpccl
