// Pictures of a topology for ccl-topo: SVG (chips as nodes, ICL links as
// edges, each ring in its own colour) and Graphviz DOT.
#pragma once

#include <string>

#include "topology.hpp"

namespace ccl_topo {

// A standalone SVG document. A torus is laid out on its grid (wrap-around
// links as dashed stubs at the edges), the hybrid cube mesh as two squares
// (the far twins joined by arcs), anything else on a circle.
std::string render_svg(const nnpccl::Topology &topology);

// A Graphviz graph with fixed positions (neato -n) in the same layout.
std::string render_dot(const nnpccl::Topology &topology);

} // namespace ccl_topo
