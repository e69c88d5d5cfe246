// Pictures of a topology: SVG (chips as nodes, ICL links as edges, each
// ring in its own colour, or ccl-sim's link utilisation) and Graphviz DOT,
// for ccl-topo --svg/--dot and ccl-sim --svg.
#pragma once

#include <string>
#include <vector>

#include "topology.hpp"

namespace nnpccl_tools {

// What to draw on the links instead of the rings (ccl-sim: how busy each
// link was). Per directed link of Machine::links(), in its order: a colour
// ("" leaves the link grey) and a tooltip; the two directions of a cable are
// drawn side by side. The legend's lines replace the rings' (a line with a
// colour gets a swatch of it).
struct LinkOverlay {
    std::vector<std::string> colour;
    std::vector<std::string> tooltip;
    struct Line {
        std::string colour;
        std::string text;
    };
    std::vector<Line> legend;
};

// A standalone SVG document. A torus is laid out on its grid (wrap-around
// links as dashed stubs at the edges; a 3D torus as its z-planes side by
// side, z links as arcs between neighbouring planes and z's wrap-around as
// stubs out of the end planes), the hybrid cube mesh as two squares
// (the far twins joined by arcs), anything else on a circle. Without an
// overlay the rings are drawn on the links.
std::string render_svg(const nnpccl::Topology &topology, const LinkOverlay *overlay = nullptr);

// A Graphviz graph with fixed positions (neato -n) in the same layout.
std::string render_dot(const nnpccl::Topology &topology);

} // namespace nnpccl_tools
