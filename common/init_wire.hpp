// The records init's agreements allgather through the bootstrap
// (src/init.cpp, src/transport_choice.cpp): what each rank says about where
// it runs, its planning inputs, its NIC's link speed, the host's table of
// emulated links and its choice of network transport. Every rank decodes
// every other rank's record, so the decoders here are the only reading of
// those bytes: each checks every length and value before using it and
// refuses anything an encoder here would not have written, with a Status
// that says what was wrong (tests/fuzz/fuzz_init_wire.cpp holds them to it).
//
// Record: magic u32 "NNPI" | kind u8 | version u8 | the kind's fields.
// Fields in host byte order (all ranks of a job share an architecture, as
// the bootstrap's frames do): integers fixed-width, doubles as their 8
// bytes, bools as one byte 0 or 1, strings as a u32 length and the bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "status.hpp"

namespace nnpccl {

enum class InitRecordKind : uint8_t { Host = 1, Planning = 2, LinkSpeed = 3, LinkTable = 4, NetworkChoice = 5 };

// One setting the ranks must share, under its variable's name
// ("NNPCCL_CHUNK_SIZE", "1048576"): compared as text, since that is how a
// mismatch is reported.
struct NamedSetting {
    std::string name;  // non-empty; no '=', newline or NUL
    std::string value; // no newline or NUL
    bool operator==(const NamedSetting &o) const { return name == o.name && value == o.value; }
};

// learn_hosts: where a rank runs and what it must agree on with every rank.
struct HostRecord {
    std::string transport;                     // NNPCCL_TRANSPORT as resolved ("auto", "shm", ...); non-empty
    bool process_hosts_root = false;           // this rank's process hosts the rendezvous root
    std::string host;                          // host name "/" boot id; non-empty
    std::vector<NamedSetting> shared_settings; // in a fixed order, the same names on every rank
};

// Rank 0's NNPCCL_TUNING_FILE, which every rank plans with.
struct TuningFileEntry {
    enum class Kind : uint8_t { None = 0, File = 1, Unreadable = 2 };
    Kind kind = Kind::None;
    std::string path; // File: as given
    std::string text; // File: its contents; Unreadable: why, the whole message
};

// agree_on_planning_inputs: every rank's part, and rank 0's on top.
struct PlanningRecord {
    double ranks_per_core = 1;      // positive and finite
    bool host_over_network = false; // NNPCCL_TRANSPORT=ofi or socket
    bool has_root_part = false;     // rank 0's record: the fields below
    bool tune = false;              // rank 0's NNPCCL_TUNE
    // With tune: rank 0's measured reduction speeds (CostInputs'
    // host_reduce_us_per_byte), finite and not negative.
    std::array<double, 4> reduce_us_per_byte{};
    TuningFileEntry tuning_file;
};

// agree_on_network: the link speed libfabric reports for this rank's NIC.
struct LinkSpeedRecord {
    double reported_gbps = 0; // finite, not negative; 0 when it reports none
};

// share_link_table: the host's table of emulated links, announced by the
// rank that made it ("PID FD", shared_memory.hpp); empty from the others.
struct LinkTableRecord {
    std::string region;
};

// choose_network: what this rank would reach other hosts over, and whether
// NNPCCL_NET_TRANSPORT asked for it (rather than auto choosing it).
struct NetworkChoiceRecord {
    enum class Network : uint8_t { Socket = 1, Ofi = 2 };
    Network network = Network::Socket;
    bool asked = false;
};
const char *network_name(NetworkChoiceRecord::Network network); // "socket", "ofi"

std::string encode_host_record(const HostRecord &record);
Status decode_host_record(const std::string &bytes, HostRecord *out);
std::string encode_planning_record(const PlanningRecord &record);
Status decode_planning_record(const std::string &bytes, PlanningRecord *out);
std::string encode_link_speed_record(const LinkSpeedRecord &record);
Status decode_link_speed_record(const std::string &bytes, LinkSpeedRecord *out);
std::string encode_link_table_record(const LinkTableRecord &record);
Status decode_link_table_record(const std::string &bytes, LinkTableRecord *out);
std::string encode_network_choice_record(const NetworkChoiceRecord &record);
Status decode_network_choice_record(const std::string &bytes, NetworkChoiceRecord *out);

} // namespace nnpccl
