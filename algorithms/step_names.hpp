// What a schedule step is called in timelines: the real run's
// (NNPCCL_TRACE, src/trace.hpp) and the simulator's (ccl-sim --trace), which
// share these names so that the two open side by side in one viewer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nnpccl {

// What a step does, its parts joined as NCCL names its primitives (recv,
// reduce, copy for a store, send, in that order): "recv-reduce-send";
// "nothing" for no part.
std::string_view step_verb(uint8_t flags);
// "8 B", "1.5 KiB", "256 KiB", "1.0 MiB": one decimal below 10 units.
std::string trace_size(size_t bytes);
// A step's event name: its verb, its payload and its peers:
// "recv-reduce-send 1.0 MiB from 3 to 5", "send 256 KiB to 2", "recv-copy 64
// KiB from 1", "reduce 4.0 KiB" (a local combine), "copy 8 B".
std::string trace_step_name(uint8_t flags, size_t bytes, int recv_peer, int send_peer);

} // namespace nnpccl
