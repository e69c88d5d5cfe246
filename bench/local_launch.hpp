// `ccl-bench --np N`: runs N ranks on this host as child processes that
// share one unique id. If one rank fails, the others are stopped, so a
// broken run ends instead of waiting for the timeout.
#pragma once

#include <functional>

#include "nnpccl.h"

// Forks `nranks` children, each calling body(rank, nranks, id); returns the
// exit status for the whole job (0 when every rank exited 0).
int run_local_ranks(int nranks, const std::function<int(int, int, const nnpccl_unique_id_t &)> &body);
