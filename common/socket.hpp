// TCP helpers for the bootstrap: addresses, listening, connecting and whole
// reads/writes, every one bounded by a deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <string>

#include "deadline.hpp"
#include "status.hpp"

namespace nnpccl {

struct SockAddr {
    sockaddr_storage storage{};
    socklen_t length = 0;

    int family() const { return storage.ss_family; }
    uint16_t port() const;
    void set_port(uint16_t port);
    std::string to_string() const; // "1.2.3.4:5678" or "[::1]:5678"
};

// Ends waits from another thread before their deadline: abort raises it
// while a nonblocking init is waiting for the other ranks. Its fd (an
// eventfd) becomes readable when raised, so a wait that polls it alongside
// its socket wakes at once rather than after some polling period.
class StopSignal {
public:
    StopSignal() = default;
    ~StopSignal();
    StopSignal(const StopSignal &) = delete;
    StopSignal &operator=(const StopSignal &) = delete;

    Status open();
    void raise();
    bool raised() const { return raised_.load(std::memory_order_acquire); }
    int fd() const { return fd_; }

private:
    std::atomic<bool> raised_{false};
    int fd_ = -1;
};

// What a wait returns when its stop signal was raised.
Status stopped_error();

// Parses "host:port" or "[v6]:port"; host may be a name (resolved once).
Status parse_host_port(const std::string &text, SockAddr *out);
Status resolve_host(const std::string &host, uint16_t port, SockAddr *out);

// The address to listen on and to announce: the interface NNPCCL_SOCKET_IFNAME
// names (comma-separated prefixes allowed, "^" excludes), else the first
// non-loopback IPv4 interface that is up, else 127.0.0.1.
Status pick_local_address(SockAddr *out);

// Whether interface `name` is one NNPCCL_SOCKET_IFNAME's `spec` names, as
// NCCL_SOCKET_IFNAME reads it: comma-separated name prefixes ("eth,ib"),
// "^" before the list to exclude them ("^lo,docker"), "=" before it for
// exact names ("=eth0"). The rendezvous and the ofi transport both read it.
bool interface_matches(const std::string &spec, const char *name);

// The bootstrap's heartbeat on a connected TCP socket: a peer whose host
// vanishes without closing it (power, a cut link) makes it fail with
// ETIMEDOUT after about 5 s of silence.
void watch_for_silent_host(int fd);

// A listening, close-on-exec socket bound to addr (port 0 = any); *bound gets
// the actual address.
Status listen_tcp(const SockAddr &addr, int *fd, SockAddr *bound);

// Whether socket(), connect() or accept() failed with `err` for want of
// this process's own resources (file descriptors, kernel memory), not
// because of the other end: the message must say so, and a listener that
// stays readable must no longer be polled.
inline bool out_of_resources(int err) { return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM; }

// Connects, retrying refused or unreachable attempts until the deadline.
// These three also end early, with stopped_error(), once `stop` is raised.
Status connect_tcp(const SockAddr &addr, const Deadline &deadline, int *fd, const StopSignal *stop = nullptr);

Status send_all(int fd, const void *data, size_t len, const Deadline &deadline, const StopSignal *stop = nullptr);
Status recv_all(int fd, void *data, size_t len, const Deadline &deadline, const StopSignal *stop = nullptr);

void close_fd(int &fd);

} // namespace nnpccl
