// Which transport serves which peer, and opening them: a table of the
// transports nnpccl has, each with whether it can reach a pair of ranks and
// how it is made (as NCCL's array of transports), the choice of what
// reaches other hosts, and the routes the executor sends through. Apart
// from init.cpp so that adding a transport is one entry in one file
// (docs/design.md, "Adding a transport").
#pragma once

#include <string>

#include "bootstrap.hpp"
#include "job_hosts.hpp"
#include "links.hpp"
#include "settings.hpp"

namespace nnpccl {

// What opening the transports needs from init (init.cpp, Init::open_transports).
struct TransportSetup {
    Bootstrap &bootstrap;
    const Settings &settings;
    const JobHosts &hosts;
    int rank;
    int nranks;
    int numa_node;               // this rank's, for its shm queues (-1: leave to the kernel)
    const std::string &nic_hint; // the NIC nearest this rank, for ofi
    size_t message_bytes;        // a slot: a chunk and the descriptor ahead of it
    int channels;                // streams per peer
    const Deadline &deadline;
};

// Opens every transport some pair of ranks needs (collectively: every rank
// opens it when any rank needs it) into `links`, then routes each peer
// over the first transport of the table that can reach it.
Status open_transports(const TransportSetup &setup, Links *links);

} // namespace nnpccl
