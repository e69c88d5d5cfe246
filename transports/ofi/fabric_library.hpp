// libfabric, opened on the ofi transport's first use instead of linked.
// Loading libfabric.so.1 loads its provider libraries too (psm, psm2,
// verbs, efa, ...), whose constructors make every process that maps them
// start about 0.2 s later (libinfinipath's sleeps in a loop), although
// only the ofi transport needs libfabric: shared memory and nnpccl's own
// sockets do not. So libnnpccl does not link it, and a process that never
// uses ofi never maps it (docs/design.md, "Transport").
//
// The ofi transport calls only these functions of the library itself:
// every other fi_* call is inline in libfabric's headers and goes through
// the tables of operations of the objects these functions hand out.
#pragma once

#include <rdma/fabric.h>

#include <string>

#include "status.hpp"

namespace nnpccl {

struct FabricLibrary {
    decltype(&::fi_getinfo) getinfo = nullptr;
    decltype(&::fi_freeinfo) freeinfo = nullptr;
    // fi_allocinfo() is fi_dupinfo(NULL) in libfabric's headers.
    decltype(&::fi_dupinfo) dupinfo = nullptr;
    decltype(&::fi_fabric) fabric = nullptr;
    decltype(&::fi_strerror) strerror = nullptr;

    // libfabric's text for a return code, whatever its sign.
    std::string message(int rc) const { return strerror(rc < 0 ? -rc : rc); }
};

// libfabric.so.1's functions, the library opened by the first call in the
// process (from any thread) and kept open for good, as the providers'
// objects live as long as the communicators that opened them. Where it
// cannot be opened, every call gives the same error, naming the library
// and why.
Status open_fabric_library(const FabricLibrary **out);

} // namespace nnpccl
