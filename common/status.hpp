// Status: a result code plus the message that names what went wrong. Every
// internal function that can fail returns one; the C API turns it into an
// nnpccl_result_t and keeps the message for nnpccl_get_last_error().
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "nnpccl.h"

namespace nnpccl {

// One pointer, null when the call succeeded: a success carries no message,
// and the success path of every check (a small call passes through a dozen)
// builds, tests and destroys a Status, a single word stored and read back
// whole. (Code and message side by side took a 16-byte store and an 8-byte
// load of its upper half, which the CPU cannot forward from the store: a
// stall on every check of every call.)
class Status {
public:
    Status() = default;
    Status(nnpccl_result_t code, std::string message)
        : failure_(code == NNPCCL_SUCCESS ? nullptr : std::make_unique<Failure>(Failure{code, std::move(message)})) {}
    Status(const Status &other) : failure_(copy(other.failure_)) {}
    Status &operator=(const Status &other) {
        if (this != &other) failure_ = copy(other.failure_);
        return *this;
    }
    Status(Status &&) noexcept = default;
    Status &operator=(Status &&) noexcept = default;

    static Status ok() { return {}; }
    bool is_ok() const { return failure_ == nullptr; }
    explicit operator bool() const { return is_ok(); }
    nnpccl_result_t code() const { return failure_ != nullptr ? failure_->code : NNPCCL_SUCCESS; }
    const std::string &message() const { return failure_ != nullptr ? failure_->message : no_message(); }

private:
    struct Failure {
        nnpccl_result_t code;
        std::string message;
    };
    static std::unique_ptr<Failure> copy(const std::unique_ptr<Failure> &f) {
        return f != nullptr ? std::make_unique<Failure>(*f) : nullptr;
    }
    static const std::string &no_message() {
        static const std::string empty;
        return empty;
    }
    std::unique_ptr<Failure> failure_;
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
