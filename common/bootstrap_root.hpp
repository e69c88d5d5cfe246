// The rendezvous root: a thread that accepts the ranks of one job, checks
// their secret, and serves allgather rounds (a star: the root collects one
// part from every rank and sends all parts back). It lives until every rank
// that joined has gone, or until ranks fail to join by the deadline.
#pragma once

#include "bootstrap_wire.hpp"

namespace nnpccl {

// Binds to `bind_addr` (port 0 = any free port), starts the root thread and
// returns the bound address in *bound. The thread owns itself.
Status start_bootstrap_root(const SockAddr &bind_addr, const JobSecret &secret, int join_timeout_sec,
                            SockAddr *bound);

// Whether this process (not a parent it was forked from) started the root
// of the job with `secret`. A rank whose process hosts the root tells the
// others, so that they can name it when the root's connection closes.
bool process_hosts_bootstrap_root(const JobSecret &secret);

} // namespace nnpccl
