// libFuzzer target: the decoders of the records init's agreements allgather
// (common/init_wire.hpp), which every rank runs on every other rank's bytes.
// The first byte picks the decoder, the rest is its input. A decoder never
// reads out of bounds (ASan) and accepts only what its encoder writes: an
// accepted record, encoded again, gives back the same bytes, and holds the
// values the header promises.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "init_wire.hpp"

using namespace nnpccl;

namespace {

void check(bool holds) {
    if (!holds) std::abort();
}

void host(const std::string &bytes) {
    HostRecord r;
    if (!decode_host_record(bytes, &r).is_ok()) return;
    check(!r.transport.empty() && !r.host.empty() && encode_host_record(r) == bytes);
    for (const NamedSetting &s : r.shared_settings)
        check(!s.name.empty() && s.name.find_first_of("=\n") == std::string::npos &&
              s.value.find('\n') == std::string::npos);
}

void planning(const std::string &bytes) {
    PlanningRecord r;
    if (!decode_planning_record(bytes, &r).is_ok()) return;
    check(std::isfinite(r.ranks_per_core) && r.ranks_per_core > 0 && encode_planning_record(r) == bytes);
    for (double v : r.reduce_us_per_byte) check(std::isfinite(v) && v >= 0);
    if (r.tuning_file.kind == TuningFileEntry::Kind::File) check(!r.tuning_file.path.empty());
    if (r.tuning_file.kind == TuningFileEntry::Kind::Unreadable) check(!r.tuning_file.text.empty());
}

void link_speed(const std::string &bytes) {
    LinkSpeedRecord r;
    if (!decode_link_speed_record(bytes, &r).is_ok()) return;
    check(std::isfinite(r.reported_gbps) && r.reported_gbps >= 0 && encode_link_speed_record(r) == bytes);
}

void link_table(const std::string &bytes) {
    LinkTableRecord r;
    if (!decode_link_table_record(bytes, &r).is_ok()) return;
    check(r.region.find_first_not_of("0123456789 ") == std::string::npos && encode_link_table_record(r) == bytes);
}

void network_choice(const std::string &bytes) {
    NetworkChoiceRecord r;
    if (!decode_network_choice_record(bytes, &r).is_ok()) return;
    check(encode_network_choice_record(r) == bytes);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const std::string bytes(reinterpret_cast<const char *>(data + 1), size - 1);
    switch (data[0] % 5) {
    case 0: host(bytes); break;
    case 1: planning(bytes); break;
    case 2: link_speed(bytes); break;
    case 3: link_table(bytes); break;
    case 4: network_choice(bytes); break;
    }
    return 0;
}
