// Where every rank of a job runs, as init learns it (init.cpp,
// learn_hosts): a host is a host name and a boot id, and ranks on one host
// share memory. Apart from init.cpp because opening the transports
// (transport_choice.cpp) reads it too.
#pragma once

#include <string>
#include <vector>

namespace nnpccl {

struct JobHosts {
    std::vector<std::string> host; // by rank
    std::vector<int> local;        // the ranks on this rank's host, in rank order
    int local_index = 0;           // this rank's place among them
    bool any_remote = false;       // some rank runs on another host than rank 0
    bool any_host_shared = false;  // some two ranks share a host
};

} // namespace nnpccl
