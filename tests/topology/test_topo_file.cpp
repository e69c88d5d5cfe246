// Topology files: what a good file gives, how a malformed one is refused
// (field and position named, never a crash), and the JSON round trip.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "json_reader.hpp"
#include "succeeded.hpp"
#include "topo_file.hpp"
#include "topology.hpp"

using namespace nnpccl;

namespace {

const char kGood[] = R"({
  "nnpccl_topology": 1,
  "name": "two-boxes",
  "link_defaults": {"gbps": 50, "latency_us": 0.5},
  "chips": [{"id": 0, "host": "a"}, {"id": 1, "host": "a"}, {"id": 2, "host": "b"}, {"id": 3, "host": "b"}],
  "links": [
    {"from": 0, "to": 1},
    {"from": 1, "to": 2, "gbps": 12.5, "latency_us": 3},
    {"from": 2, "to": 3},
    {"from": 3, "to": 0, "duplex": false}
  ],
  "placement": [1, 2, 3, 0]
})";

// Parses `text`, expects failure, and returns the one-line error.
std::string rejection(const std::string &text) {
    TopologyFile file;
    std::string error;
    INFO(text);
    CHECK_FALSE(succeeded(parse_topology_text(text, "t.json", &file), &error));
    CHECK(error.find('\n') == std::string::npos);
    CHECK(error.rfind("t.json:", 0) == 0);
    return error;
}

bool same_machine(const Machine &a, const Machine &b) {
    if (a.name() != b.name() || a.shape() != b.shape() || a.num_chips() != b.num_chips() ||
        a.links().size() != b.links().size())
        return false;
    if (a.shape() == Shape::Torus &&
        (a.torus().x != b.torus().x || a.torus().y != b.torus().y || a.torus().z != b.torus().z))
        return false;
    for (int c = 0; c < a.num_chips(); ++c)
        if (a.chip(c).host != b.chip(c).host || a.chip(c).ports != b.chip(c).ports ||
            a.chip(c).injection_gbps != b.chip(c).injection_gbps || a.chip(c).network != b.chip(c).network)
            return false;
    for (const Link &l : a.links()) {
        int i = b.link_index(l.from, l.to);
        if (i < 0 || b.links()[static_cast<size_t>(i)].gbps != l.gbps ||
            b.links()[static_cast<size_t>(i)].latency_us != l.latency_us)
            return false;
    }
    return true;
}

} // namespace

TEST_CASE("a good topology file", "[file]") {
    TopologyFile file;
    std::string error;
    REQUIRE(succeeded(parse_topology_text(kGood, "t.json", &file), &error));
    const Machine &m = file.machine;
    CHECK(m.name() == "two-boxes");
    CHECK(m.num_chips() == 4);
    CHECK(m.bidirectional_link_count() == 3);
    CHECK(m.one_way_link_count() == 1);
    CHECK(m.chip(2).host == "b");
    CHECK(m.links()[static_cast<size_t>(m.link_index(0, 1))].gbps == 50);
    CHECK(m.links()[static_cast<size_t>(m.link_index(2, 1))].latency_us == 3);
    CHECK(file.placement == std::vector<int>{1, 2, 3, 0});

    Topology t;
    REQUIRE(succeeded(Topology::create(file.machine, file.placement, 0, &t), &error));
    CHECK(t.chip_of(0) == 1);
    CHECK(t.nranks() == 4);
    // Chips 3 and 0 are cabled one way only: no Hamiltonian ring of duplex links.
    CHECK(t.hamiltonian_ring_count() == 0);
    REQUIRE(t.rings().size() == 1);
    CHECK(t.rings()[0].size() == 4);
}

TEST_CASE("malformed files name the field and the position", "[file]") {
    // Syntax: position and the member being read.
    std::string e = rejection("{\n  \"chips\": 4,\n  \"links\": [{\"from\": 0, \"to\": 1,, }]\n}");
    CHECK(e.find("t.json:3:33: in links[0]: expected a member name") == 0);
    CHECK(e.find("links[0]") != std::string::npos);
    CHECK(rejection("").find("t.json:1:1:") == 0);
    CHECK(rejection("{\"chips\": 4, \"links\": [").find("end of the file") != std::string::npos);
    CHECK(rejection("{\"chips\": 4} x").find("after the end") != std::string::npos);
    CHECK(rejection(std::string(5000, '[')).find("nesting") != std::string::npos);
    CHECK(rejection("{\"name\": \"a\tb\", \"chips\": 1}").find("control character") != std::string::npos);
    CHECK(rejection("{\"name\": \"a\\qb\", \"chips\": 1}").find("escape") != std::string::npos);
    CHECK(rejection("{\"chips\": 01}").find("leading zeros") != std::string::npos);
    CHECK(rejection("{\"chips\": 4, \"chips\": 5}").find("given twice") != std::string::npos);
    CHECK(rejection("{\"chips\": 1e999}").find("out of range") != std::string::npos);

    // Meaning: the field, its position, what was expected.
    CHECK(rejection("[1, 2]").find("expected a topology object") != std::string::npos);
    CHECK(rejection("{}").find("chips: missing") != std::string::npos);
    e = rejection("{\"chips\": 4,\n \"links\": [{\"from\": 0, \"to\": 9}]}");
    CHECK(e.find("t.json:2:30: links[0].to: expected an integer from 0 to 3, found 9") == 0);
    e = rejection("{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1, \"gbps\": -5}]}");
    CHECK(e.find("links[0].gbps: expected a positive number, found -5") != std::string::npos);
    e = rejection("{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1, \"lantecy_us\": 1}]}");
    CHECK(e.find("links[0].lantecy_us: unknown member") != std::string::npos);
    e = rejection("{\"chips\": 4, \"links\": [{\"to\": 1}]}");
    CHECK(e.find("links[0]: missing \"from\"") != std::string::npos);
    e = rejection("{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1}, {\"from\": 1, \"to\": 0}]}");
    CHECK(e.find("links[1]: link 1->0 is given twice") != std::string::npos);
    e = rejection("{\"chips\": 4, \"links\": [{\"from\": 2, \"to\": 2}]}");
    CHECK(e.find("itself") != std::string::npos);
    e = rejection(
        "{\"chips\": 6, \"links\": [{\"from\": 0, \"to\": 1}, {\"from\": 0, \"to\": 2}, {\"from\": 0, \"to\": 3},"
        " {\"from\": 0, \"to\": 4}, {\"from\": 0, \"to\": 5}]}");
    CHECK(e.find("links[4]: chip 0 would be cabled to 5 chips but has 4 ports") != std::string::npos);
    e = rejection("{\"chips\": [{\"id\": 1}]}");
    CHECK(e.find("chips[0].id: chips are listed in id order: expected 0, found 1") != std::string::npos);
    e = rejection("{\"chips\": 2, \"links\": [{\"from\": 0, \"to\": 1}], \"placement\": [0, 0]}");
    CHECK(e.find("placement[1]: chip 0 already runs rank 0") != std::string::npos);
    e = rejection("{\"chips\": 4, \"shape\": \"torus\", \"torus\": [2, 2], \"links\": [{\"from\": 0, \"to\": 1}]}");
    CHECK(e.find("torus: chips 0 and 2 are torus neighbours but not cabled both ways") != std::string::npos);
    e = rejection("{\"chips\": 4, \"shape\": \"torus\"}");
    CHECK(e.find("needs \"torus\"") != std::string::npos);
    e = rejection("{\"chips\": 4, \"shape\": \"donut\"}");
    CHECK(e.find("shape: unknown shape \"donut\"") != std::string::npos);
    e = rejection("{\"chips\": 4, \"ports_per_chip\": 2.5}");
    CHECK(e.find("ports_per_chip: expected an integer, found 2.5") != std::string::npos);
    e = rejection("{\"chips\": 4, \"links\": [{\"from\": 0, \"to\": 1, \"duplex\": \"yes\"}]}");
    CHECK(e.find("links[0].duplex: expected true or false") != std::string::npos);
    e = rejection("{\"chips\": 99999999}");
    CHECK(e.find("chips: expected an integer from 1 to") != std::string::npos);
}

TEST_CASE("no prefix or corruption of a good file crashes the reader", "[file]") {
    const std::string good = kGood;
    TopologyFile file;
    std::string error;
    for (size_t n = 0; n < good.size(); ++n) succeeded(parse_topology_text(good.substr(0, n), "t.json", &file), &error);
    for (size_t i = 0; i < good.size(); ++i)
        for (char c : {'\0', '"', '}', ']', '9', '-', '\\', 'x', '\n', '\xff'}) {
            std::string bad = good;
            bad[i] = c;
            error.clear();
            if (!succeeded(parse_topology_text(bad, "t.json", &file), &error)) {
                CHECK(error.find('\n') == std::string::npos);
                CHECK(!error.empty());
            }
        }
}

TEST_CASE("every preset survives the JSON round trip", "[file]") {
    for (const char *spec : {"ring:5", "fc:8", "hcm8", "nnpt-hcm8", "nnpt-pod32", "nnpt-pod1024", "torus:3x5",
                             "torus:4x3x2", "hosts:2x3", "hosts:3,1"}) {
        INFO(spec);
        Topology t;
        std::string error;
        REQUIRE(succeeded(load_topology(spec, 0, &t), &error));
        const std::string json = topology_to_json(t.machine(), {});
        TopologyFile back;
        REQUIRE(succeeded(parse_topology_text(json, "dump.json", &back), &error));
        CHECK(same_machine(t.machine(), back.machine));
        CHECK(topology_to_json(back.machine, {}) == json);
        Topology again;
        REQUIRE(succeeded(Topology::create(back.machine, back.placement, 0, &again), &error));
        CHECK(again.rings() == t.rings());
    }
    Topology flat = Topology::flat(4);
    TopologyFile flat_back;
    std::string flat_error;
    REQUIRE(succeeded(parse_topology_text(topology_to_json(flat.machine(), {}), "flat.json", &flat_back), &flat_error));
    CHECK(same_machine(flat.machine(), flat_back.machine));
    // With a placement (a job smaller than the machine) and odd figures.
    TopologyFile file;
    std::string error;
    REQUIRE(succeeded(parse_topology_text(kGood, "t.json", &file), &error));
    std::string json = topology_to_json(file.machine, file.placement);
    TopologyFile back;
    REQUIRE(succeeded(parse_topology_text(json, "dump.json", &back), &error));
    CHECK(same_machine(file.machine, back.machine));
    CHECK(back.placement == file.placement);

    Topology part;
    REQUIRE(succeeded(load_topology("nnpt-pod32", 6, &part), &error));
    json = topology_to_json(part.machine(), part.placement());
    REQUIRE(succeeded(parse_topology_text(json, "dump.json", &back), &error));
    Topology reloaded;
    REQUIRE(succeeded(Topology::create(back.machine, back.placement, 6, &reloaded), &error));
    CHECK(reloaded.placement() == part.placement());
    CHECK(reloaded.rings() == part.rings());
}

TEST_CASE("a file describes a job's hosts: ranks grouped by host, NICs and a switch holding no rank", "[file]") {
    // Two hosts of two ranks, each host's ranks linked at 20 GB/s, and one
    // 2.5 GB/s link per host to and from a switch through NIC nodes.
    const char text[] = R"({
  "name": "my-cluster", "shape": "flat", "ports_per_chip": 8,
  "chips": [{"host": "a"}, {"host": "a"}, {"host": "b"}, {"host": "b"},
            {"host": "a", "network": true}, {"host": "b", "network": true}, {"network": true}],
  "links": [
    {"from": 0, "to": 1, "gbps": 20, "latency_us": 1},
    {"from": 2, "to": 3, "gbps": 20, "latency_us": 1},
    {"from": 0, "to": 4, "gbps": 20, "latency_us": 0}, {"from": 1, "to": 4, "gbps": 20, "latency_us": 0},
    {"from": 2, "to": 5, "gbps": 20, "latency_us": 0}, {"from": 3, "to": 5, "gbps": 20, "latency_us": 0},
    {"from": 4, "to": 6, "gbps": 2.5, "latency_us": 10}, {"from": 5, "to": 6, "gbps": 2.5, "latency_us": 10}
  ]
})";
    TopologyFile file;
    std::string error;
    REQUIRE(succeeded(parse_topology_text(text, "hosts.json", &file), &error));
    Topology t;
    REQUIRE(succeeded(Topology::create(file.machine, file.placement, 0, &t), &error));
    CHECK(t.nranks() == 4);
    CHECK(t.spans_hosts());
    CHECK(t.host_groups() == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
    CHECK(t.network_gbps() == 2.5);
    CHECK(t.route(0, 2).latency_us == 20);
    // The ring crosses between the hosts once each way.
    CHECK(t.rings().front() == std::vector<int>{0, 1, 2, 3});
    CHECK(rejection(R"({"chips": [{"network": 1}], "links": []})").find("chips[0].network") != std::string::npos);
}

TEST_CASE("load_topology reads files and names them in errors", "[file]") {
    const std::string path = "topology-test-file.json";
    {
        std::ofstream out(path);
        out << kGood;
    }
    Topology t;
    std::string error;
    REQUIRE(succeeded(load_topology(path, 3, &t), &error));
    CHECK(t.nranks() == 3);
    CHECK(t.placement() == std::vector<int>{1, 2, 3});
    CHECK_FALSE(succeeded(load_topology(path, 5, &t), &error));
    CHECK(error.find("5 ranks") != std::string::npos);
    {
        std::ofstream out(path);
        out << "{\"chips\": 2, \"links\": [{\"from\": 0, \"to\": 1, \"gbps\": 0}]}";
    }
    CHECK_FALSE(succeeded(load_topology(path, 0, &t), &error));
    CHECK(error == path + ":1:53: links[0].gbps: expected a positive number, found 0");
    std::remove(path.c_str());

    TopologyFile file;
    CHECK_FALSE(succeeded(read_topology_file("/nonexistent/t.json", &file), &error));
    CHECK(error.find("/nonexistent/t.json") == 0);
}

TEST_CASE("JSON reader positions and values", "[file]") {
    JsonValue v;
    JsonError e;
    REQUIRE(parse_json("{\"a\": [1, -2.5e1, true, null, \"x\\u00e9\\ud83d\\ude00\"]}", &v, &e));
    const JsonValue *a = v.find("a");
    REQUIRE(a != nullptr);
    REQUIRE(a->items.size() == 5);
    CHECK(a->items[1].number == -25);
    CHECK(a->items[1].column == 11);
    CHECK(a->items[4].text == "x\xc3\xa9\xf0\x9f\x98\x80");
    CHECK_FALSE(parse_json("{\"a\": \"\\ud83d\"}", &v, &e));
    CHECK(e.message.find("surrogate") != std::string::npos);
}
