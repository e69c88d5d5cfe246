// `ccl-bench --np N`: runs N ranks on this host as child processes that
// share one unique id. If one rank fails, the others are stopped, so a
// broken run ends instead of waiting for the timeout.
#pragma once

#include <functional>
#include <vector>

#include "nnpccl.h"

// Forks `nranks` children, each calling body(rank, nranks, id); returns the
// exit status for the whole job (0 when every rank exited 0). With
// `stop_others_on_failure` false the others run on (to see how they fail).
// `statuses`, when given, receives each rank's exit status.
int run_local_ranks(int nranks, const std::function<int(int, int, const nnpccl_unique_id_t &)> &body,
                    bool stop_others_on_failure = true, std::vector<int> *statuses = nullptr);
