// ccl-sim's what-if changes to a loaded machine (--link-gbps,
// --link-latency, --fail-link, --fail-chip): the same chips, links and
// placement, rebuilt with the changes, and the topology placed again, so
// that the planner, the algorithms' rings and trees and the simulator all
// see the changed machine.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "status.hpp"
#include "topology.hpp"

namespace nnpccl::sim {

struct WhatIf {
    double link_gbps = 0;                          // every link's bandwidth per direction; 0: as loaded
    double link_latency_us = -1;                   // every link's latency; < 0: as loaded
    std::vector<std::pair<int, int>> failed_links; // cables down, both directions
    std::vector<int> failed_chips;                 // chips gone with all their cables

    bool any() const { return link_gbps > 0 || link_latency_us >= 0 || !failed_links.empty() || !failed_chips.empty(); }
};

// "A-B": two chip numbers; false for anything else.
bool parse_chip_pair(const std::string &text, std::pair<int, int> *out);

// Rebuilds *topology with the changes. A failed chip's rank goes: the job
// runs on the other chips of its placement, one rank fewer. Routes on a
// torus with a cable or chip gone are no longer in closed form: they come
// from a search per source chip (Machine::route), around what failed.
// Fails, saying what a user must change, for a chip or cable that does not
// exist, a machine the failures cut in two, or nothing left to run on.
// *summary: one line saying what changed.
Status apply_what_if(const WhatIf &what_if, Topology *topology, std::string *summary);

} // namespace nnpccl::sim
