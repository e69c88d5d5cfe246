// A communicator's settings: each layer's options, read by that layer
// (planning_options.hpp, shm/shm_options.hpp, socket/socket_options.hpp,
// ofi/ofi_options.hpp, emulated/link_emulation.hpp), and the runtime's own.
// Resolved once per communicator from the caller's nnpccl_config_t, then the
// environment, then the defaults; the README's table lists every variable.
#pragma once

#include <string>

#include "emulated/link_emulation.hpp"
#include "nnpccl.h"
#include "ofi/ofi_options.hpp"
#include "planning_options.hpp"
#include "shm/shm_options.hpp"
#include "socket/socket_options.hpp"
#include "status.hpp"

namespace nnpccl {

enum class TransportMode { Auto, Shm, Ofi, Socket };
// Whether every peer, those on this host too, is reached over the network.
constexpr bool network_only(TransportMode mode) { return mode == TransportMode::Ofi || mode == TransportMode::Socket; }
// What reaches ranks on other hosts when NNPCCL_TRANSPORT is auto.
enum class NetTransport { Auto, Socket, Ofi };

// What init finds out about the host is apart, in HostFacts (src/comm.hpp).
struct Settings {
    // NNPCCL_TRANSPORT: auto (shm within a host, the network across), shm, ofi, socket.
    TransportMode transport = TransportMode::Auto;
    // NNPCCL_NET_TRANSPORT: auto (libfabric where it offers a fabric that is
    // not TCP, else nnpccl's sockets), socket, ofi.
    NetTransport net_transport = NetTransport::Auto;
    int timeout_sec = 300; // NNPCCL_TIMEOUT: deadline of every wait on a peer
    int spin_us = -1;      // NNPCCL_SPIN_US: busy-wait before sleeping; -1 = by core count
    std::string pin;       // NNPCCL_PIN: auto (default), off, or a CPU list
    bool blocking = true;  // config->blocking only: false = init builds the communicator in the background
    // NNPCCL_TRACE: a file for the timeline of every operation and step
    // (src/trace.hpp), in Chrome's trace-event JSON; empty = no timeline.
    std::string trace;
    ShmOptions shm;
    SocketOptions socket;
    OfiOptions ofi;
    PlanningOptions planning;
    TuningOptions tuning;
    LinkEmulation emulation;
};

// Resolves the settings; a malformed config or environment value is an
// invalid-argument error naming the variable or the config's field.
Status resolve_settings(const nnpccl_config_t *config, Settings *out);

} // namespace nnpccl
