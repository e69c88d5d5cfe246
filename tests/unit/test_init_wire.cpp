// The records of init's agreements (common/init_wire.hpp): each comes back
// from its bytes as it was written, and bytes that no encoder writes (cut
// short, run on, another kind or version, a value out of range) are refused
// with a message that says what was wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "init_wire.hpp"

using namespace nnpccl;

namespace {

HostRecord sample_host() {
    HostRecord r;
    r.transport = "auto";
    r.process_hosts_root = true;
    r.host = "node7/0b1c2d3e-boot";
    r.shared_settings = {{"NNPCCL_TOPO", "flat"}, {"NNPCCL_NET", ""}, {"NNPCCL_CHUNK_SIZE", "1048576"}};
    return r;
}

PlanningRecord sample_root_planning() {
    PlanningRecord r;
    r.ranks_per_core = 0.5;
    r.host_over_network = true;
    r.has_root_part = true;
    r.tune = true;
    r.reduce_us_per_byte = {1e-4, 2.5e-4, 0, 3e-4};
    r.tuning_file.kind = TuningFileEntry::Kind::File;
    r.tuning_file.path = "/tmp/tuned.txt";
    r.tuning_file.text = "allreduce 0-1M ring\n";
    return r;
}

// The message of decoding `bytes` as a host record; empty when accepted.
std::string host_refusal(const std::string &bytes) {
    HostRecord r;
    return decode_host_record(bytes, &r).message();
}

// The record's bytes with its u32 string length at `at` replaced.
std::string with_u32(std::string bytes, size_t at, uint32_t value) {
    std::memcpy(&bytes[at], &value, sizeof value);
    return bytes;
}

} // namespace

TEST_CASE("a host record comes back as it was written", "[init_wire]") {
    const HostRecord sent = sample_host();
    HostRecord got;
    REQUIRE(decode_host_record(encode_host_record(sent), &got).is_ok());
    CHECK(got.transport == sent.transport);
    CHECK(got.process_hosts_root);
    CHECK(got.host == sent.host);
    CHECK(got.shared_settings == sent.shared_settings);
}

TEST_CASE("a planning record comes back as it was written, with and without rank 0's part", "[init_wire]") {
    const PlanningRecord root = sample_root_planning();
    PlanningRecord got;
    REQUIRE(decode_planning_record(encode_planning_record(root), &got).is_ok());
    CHECK(got.ranks_per_core == 0.5);
    CHECK(got.host_over_network);
    CHECK(got.has_root_part);
    CHECK(got.tune);
    CHECK(got.reduce_us_per_byte == root.reduce_us_per_byte);
    CHECK(got.tuning_file.kind == TuningFileEntry::Kind::File);
    CHECK(got.tuning_file.path == root.tuning_file.path);
    CHECK(got.tuning_file.text == root.tuning_file.text);

    PlanningRecord other;
    other.ranks_per_core = 3;
    REQUIRE(decode_planning_record(encode_planning_record(other), &got).is_ok());
    CHECK(got.ranks_per_core == 3);
    CHECK_FALSE(got.has_root_part);
    CHECK(got.tuning_file.kind == TuningFileEntry::Kind::None);

    PlanningRecord unreadable = sample_root_planning();
    unreadable.tune = false;
    unreadable.tuning_file = {TuningFileEntry::Kind::Unreadable, "", "NNPCCL_TUNING_FILE=/x: cannot open it"};
    REQUIRE(decode_planning_record(encode_planning_record(unreadable), &got).is_ok());
    CHECK(got.tuning_file.kind == TuningFileEntry::Kind::Unreadable);
    CHECK(got.tuning_file.text == unreadable.tuning_file.text);
    CHECK_FALSE(got.tune);
}

TEST_CASE("link speed, link table and network choice records come back as they were written", "[init_wire]") {
    LinkSpeedRecord speed;
    REQUIRE(decode_link_speed_record(encode_link_speed_record({12.5}), &speed).is_ok());
    CHECK(speed.reported_gbps == 12.5);
    LinkTableRecord table;
    REQUIRE(decode_link_table_record(encode_link_table_record({"4242 17"}), &table).is_ok());
    CHECK(table.region == "4242 17");
    REQUIRE(decode_link_table_record(encode_link_table_record({""}), &table).is_ok());
    CHECK(table.region.empty());
    NetworkChoiceRecord choice;
    REQUIRE(
        decode_network_choice_record(encode_network_choice_record({NetworkChoiceRecord::Network::Ofi, true}), &choice)
            .is_ok());
    CHECK(choice.network == NetworkChoiceRecord::Network::Ofi);
    CHECK(choice.asked);
    CHECK(std::string(network_name(choice.network)) == "ofi");
}

TEST_CASE("every cut of a record, and a byte too many, is refused", "[init_wire]") {
    const std::string bytes = encode_host_record(sample_host());
    for (size_t n = 0; n < bytes.size(); ++n) {
        INFO(n);
        const std::string why = host_refusal(bytes.substr(0, n));
        CHECK(why.find("host record") == 0);
        CHECK(why.find("truncated") != std::string::npos);
    }
    CHECK(host_refusal(bytes + "x") == "host record has 1 bytes after its last field");
    const std::string planning = encode_planning_record(sample_root_planning());
    PlanningRecord r;
    for (size_t n = 0; n < planning.size(); ++n) CHECK_FALSE(decode_planning_record(planning.substr(0, n), &r).is_ok());
}

TEST_CASE("a record of another kind, version or program is refused, naming which", "[init_wire]") {
    const std::string bytes = encode_host_record(sample_host());
    CHECK(host_refusal("MODE R host\nNNPCCL_TOPO=flat").find("magic number") != std::string::npos);
    CHECK(host_refusal(encode_link_speed_record({1})) == "host record is of kind 3, not a host record");
    std::string newer = bytes;
    newer[5] = 2;
    CHECK(host_refusal(newer).find("version 2, where this nnpccl reads version 1") != std::string::npos);
    LinkSpeedRecord speed;
    CHECK(decode_link_speed_record(bytes, &speed).message() ==
          "link speed record is of kind 1, not a link speed record");
}

TEST_CASE("values out of range are refused, naming the field", "[init_wire]") {
    // After the 6-byte head: transport (u32 length at 6), then a flag at 6 + 4 + 4.
    const std::string bytes = encode_host_record(sample_host());
    CHECK(host_refusal(with_u32(bytes, 6, 1u << 30)).find("transport mode") != std::string::npos);
    std::string flag = bytes;
    flag[14] = 2;
    CHECK(host_refusal(flag).find("has 2 as whether its process hosts the root") != std::string::npos);
    HostRecord bad = sample_host();
    bad.host = "";
    CHECK(host_refusal(encode_host_record(bad)) == "host record names no host");
    bad = sample_host();
    bad.shared_settings[1].value = "a\nNNPCCL_ALGO=x";
    CHECK(host_refusal(encode_host_record(bad)).find("newline in a setting's value") != std::string::npos);
    bad = sample_host();
    bad.shared_settings[0].name = "NNPCCL=TOPO";
    CHECK(host_refusal(encode_host_record(bad)).find("'=' in a setting's name") != std::string::npos);
    bad = sample_host();
    bad.host = std::string("a\0b", 3);
    CHECK(host_refusal(encode_host_record(bad)).find("NUL byte in its host") != std::string::npos);
    bad = sample_host();
    bad.shared_settings.assign(65, {"N", "v"});
    CHECK(host_refusal(encode_host_record(bad)).find("holds 65 settings") != std::string::npos);

    PlanningRecord r;
    for (double wrong : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
        PlanningRecord p;
        p.ranks_per_core = wrong;
        CHECK(decode_planning_record(encode_planning_record(p), &r).message().find("ranks per core") !=
              std::string::npos);
    }
    PlanningRecord speeds = sample_root_planning();
    speeds.reduce_us_per_byte[2] = -1e-4;
    CHECK(decode_planning_record(encode_planning_record(speeds), &r).message().find("reduction speed") !=
          std::string::npos);
    PlanningRecord file = sample_root_planning();
    file.tuning_file.path = "";
    CHECK(decode_planning_record(encode_planning_record(file), &r).message() ==
          "planning record names a tuning file with an empty path");
    std::string kind = encode_planning_record(PlanningRecord{1, false, true, false, {}, {}});
    kind.back() = 7;
    CHECK(decode_planning_record(kind, &r).message() == "planning record has an unknown tuning file kind 7");

    LinkSpeedRecord speed;
    CHECK_FALSE(decode_link_speed_record(encode_link_speed_record({-2}), &speed).is_ok());
    CHECK_FALSE(decode_link_speed_record(encode_link_speed_record({std::nan("")}), &speed).is_ok());
    LinkTableRecord table;
    CHECK(decode_link_table_record(encode_link_table_record({"../../etc 3"}), &table).message() ==
          "link table record announces its table as '../../etc 3', not 'PID FD'");
    NetworkChoiceRecord choice;
    std::string network = encode_network_choice_record({});
    network[6] = 3;
    CHECK(decode_network_choice_record(network, &choice).message() ==
          "network choice record names an unknown network transport 3");
}
