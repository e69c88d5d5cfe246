// Launchers' environments (launch_env.cpp): nnpccl_comm_init_from_env.
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap.hpp"
#include "config.hpp"
#include "deadline.hpp"
#include "nnpccl.h"
#include "status.hpp"

namespace nnpccl {

// Under torchrun's variables, rank 0 hosts the rendezvous root at
// MASTER_PORT + kMasterPortOffset (MASTER_PORT - kMasterPortOffset where
// that would pass 65535): MASTER_PORT itself is torch's store's.
constexpr int kMasterPortOffset = 100;

// Rank, size and root address from a launcher's environment.
struct LaunchEnv {
    int rank = -1;
    int size = -1;
    std::string launcher; // "torchrun", "Kubernetes Indexed Job", "Open MPI", "MPICH", "Slurm"
    std::string root;     // host:port
    std::string root_from; // where `root` came from, for messages: "NNPCCL_ROOT=..." or the MASTER_* rule
    JobSecret secret{};
    bool secret_given = false; // NNPCCL_JOB_SECRET, rather than derived
    // Set instead of `root` when every rank is on this host and no address
    // was given: rank 0 publishes a unique id in this file (0600), named
    // after a key of what the job's ranks share (rendezvous_key).
    std::string rendezvous_file;
    uint64_t rendezvous_key = 0;
    // What the key is made of, for messages: "parent process 812, WORLD_SIZE=2, ...".
    std::string rendezvous_keyed_by;
};
Status read_launch_env(LaunchEnv *out);

// NNPCCL_JOB_SECRET's value: exactly 32 hex digits.
Status parse_job_secret(const std::string &text, JobSecret *out);

// Rank 0 of a job with an address: starts the root on every interface at
// its port, so the name other hosts use for it need not be one of its own.
Status start_root_from_env(const LaunchEnv &env, int timeout_sec, UniqueId *id);
// A non-root rank's failure to join: where it is about reaching the root,
// says where rank 0 was to host it and what keeps it from doing so.
Status explain_join_failure(const LaunchEnv &env, const Status &failure);

// The file rendezvous of a one-host launch. Rank 0 publishes the id in
// the file, exclusively; every other rank first claims its place (a file
// of its own next to it) and then waits for the id until the deadline, or
// until `stop` is raised. A place or file held by a live process of
// another job with the same key fails at once, naming why: the ranks of
// two such jobs cannot tell which rank 0 is theirs, and must not guess.
Status publish_unique_id(const LaunchEnv &env, const nnpccl_unique_id_t &id);
Status claim_rendezvous_place(const LaunchEnv &env);
Status read_unique_id(const LaunchEnv &env, const Deadline &deadline, nnpccl_unique_id_t *id,
                      const StopSignal *stop = nullptr);
// Removes what this rank made (rank 0's file, another rank's place), once
// it has joined or failed.
void leave_rendezvous(const LaunchEnv &env);
// What a file rendezvous that timed out most likely lacked, for its message.
extern const char *const kRendezvousFileHint;

} // namespace nnpccl
