// Logging to stderr, filtered by NNPCCL_DEBUG=NONE|WARN|INFO|TRACE (default
// WARN). Each line is prefixed with host, pid and, once known, the rank.
#pragma once

namespace nnpccl {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel log_level();
void set_log_rank(int rank);
void log_message(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define NNPCCL_LOG(level, ...)                                                                    \
    do {                                                                                          \
        if (::nnpccl::log_level() >= (level)) ::nnpccl::log_message((level), __VA_ARGS__);       \
    } while (0)
#define LOG_WARN(...) NNPCCL_LOG(::nnpccl::LogLevel::Warn, __VA_ARGS__)
#define LOG_INFO(...) NNPCCL_LOG(::nnpccl::LogLevel::Info, __VA_ARGS__)
#define LOG_TRACE(...) NNPCCL_LOG(::nnpccl::LogLevel::Trace, __VA_ARGS__)

} // namespace nnpccl
