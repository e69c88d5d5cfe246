#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "config.hpp"

namespace nnpccl {

StopSignal::~StopSignal() {
    if (fd_ >= 0) close(fd_);
}

Status StopSignal::open() {
    fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd_ < 0) return errno_error("eventfd (the signal that lets abort stop a nonblocking init)");
    return Status::ok();
}

void StopSignal::raise() {
    raised_.store(true, std::memory_order_release);
    // Never read back: the fd stays readable, so every later wait wakes too.
    uint64_t one = 1;
    if (fd_ >= 0) (void)!write(fd_, &one, sizeof one);
}

Status stopped_error() { return remote_error("the wait was stopped: the communicator was aborted"); }

namespace {

constexpr int kStopped = -2;

// poll() on `p` that also wakes when `stop` is raised. Returns what poll
// returns for `p` alone, or kStopped.
int poll_unless_stopped(pollfd &p, int timeout_ms, const StopSignal *stop) {
    if (stop == nullptr) return poll(&p, 1, timeout_ms);
    if (stop->raised()) return kStopped;
    pollfd fds[2] = {p, {stop->fd(), POLLIN, 0}};
    int rc = poll(fds, 2, timeout_ms);
    if (stop->raised()) return kStopped;
    p.revents = fds[0].revents;
    return rc > 0 ? (p.revents != 0 ? 1 : 0) : rc;
}

} // namespace

uint16_t SockAddr::port() const {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in *>(&storage)->sin_port);
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6 *>(&storage)->sin6_port);
    return 0;
}

void SockAddr::set_port(uint16_t port) {
    if (family() == AF_INET) reinterpret_cast<sockaddr_in *>(&storage)->sin_port = htons(port);
    if (family() == AF_INET6) reinterpret_cast<sockaddr_in6 *>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::to_string() const {
    char host[INET6_ADDRSTRLEN] = "?";
    if (family() == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(&storage)->sin_addr, host, sizeof host);
        return format("%s:%u", host, port());
    }
    if (family() == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(&storage)->sin6_addr, host, sizeof host);
        return format("[%s]:%u", host, port());
    }
    return "(no address)";
}

Status resolve_host(const std::string &host, uint16_t port, SockAddr *out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr)
        return invalid_argument("cannot resolve host '%s': %s", host.c_str(), gai_strerror(rc));
    // Prefer IPv4: the namespaces and most launchers' addresses are IPv4.
    addrinfo *pick = found;
    for (addrinfo *ai = found; ai != nullptr; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    std::memcpy(&out->storage, pick->ai_addr, pick->ai_addrlen);
    out->length = pick->ai_addrlen;
    out->set_port(port);
    freeaddrinfo(found);
    return Status::ok();
}

Status parse_host_port(const std::string &text, SockAddr *out) {
    std::string host;
    std::string port_text;
    if (!text.empty() && text[0] == '[') {
        size_t close = text.find(']');
        if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return invalid_argument("address '%s' is not [ipv6]:port", text.c_str());
        host = text.substr(1, close - 1);
        port_text = text.substr(close + 2);
    } else {
        size_t colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0) return invalid_argument("address '%s' is not host:port", text.c_str());
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
    }
    char *end = nullptr;
    long port = std::strtol(port_text.c_str(), &end, 10);
    if (port_text.empty() || *end != '\0' || port < 1 || port > 65535)
        return invalid_argument("port '%s' in '%s' is not a number from 1 to 65535", port_text.c_str(), text.c_str());
    return resolve_host(host, static_cast<uint16_t>(port), out);
}

bool interface_matches(const std::string &spec, const char *name) {
    if (spec.empty()) return false;
    bool exclude = spec[0] == '^';
    std::string list = exclude ? spec.substr(1) : spec;
    bool exact = !list.empty() && list[0] == '=';
    if (exact) list = list.substr(1);
    bool any = false;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) {
            bool hit = exact ? item == name : std::strncmp(name, item.c_str(), item.size()) == 0;
            any = any || hit;
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return exclude ? !any : any;
}

void watch_for_silent_host(int fd) {
    // Keepalive probes while the connection is idle, and the same bound on
    // data left unacknowledged: about 5 s of silence, then the socket fails
    // with ETIMEDOUT.
    int one = 1, idle = 2, interval = 1, count = 3;
    unsigned int unacked_ms = 5000;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &unacked_ms, sizeof unacked_ms);
}

Status pick_local_address(SockAddr *out) {
    std::string spec = env_string("NNPCCL_SOCKET_IFNAME");
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return errno_error("getifaddrs");
    const ifaddrs *chosen = nullptr;
    for (const ifaddrs *ifa = list; ifa != nullptr && chosen == nullptr; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
        int family = ifa->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        if (!spec.empty()) {
            if (interface_matches(spec, ifa->ifa_name)) chosen = ifa;
        } else if (family == AF_INET && !(ifa->ifa_flags & IFF_LOOPBACK)) {
            chosen = ifa;
        }
    }
    if (chosen == nullptr && !spec.empty()) {
        freeifaddrs(list);
        return invalid_argument("NNPCCL_SOCKET_IFNAME=%s matches no interface that is up", spec.c_str());
    }
    *out = SockAddr{};
    if (chosen != nullptr) {
        size_t len = chosen->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        std::memcpy(&out->storage, chosen->ifa_addr, len);
        out->length = static_cast<socklen_t>(len);
    } else {
        auto *v4 = reinterpret_cast<sockaddr_in *>(&out->storage);
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        out->length = sizeof(sockaddr_in);
    }
    out->set_port(0);
    freeifaddrs(list);
    return Status::ok();
}

Status listen_tcp(const SockAddr &addr, int *fd, SockAddr *bound) {
    int s = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno_error("socket");
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, reinterpret_cast<const sockaddr *>(&addr.storage), addr.length) != 0) {
        Status st = errno_error("bind to " + addr.to_string());
        close(s);
        return st;
    }
    if (listen(s, 1024) != 0) {
        Status st = errno_error("listen on " + addr.to_string());
        close(s);
        return st;
    }
    *bound = addr;
    bound->length = sizeof(bound->storage);
    getsockname(s, reinterpret_cast<sockaddr *>(&bound->storage), &bound->length);
    *fd = s;
    return Status::ok();
}

Status connect_tcp(const SockAddr &addr, const Deadline &deadline, int *fd, const StopSignal *stop) {
    int last_errno = 0;
    int backoff_ms = 1;
    while (true) {
        if (stop != nullptr && stop->raised()) return stopped_error();
        int s = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) return errno_error("socket");
        int rc = connect(s, reinterpret_cast<const sockaddr *>(&addr.storage), addr.length);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{s, POLLOUT, 0};
            rc = poll_unless_stopped(p, deadline.ms_left(1000), stop);
            if (rc == kStopped) {
                close(s);
                return stopped_error();
            }
            int err = 0;
            socklen_t len = sizeof err;
            if (rc == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
                rc = 0;
            } else {
                errno = rc == 0 ? ETIMEDOUT : err;
                rc = -1;
            }
        }
        if (rc == 0) {
            int flags = fcntl(s, F_GETFL);
            fcntl(s, F_SETFL, flags & ~O_NONBLOCK);
            int one = 1;
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            watch_for_silent_host(s);
            *fd = s;
            return Status::ok();
        }
        last_errno = errno;
        close(s);
        if (deadline.passed())
            return timeout_error("could not connect to %s before the deadline (last error: %s)",
                                 addr.to_string().c_str(), std::strerror(last_errno));
        // The pause before the next attempt, which abort also cuts short.
        pollfd nothing{-1, 0, 0};
        if (poll_unless_stopped(nothing, std::min(backoff_ms, deadline.ms_left()), stop) == kStopped)
            return stopped_error();
        backoff_ms = std::min(backoff_ms * 2, 100);
    }
}

Status send_all(int fd, const void *data, size_t len, const Deadline &deadline, const StopSignal *stop) {
    const char *p = static_cast<const char *>(data);
    while (len > 0) {
        pollfd pfd{fd, POLLOUT, 0};
        int rc = poll_unless_stopped(pfd, deadline.ms_left(1000), stop);
        if (rc == kStopped) return stopped_error();
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) {
            if (deadline.passed()) return timeout_error("sending to the bootstrap peer timed out");
            continue;
        }
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return Status(NNPCCL_ERR_REMOTE, format("bootstrap connection lost while sending: %s", std::strerror(errno)));
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return Status::ok();
}

Status recv_all(int fd, void *data, size_t len, const Deadline &deadline, const StopSignal *stop) {
    char *p = static_cast<char *>(data);
    while (len > 0) {
        pollfd pfd{fd, POLLIN, 0};
        int rc = poll_unless_stopped(pfd, deadline.ms_left(1000), stop);
        if (rc == kStopped) return stopped_error();
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) {
            if (deadline.passed()) return timeout_error("waiting for the bootstrap peer timed out");
            continue;
        }
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n == 0) return remote_error("the bootstrap peer closed the connection");
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return remote_error("bootstrap connection lost while receiving: %s", std::strerror(errno));
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return Status::ok();
}

void close_fd(int &fd) {
    if (fd >= 0) close(fd);
    fd = -1;
}

} // namespace nnpccl
