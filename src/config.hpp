// Runtime settings, resolved once per communicator from the caller's
// nnpccl_config_t, then the environment, then the defaults. Every variable
// nnpccl reads is listed here (the README's table mirrors it).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "nnpccl.h"
#include "status.hpp"

namespace nnpccl {

class AlgoOverride; // algorithms/algo_override.hpp

enum class TransportMode { Auto, Shm, Ofi };

struct Settings {
    TransportMode transport = TransportMode::Auto; // NNPCCL_TRANSPORT: auto (shm within a host, ofi across), shm, ofi
    int timeout_sec = 300;            // NNPCCL_TIMEOUT: deadline of every wait on a peer
    size_t chunk_bytes = 512 * 1024;  // NNPCCL_CHUNK_SIZE: pipelining unit (data per message)
    size_t message_bytes = 0;         // a transport slot: a chunk plus the header the executor adds; set at init
    int shm_slots = 8;                // NNPCCL_SHM_SLOTS: slots per shm queue (pipelining depth)
    int ofi_send_in_place = 1;        // NNPCCL_OFI_SEND_IN_PLACE: 0 copies every message into a registered slot
    int spin_us = -1;                 // NNPCCL_SPIN_US: busy-wait before sleeping; -1 = by core count
    std::string topology;             // NNPCCL_TOPO: a preset name or a topology file; empty = flat
    bool emulate_links = false;       // NNPCCL_EMULATE_LINKS=1: pace traffic to the topology's links
    double emulate_scale = 1.0;       // NNPCCL_EMULATE_SCALE: emulated time runs this many times slower
    std::string pin;                  // NNPCCL_PIN: auto (default), off, or a CPU list
    bool tune = true;                 // NNPCCL_TUNE=0: no measured tuning (src/tuner.hpp); rank 0's counts
    bool blocking = true;             // config->blocking only: false = init builds the communicator in the background
    std::shared_ptr<const AlgoOverride> algo_override; // NNPCCL_ALGO: forced algorithms by collective and size; null when unset
    // Filled in at init from the host, not from the environment:
    int numa_node = -1;               // the rank's NUMA node, for its shm queues (-1: leave to the kernel)
    std::string nic_hint;             // the NIC nearest the rank, for ofi when NNPCCL_SOCKET_IFNAME is unset
    // The planner's γ: µs per byte a host sum takes, by element size 1, 2,
    // 4, 8 (reduce.hpp); rank 0's measurement, so every rank plans alike.
    std::array<double, 4> reduce_us_per_byte{};
    // Ranks per core on the most crowded host of the communicator (at
    // least 1); the planner's lockstep term (cost_model.cpp).
    double ranks_per_core = 1;
};

// Parses "4096", "512K", "4M", "1G" (powers of 1024). Returns nullopt on
// anything else, including overflow.
std::optional<size_t> parse_size(const std::string &text);

// Resolves the settings; a malformed config or environment value is an
// invalid-argument error naming the variable.
Status resolve_settings(const nnpccl_config_t *config, Settings *out);

// The value of an environment variable, or "" when unset.
std::string env_string(const char *name);

} // namespace nnpccl
