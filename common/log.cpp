#include "log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace nnpccl {

namespace {

LogLevel parse_level() {
    const char *env = std::getenv("NNPCCL_DEBUG");
    if (env == nullptr || *env == '\0') return LogLevel::Warn;
    if (strcasecmp(env, "NONE") == 0) return LogLevel::None;
    if (strcasecmp(env, "INFO") == 0) return LogLevel::Info;
    if (strcasecmp(env, "TRACE") == 0) return LogLevel::Trace;
    if (strcasecmp(env, "WARN") != 0)
        std::fprintf(stderr, "nnpccl: NNPCCL_DEBUG=%s is not one of NONE, WARN, INFO, TRACE; using WARN\n",
                     env);
    return LogLevel::Warn;
}

std::atomic<int> g_rank{-1};

} // namespace

LogLevel log_level() {
    static const LogLevel level = parse_level();
    return level;
}

void set_log_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void log_message(LogLevel level, const char *fmt, ...) {
    static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    char line[2048];
    int rank = g_rank.load(std::memory_order_relaxed);
    int n = rank >= 0 ? std::snprintf(line, sizeof(line), "%s:%d:r%d nnpccl %s ", host, static_cast<int>(getpid()),
                                      rank, names[static_cast<int>(level)])
                      : std::snprintf(line, sizeof(line), "%s:%d nnpccl %s ", host, static_cast<int>(getpid()),
                                      names[static_cast<int>(level)]);
    if (n < 0) return;
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(line + n, sizeof(line) - static_cast<size_t>(n), fmt, args);
    va_end(args);
    // One write per line so that lines of concurrent ranks do not interleave.
    size_t len = std::strlen(line);
    if (len + 1 < sizeof(line)) {
        line[len++] = '\n';
    }
    ssize_t written = write(STDERR_FILENO, line, len);
    (void)written;
}

} // namespace nnpccl
