// Launchers' environments (launch_env.cpp): nnpccl_comm_init_from_env.
#pragma once

#include <string>

#include "bootstrap.hpp"
#include "config.hpp"
#include "deadline.hpp"
#include "nnpccl.h"
#include "status.hpp"

namespace nnpccl {

// Rank, size and root address from a launcher's environment.
struct LaunchEnv {
    int rank = -1;
    int size = -1;
    std::string launcher; // "torchrun", "Kubernetes Indexed Job", "Open MPI", "MPICH", "Slurm"
    std::string root;     // host:port
    JobSecret secret{};
    // Set instead of `root` when every rank is on this host and no address
    // was given: rank 0 publishes a unique id in this file (0600).
    std::string rendezvous_file;
};
Status read_launch_env(LaunchEnv *out);

// The file rendezvous of a one-host launch: rank 0 writes the id atomically;
// the others wait for it until the deadline, or until `stop` is raised.
Status publish_unique_id(const std::string &path, const nnpccl_unique_id_t &id);
Status read_unique_id(const std::string &path, const Deadline &deadline, nnpccl_unique_id_t *id,
                      const StopSignal *stop = nullptr);
// What a file rendezvous that timed out most likely lacked, for its message.
extern const char *const kRendezvousFileHint;

} // namespace nnpccl
