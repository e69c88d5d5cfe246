// Which transport serves which peer, and opening them: a table of the
// transports nnpccl has, each with whether it can reach a pair of ranks and
// how it is made (as NCCL's array of transports), the choice of what
// reaches other hosts, and the routes the executor sends through. Apart
// from init.cpp so that adding a transport is one entry in one file
// (docs/design.md, "Adding a transport").
#pragma once

#include "comm.hpp"
#include "job_hosts.hpp"

namespace nnpccl {

// Opens every transport some pair of ranks needs (collectively: every rank
// opens it when any rank needs it) into comm.transports, then routes each
// peer over the first transport of the table that can reach it
// (comm.route).
Status open_transports(nnpccl_comm &comm, const JobHosts &hosts, const Deadline &deadline);

} // namespace nnpccl
