// `ccl-bench --np N`: runs N ranks on this host as child processes that
// share one unique id. If one rank fails, the others are stopped, so a
// broken run ends instead of waiting for the timeout.
#pragma once

#include <functional>
#include <vector>

#include "nnpccl.h"

// Called with the job's unique id before the ranks receive it.
using BeforeRanksStart = std::function<void(const nnpccl_unique_id_t &)>;

// Forks `nranks` children, each calling body(rank, nranks, id); returns the
// exit status for the whole job: 0 when every rank exited 0, else the first
// rank to fail's (as mpirun reports it). With
// `stop_others_on_failure` false the others run on (to see how they fail).
// `statuses`, when given, receives each rank's exit status. Only the job's
// own processes are reaped: the caller's other children stay its own.
//
// The calling process starts no thread. The id is made, and the rendezvous
// root's thread runs, in a further child that lives as long as the job; the
// ranks get the id through pipes. A process that forks while one of its
// threads holds a lock (the allocator's, the logger's) leaves the child
// waiting on it forever, and ThreadSanitizer refuses such forks outright, so
// the parent of many jobs must stay single-threaded.
int run_local_ranks(int nranks, const std::function<int(int, int, const nnpccl_unique_id_t &)> &body,
                    bool stop_others_on_failure = true, std::vector<int> *statuses = nullptr,
                    const BeforeRanksStart &before_ranks_start = {});
