// Topology files: a JSON description of any machine, and the writer that
// dumps a Machine in the same format (ccl-topo --json), so a preset can be
// saved, edited and loaded back.
//
//   {
//     "nnpccl_topology": 1,                  optional; the format version
//     "name": "my-box",                      optional
//     "shape": "torus", "torus": [8, 4],     optional; a torus is checked against the links
//     "ports_per_chip": 4,                   optional; default 4 (NNP-T ICL ports)
//     "link_defaults": {"gbps": 56, "latency_us": 1},   optional
//     "chips": 8,                            a count, or one object per chip:
//     "chips": [{"id": 0, "host": "node0", "ports": 4, "injection_gbps": 224}, ...],
//                                            "network": true marks a NIC or switch: no rank runs there
//                                            (a job on several hosts: shape "flat", chips with hosts)
//     "links": [{"from": 0, "to": 1, "gbps": 56, "latency_us": 1, "duplex": true}, ...],
//     "placement": [0, 1, 5, 4]             optional; rank i runs on chip placement[i]
//   }
//
// A link is bidirectional unless "duplex" is false; gbps is per direction.
// Chips in the array are listed in id order ("id", when given, must match).
// Unknown members are errors, so that a misspelt field is not silently ignored.
#pragma once

#include <string>
#include <vector>

#include "status.hpp"

#include "machine.hpp"

namespace nnpccl {

struct TopologyFile {
    Machine machine;
    std::vector<int> placement; // empty: ranks take chips in order
};

// Reads `text`; `source` names it in errors. An error is one line:
// "<source>:<line>:<column>: <field>: <what is wrong>".
Status parse_topology_text(const std::string &text, const std::string &source, TopologyFile *out);
// The same for a file on disk.
Status read_topology_file(const std::string &path, TopologyFile *out);
// `machine` (and the placement, when not empty) in the format above; parsing
// it back gives the same machine.
std::string topology_to_json(const Machine &machine, const std::vector<int> &placement);

} // namespace nnpccl
