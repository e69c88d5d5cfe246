// Reading settings: the helpers every layer's options are read with. Each
// layer declares its own options next to its code and reads its own
// variables (topology/machine_options.hpp, algorithms/planning_options.hpp,
// transports/shm/shm_options.hpp, socket/socket_options.hpp,
// ofi/ofi_options.hpp, emulated/link_emulation.hpp); the runtime gathers
// them in Settings (src/settings.hpp), resolved once per communicator from
// the caller's nnpccl_config_t, then the environment, then the defaults. The
// README's table lists every variable. A malformed value is an
// invalid-argument error naming the variable.
#pragma once

#include <cstddef>
#include <string>

#include "nnpccl.h"
#include "parse_size.hpp"
#include "status.hpp"

namespace nnpccl {

// The value of an environment variable, or "" when unset.
std::string env_string(const char *name);

// Each reads `name` from the environment into *out and leaves *out as it
// was when the variable is unset; anything outside the syntax or range is
// an invalid argument naming the variable and its value.
// A whole number from min to max.
Status env_int(const char *name, int min, int max, int *out);
// 0 or 1.
Status env_flag(const char *name, bool *out);
// A size (parse_size) from min to max; the error says "is not a size from
// `range`" (e.g. "4K to 64M"). *set, when given, says whether it was set.
Status env_size(const char *name, size_t min, size_t max, const char *range, size_t *out, bool *set = nullptr);
// A number from lo to hi; the error says "is not a number from `range`".
Status env_number(const char *name, double lo, double hi, const char *range, double *out);

// `text` is one number from lo to hi (and nothing after it).
bool parse_number_within(const std::string &text, double lo, double hi, double *out);

// A config's struct_size is one nnpccl can read: at least the fields of the
// first release, and not absurd. Fields beyond the caller's struct_size are
// unknown to it: a reader of a later field checks that the size holds it.
Status check_config_size(const nnpccl_config_t *config);

// NNPCCL_SHM_SLOTS: messages in flight per stream (pipelining depth), at
// most, in every transport (shm, socket, ofi) and in ccl-sim's model of a
// stream. Read here, the one layer all of those see.
constexpr int kDefaultStreamSlots = 8;
Status resolve_stream_slots(int *slots);

} // namespace nnpccl
