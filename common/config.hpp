// Runtime settings, resolved once per communicator from the caller's
// nnpccl_config_t, then the environment, then the defaults. Every variable
// nnpccl reads is listed here (the README's table mirrors it).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "nnpccl.h"
#include "parse_size.hpp"
#include "status.hpp"

namespace nnpccl {

enum class TransportMode { Auto, Shm, Ofi, Socket };
// Whether every peer, those on this host too, is reached over the network.
constexpr bool network_only(TransportMode mode) { return mode == TransportMode::Ofi || mode == TransportMode::Socket; }
// What reaches ranks on other hosts when NNPCCL_TRANSPORT is auto.
enum class NetTransport { Auto, Socket, Ofi };

// Each layer's options, as the user set them. What init finds out about the
// host is apart, in HostFacts (src/comm.hpp).
struct ShmOptions {
    int slots = 8; // NNPCCL_SHM_SLOTS: slots per queue (pipelining depth), at most
    // NNPCCL_SHM_BYTES: the shared memory one rank's queues may hold
    // resident (its inbound queues and its outbound ones in its local
    // peers' segments). The transport gives each queue as many slots as fit,
    // up to `slots`; many local ranks get fewer.
    size_t bytes = kDefaultShmBytes;
    // Whether the user set `bytes`: then it is a bound, and a job that needs
    // more than it allows (2 slots per queue) fails at init. The default
    // yields to those 2 slots on hosts of more than 30 ranks (at the default
    // chunk). It gives up to 8 local ranks the full 8 slots (8 ranks' queues
    // take 113 MiB), so that with the few MiB the rest of the library holds
    // a rank stays within 128 MiB resident (docs/performance.md,
    // "Footprint"); 8 slots is what 8 ranks on 2 cores need to run at full
    // speed at 16-64 MiB.
    bool bytes_set = false;
    static constexpr size_t kDefaultShmBytes = size_t{120} << 20;
};
struct SocketOptions {
    int slots = 8; // NNPCCL_SHM_SLOTS too: messages in flight per stream, each way
};
struct OfiOptions {
    int slots = 8;             // NNPCCL_SHM_SLOTS too: receives posted per stream
    bool send_in_place = true; // NNPCCL_OFI_SEND_IN_PLACE=0: every message through registered slots, both ways
};
struct PlanningOptions {
    size_t chunk_bytes = 512 * 1024; // NNPCCL_CHUNK_SIZE: pipelining unit (data per message)
    std::string chunk_source = "NNPCCL_CHUNK_SIZE"; // or config->chunk_bytes, for error messages
    std::string topology;            // NNPCCL_TOPO: a preset name or a topology file; empty = flat
    // NNPCCL_NET=GBPS[,LATENCY_US]: the network between hosts of a job on
    // several hosts (and of hosts:... presets); 0 = the default (presets.hpp).
    double network_gbps = 0;
    double network_latency_us = -1;
    // NNPCCL_ALGO's syntax (algorithms/algo_override.hpp), unparsed: the
    // algorithms layer parses it when the communicator is made. `source`
    // names where it came from, for its error messages.
    std::string algorithms;
    std::string algorithms_source = "NNPCCL_ALGO";
    // NNPCCL_TUNING_FILE: a path (algorithms/tuning_file.hpp); rank 0's counts.
    std::string tuning_file;
};
struct TuningOptions {
    bool enabled = false; // NNPCCL_TUNE=1: measured tuning (src/tuner.hpp); rank 0's counts
};
struct LinkEmulation {
    bool links = false; // NNPCCL_EMULATE_LINKS=1: pace traffic to the topology's links
    double scale = 1.0; // NNPCCL_EMULATE_SCALE: emulated time runs this many times slower
};

struct Settings {
    TransportMode transport = TransportMode::Auto; // NNPCCL_TRANSPORT: auto (shm within a host, the network across), shm, ofi, socket
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
// invalid-argument error naming the variable.
Status resolve_settings(const nnpccl_config_t *config, Settings *out);

// The value of an environment variable, or "" when unset.
std::string env_string(const char *name);

} // namespace nnpccl
