#include "topology_drawing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace nnpccl_tools {

using nnpccl::Link;
using nnpccl::Machine;
using nnpccl::Shape;
using nnpccl::Topology;

namespace {

const char *const kRingColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
const char *ring_colour(size_t ring) { return kRingColours[ring % (sizeof kRingColours / sizeof *kRingColours)]; }

struct Point {
    double x = 0;
    double y = 0;
};

// Where each chip goes and how a link between two chips is drawn.
class Layout {
public:
    explicit Layout(const Machine &m) : m_(m) {
        const int n = m.num_chips();
        if (m.shape() == Shape::Torus) {
            // A 3D torus as its z-planes side by side, each an x-by-y grid
            // under its "z = k" label; the links between planes are arcs.
            grid_ = true;
            const int cols = m.torus().x, rows = m.torus().y;
            planes_ = std::max(1, m.torus().z);
            spacing_ = std::max(cols * planes_, rows) > 16 ? 44.0 : 90.0;
            radius_ = spacing_ > 60 ? 18.0 : 12.0;
            plane_width_ = spacing_ * (cols - 1) + (planes_ > 1 ? 1.6 * spacing_ : 0);
            const double top = margin_ + (planes_ > 1 ? 0.9 * spacing_ : 0);
            for (int c = 0; c < n; ++c) {
                const int i = c % cols, j = c / cols % rows, k = c / (cols * rows);
                pos_.push_back({margin_ + plane_width_ * k + spacing_ * i, top + spacing_ * j});
                plane_of_.push_back(k);
            }
            for (int k = 0; k < planes_ && planes_ > 1; ++k)
                plane_labels_.push_back(
                    {margin_ + plane_width_ * k + spacing_ * (cols - 1) / 2, top - 0.75 * spacing_});
            width_ = 2 * margin_ + plane_width_ * (planes_ - 1) + spacing_ * (cols - 1);
            height_ = top + margin_ + spacing_ * (rows - 1);
        } else if (m.shape() == Shape::HybridCubeMesh && n == 8) {
            // Left square 0 1 / 3 2, right square 5 4 / 6 7: twins 1-5 and
            // 2-6 face each other; 0-4 arc over the top, 3-7 under the bottom.
            hcm_ = true;
            radius_ = 20;
            const double side = 170, gap = 130, top = margin_ + 30;
            const double left = margin_, right = margin_ + side + gap;
            const Point corners[8] = {{left, top},         {left + side, top},        {left + side, top + side},
                                      {left, top + side},  {right + side, top},       {right, top},
                                      {right, top + side}, {right + side, top + side}};
            pos_.assign(corners, corners + 8);
            width_ = right + side + margin_;
            height_ = top + side + 30 + margin_;
        } else {
            radius_ = n > 48 ? 10.0 : 18.0;
            const double ring_radius = std::max(120.0, n * (2 * radius_ + 14) / (2 * M_PI));
            for (int c = 0; c < n; ++c) {
                double angle = -M_PI / 2 + 2 * M_PI * c / std::max(1, n);
                pos_.push_back({margin_ + ring_radius + ring_radius * std::cos(angle),
                                margin_ + ring_radius + ring_radius * std::sin(angle)});
            }
            width_ = height_ = 2 * (margin_ + ring_radius);
        }
    }

    const Point &at(int chip) const { return pos_[static_cast<size_t>(chip)]; }
    double radius() const { return radius_; }
    double width() const { return width_; }
    double height() const { return height_; }

    // SVG path data for the link a-b, shifted `offset` pixels to its left
    // (so that several rings over one link stay apart).
    std::string path(int a, int b, double offset) const {
        Point p = at(a), q = at(b);
        std::ostringstream d;
        if (grid_ && plane(a) != plane(b)) {
            const Point n = normal(unit(p, q), offset);
            if (std::abs(plane(a) - plane(b)) == 1) {
                // Between neighbouring planes: an arc above the row, high
                // enough to clear the chips it passes (its peak half-way
                // to the row above).
                const double lift = spacing_ * 0.85;
                d << move(p.x + n.x, p.y + n.y) << "Q" << fmt((p.x + q.x) / 2 + n.x) << " " << fmt(p.y - lift + n.y)
                  << " " << fmt(q.x + n.x) << " " << fmt(q.y + n.y);
            } else {
                // z's wrap-around: a stub up and out of each end plane.
                const double stub = spacing_ * 0.4, out = p.x < q.x ? -1 : 1;
                d << move(p.x, p.y + offset) << line(p.x + out * stub * 0.6, p.y - stub + offset)
                  << move(q.x, q.y + offset) << line(q.x - out * stub * 0.6, q.y - stub + offset);
            }
        } else if (grid_ && is_wrap(a, b)) {
            // Wrap-around: a stub out of each chip, away from the grid.
            Point dir = unit(p, q);
            double stub = spacing_ * 0.45;
            Point n = normal(dir, offset);
            d << move(p.x + n.x, p.y + n.y) << line(p.x - dir.x * stub + n.x, p.y - dir.y * stub + n.y)
              << move(q.x + n.x, q.y + n.y) << line(q.x + dir.x * stub + n.x, q.y + dir.y * stub + n.y);
        } else if (hcm_ && ((a == 0 && b == 4) || (a == 4 && b == 0) || (a == 3 && b == 7) || (a == 7 && b == 3))) {
            double lift = (a == 0 || b == 0) ? -85.0 : 85.0;
            Point n = normal(unit(p, q), offset);
            d << move(p.x + n.x, p.y + n.y) << "Q" << fmt((p.x + q.x) / 2 + n.x) << " " << fmt(p.y + lift + n.y) << " "
              << fmt(q.x + n.x) << " " << fmt(q.y + n.y);
        } else {
            Point n = normal(unit(p, q), offset);
            d << move(p.x + n.x, p.y + n.y) << line(q.x + n.x, q.y + n.y);
        }
        return d.str();
    }

    bool dashed(int a, int b) const {
        return grid_ && (plane(a) != plane(b) ? std::abs(plane(a) - plane(b)) > 1 : is_wrap(a, b));
    }
    // A 3D torus: how many z-planes, and where each one's label goes.
    int planes() const { return planes_; }
    const std::vector<Point> &plane_labels() const { return plane_labels_; }

    static std::string fmt(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }

private:
    int plane(int chip) const { return plane_of_.empty() ? 0 : plane_of_[static_cast<size_t>(chip)]; }
    // Torus neighbours more than one grid step apart are wrap-around links.
    bool is_wrap(int a, int b) const {
        Point p = at(a), q = at(b);
        return std::abs(p.x - q.x) > spacing_ * 1.5 || std::abs(p.y - q.y) > spacing_ * 1.5;
    }
    static Point unit(Point p, Point q) {
        double dx = q.x - p.x, dy = q.y - p.y, len = std::max(1e-9, std::hypot(dx, dy));
        return {dx / len, dy / len};
    }
    static Point normal(Point dir, double offset) { return {-dir.y * offset, dir.x * offset}; }
    static std::string move(double x, double y) { return "M" + fmt(x) + " " + fmt(y) + " "; }
    static std::string line(double x, double y) { return "L" + fmt(x) + " " + fmt(y) + " "; }

    const Machine &m_;
    std::vector<Point> pos_;
    bool grid_ = false;
    bool hcm_ = false;
    int planes_ = 1;
    double plane_width_ = 0;
    std::vector<int> plane_of_;
    std::vector<Point> plane_labels_;
    double spacing_ = 90;
    double radius_ = 18;
    double margin_ = 60;
    double width_ = 0;
    double height_ = 0;
};

std::string escape(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '&')
            out += "&amp;";
        else if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else if (c == '"')
            out += "&quot;";
        else
            out += c;
    }
    return out;
}

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// "0 1 2 3" for short rings, "0 1 ... 1023 (1024 ranks)" for long ones.
std::string ring_text(const std::vector<int> &ranks, size_t shown) {
    std::string out;
    for (size_t i = 0; i < ranks.size() && i < shown; ++i) out += (i ? " " : "") + std::to_string(ranks[i]);
    if (ranks.size() > shown) out += " ... (" + std::to_string(ranks.size()) + " ranks)";
    return out;
}

using ChipPair = std::pair<int, int>;
ChipPair pair_of(int a, int b) { return {std::min(a, b), std::max(a, b)}; }

// A ring crossing a cable; `routed` when it does so on a hop of more than
// one link (the ring's neighbours are not cabled to each other).
struct RingUse {
    size_t ring;
    bool routed;
};

// Which rings cross each cable, in ring order.
std::map<ChipPair, std::vector<RingUse>> rings_on_cables(const Topology &t) {
    std::map<ChipPair, std::vector<RingUse>> on;
    for (size_t r = 0; r < t.ring_embeddings().size(); ++r) {
        const auto &ring = t.ring_embeddings()[r];
        for (const nnpccl::Route &hop : ring.forward)
            for (int l : hop.links) {
                const Link &link = t.machine().links()[static_cast<size_t>(l)];
                auto &list = on[pair_of(link.from, link.to)];
                auto it = std::find_if(list.begin(), list.end(), [&](const RingUse &u) { return u.ring == r; });
                if (it == list.end())
                    list.push_back({r, hop.hops > 1});
                else
                    it->routed = it->routed && hop.hops > 1;
            }
    }
    return on;
}

} // namespace

namespace {

void draw_header(std::ostream &svg, const Topology &t, double width, double height) {
    svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Layout::fmt(width) << "\" height=\""
        << Layout::fmt(height) << "\" viewBox=\"0 0 " << Layout::fmt(width) << " " << Layout::fmt(height)
        << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
        << "<title>" << escape(t.name()) << "</title>\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

// ICL links, grey, under everything.
void draw_links(std::ostream &svg, const Machine &m, const Layout &layout) {
    svg << "<g fill=\"none\" stroke=\"#b0b0b0\" stroke-width=\"1.5\">\n";
    for (const Link &l : m.links()) {
        if (m.has_link(l.to, l.from) && l.from > l.to) continue; // a cable once
        svg << "  <path d=\"" << layout.path(l.from, l.to, 0) << "\""
            << (layout.dashed(l.from, l.to) ? " stroke-dasharray=\"5 3\"" : "") << "/>\n";
    }
    svg << "</g>\n";
}

// Each direction of a link in its colour, the two of a cable side by side
// (a path's offset is to the left of its direction).
void draw_overlay(std::ostream &svg, const Machine &m, const Layout &layout, const LinkOverlay &overlay) {
    svg << "<g fill=\"none\" stroke-width=\"3\" stroke-linecap=\"round\">\n";
    for (size_t i = 0; i < m.links().size(); ++i) {
        const Link &l = m.links()[i];
        const std::string colour = i < overlay.colour.size() ? overlay.colour[i] : "";
        const std::string tip = i < overlay.tooltip.size() ? overlay.tooltip[i] : "";
        if (colour.empty() && tip.empty()) continue;
        svg << "  <path d=\"" << layout.path(l.from, l.to, 2.2) << "\" stroke=\""
            << (colour.empty() ? "#b0b0b0" : colour) << "\"" << (colour.empty() ? " stroke-width=\"1\"" : "")
            << (layout.dashed(l.from, l.to) ? " stroke-dasharray=\"6 3\"" : "") << ">";
        if (!tip.empty()) svg << "<title>" << escape(tip) << "</title>";
        svg << "</path>\n";
    }
    svg << "</g>\n";
}

// Rings: each cable a ring crosses, in the ring's colour; several rings on
// one cable sit side by side. Routed hops (not one link) are dotted.
void draw_rings(std::ostream &svg, const std::map<ChipPair, std::vector<RingUse>> &on, const Layout &layout) {
    svg << "<g fill=\"none\" stroke-width=\"3.5\" stroke-linecap=\"round\">\n";
    for (const auto &cable : on) {
        const auto &list = cable.second;
        for (size_t k = 0; k < list.size(); ++k) {
            size_t r = list[k].ring;
            double offset = (static_cast<double>(k) - (static_cast<double>(list.size()) - 1) / 2) * 4.5;
            bool routed = list[k].routed;
            svg << "  <path d=\"" << layout.path(cable.first.first, cable.first.second, offset) << "\" stroke=\""
                << ring_colour(r) << "\""
                << (routed                                                 ? " stroke-dasharray=\"2 4\""
                    : layout.dashed(cable.first.first, cable.first.second) ? " stroke-dasharray=\"6 3\""
                                                                           : "")
                << "/>\n";
        }
    }
    svg << "</g>\n";
}

// Chips: filled when a rank runs there; rank under the chip number when it
// differs.
void draw_chips(std::ostream &svg, const Topology &t, const Layout &layout) {
    const Machine &m = t.machine();
    std::vector<int> rank_of_chip(static_cast<size_t>(m.num_chips()), -1);
    for (int r = 0; r < t.nranks(); ++r) rank_of_chip[static_cast<size_t>(t.chip_of(r))] = r;
    const double rad = layout.radius();
    const double font = rad >= 18 ? 13 : 8;
    svg << "<g font-size=\"" << number(font) << "\" text-anchor=\"middle\">\n";
    for (size_t k = 0; k < layout.plane_labels().size(); ++k)
        svg << "  <text x=\"" << Layout::fmt(layout.plane_labels()[k].x) << "\" y=\""
            << Layout::fmt(layout.plane_labels()[k].y)
            << "\" font-size=\"14\" font-weight=\"bold\" fill=\"#404040\">z = " << k << "</text>\n";
    for (int c = 0; c < m.num_chips(); ++c) {
        const Point &p = layout.at(c);
        int rank = rank_of_chip[static_cast<size_t>(c)];
        svg << "  <circle cx=\"" << Layout::fmt(p.x) << "\" cy=\"" << Layout::fmt(p.y) << "\" r=\"" << number(rad)
            << "\" fill=\"" << (rank >= 0 ? "#dbe9f6" : "#f2f2f2") << "\" stroke=\""
            << (rank >= 0 ? "#2b4c6f" : "#a0a0a0") << "\" stroke-width=\"1.5\"/>\n";
        bool show_rank = rank >= 0 && rank != c;
        svg << "  <text x=\"" << Layout::fmt(p.x) << "\" y=\"" << Layout::fmt(p.y + (show_rank ? -1 : font * 0.35))
            << "\" fill=\"#1a1a1a\">" << c << "</text>\n";
        if (show_rank)
            svg << "  <text x=\"" << Layout::fmt(p.x) << "\" y=\"" << Layout::fmt(p.y + font * 0.85)
                << "\" font-size=\"" << number(font * 0.75) << "\" fill=\"#2b4c6f\">r" << rank << "</text>\n";
    }
    svg << "</g>\n";
}

// A legend line with a swatch of `colour` before its text.
void draw_swatch(std::ostream &svg, double y, const std::string &colour, bool dotted) {
    svg << "  <line x1=\"20\" y1=\"" << Layout::fmt(y - 4) << "\" x2=\"50\" y2=\"" << Layout::fmt(y - 4)
        << "\" stroke=\"" << colour << "\" stroke-width=\"3.5\"" << (dotted ? " stroke-dasharray=\"2 4\"" : "")
        << "/>\n";
}

// The rings' legend: how many there are, what the greys mean, then each ring
// (the first 12) in its colour.
void draw_ring_legend(std::ostream &svg, const Topology &t, double y, double line_height) {
    const Machine &m = t.machine();
    y += line_height;
    const int ham = t.hamiltonian_ring_count();
    svg << "  <text x=\"20\" y=\"" << Layout::fmt(y) << "\">"
        << (ham > 1    ? std::to_string(ham) + " edge-disjoint Hamiltonian rings"
            : ham == 1 ? std::string("1 Hamiltonian ring")
                       : std::string("no Hamiltonian ring over links: dotted hops are routed"))
        << (m.shape() == Shape::Torus ? "; dashed stubs: wrap-around links" : "")
        << (m.shape() == Shape::Torus && m.torus().z > 1 ? "; z-planes side by side, arcs: z links" : "")
        << "</text>\n";
    y += line_height;
    svg << "  <text x=\"20\" y=\"" << Layout::fmt(y)
        << "\">grey: links no ring uses; pale chips: no rank; rN under a chip: the rank on it</text>\n";
    for (size_t r = 0; r < t.ring_embeddings().size() && r < 12; ++r) {
        y += line_height;
        const auto &ring = t.ring_embeddings()[r];
        draw_swatch(svg, y, ring_colour(r), !ring.on_links);
        svg << "  <text x=\"58\" y=\"" << Layout::fmt(y) << "\">ring " << r << ": " << ring_text(ring.ranks, 24)
            << " — " << number(ring.bottleneck_gbps) << " GB/s, " << number(ring.hop_latency_us) << " µs/hop"
            << (ring.on_links ? "" : " (routed)") << "</text>\n";
    }
}

// The legend: the machine in one line, then the overlay's lines or the rings'.
void draw_legend(std::ostream &svg, const Topology &t, const LinkOverlay *overlay, double top, double line_height) {
    const Machine &m = t.machine();
    std::string shape = nnpccl::shape_name(m.shape());
    if (m.shape() == Shape::Torus) {
        shape += " " + std::to_string(m.torus().x) + "x" + std::to_string(m.torus().y);
        if (m.torus().z > 1) shape += "x" + std::to_string(m.torus().z);
    }
    double y = top + line_height;
    svg << "<g font-size=\"13\" fill=\"#1a1a1a\">\n";
    svg << "  <text x=\"20\" y=\"" << Layout::fmt(y) << "\" font-weight=\"bold\">" << escape(t.name()) << " ("
        << escape(shape) << "): " << m.num_chips() << " chips, " << m.bidirectional_link_count()
        << " bidirectional links, " << t.nranks() << " ranks</text>\n";
    if (overlay == nullptr) {
        draw_ring_legend(svg, t, y, line_height);
    } else {
        for (const LinkOverlay::Line &line : overlay->legend) {
            y += line_height;
            if (!line.colour.empty()) draw_swatch(svg, y, line.colour, false);
            svg << "  <text x=\"" << (line.colour.empty() ? "20" : "58") << "\" y=\"" << Layout::fmt(y) << "\">"
                << escape(line.text) << "</text>\n";
        }
    }
    svg << "</g>\n</svg>\n";
}

} // namespace

std::string render_svg(const Topology &t, const LinkOverlay *overlay) {
    const Machine &m = t.machine();
    Layout layout(m);
    const double line_height = 20;
    const size_t rings = t.ring_embeddings().size();
    const double legend_top = layout.height() + 10;
    const double legend_lines = overlay != nullptr ? 2 + static_cast<double>(overlay->legend.size())
                                                   : 4 + static_cast<double>(std::min<size_t>(rings, 12));
    const double height = legend_top + line_height * legend_lines + 20;
    const double width = std::max(layout.width(), 760.0);
    std::ostringstream svg;
    draw_header(svg, t, width, height);
    draw_links(svg, m, layout);
    if (overlay != nullptr) draw_overlay(svg, m, layout, *overlay);
    draw_rings(svg, overlay == nullptr ? rings_on_cables(t) : std::map<ChipPair, std::vector<RingUse>>{}, layout);
    draw_chips(svg, t, layout);
    draw_legend(svg, t, overlay, legend_top, line_height);
    return svg.str();
}

std::string render_dot(const Topology &t) {
    const Machine &m = t.machine();
    Layout layout(m);
    const auto on = rings_on_cables(t);
    std::vector<int> rank_of_chip(static_cast<size_t>(m.num_chips()), -1);
    for (int r = 0; r < t.nranks(); ++r) rank_of_chip[static_cast<size_t>(t.chip_of(r))] = r;
    std::ostringstream dot;
    dot << "// " << t.name() << ": draw with  neato -n -Tsvg\n";
    dot << "graph \"" << t.name() << "\" {\n  node [shape=circle, fontsize=11];\n";
    for (int c = 0; c < m.num_chips(); ++c) {
        const Point &p = layout.at(c);
        int rank = rank_of_chip[static_cast<size_t>(c)];
        dot << "  c" << c << " [label=\"" << c << (rank >= 0 && rank != c ? "\\nr" + std::to_string(rank) : "")
            << "\", pos=\"" << Layout::fmt(p.x) << "," << Layout::fmt(layout.height() - p.y) << "!\""
            << (rank < 0 ? ", color=gray" : "") << "];\n";
    }
    for (const Link &l : m.links()) {
        bool duplex = m.has_link(l.to, l.from);
        if (duplex && l.from > l.to) continue;
        auto it = on.find(pair_of(l.from, l.to));
        dot << "  c" << l.from << " -- c" << l.to << " [tooltip=\"" << number(l.gbps) << " GB/s, "
            << number(l.latency_us) << " us\"";
        if (!duplex) dot << ", dir=forward";
        if (it != on.end()) {
            std::string colours;
            for (const RingUse &u : it->second)
                colours += (colours.empty() ? "" : ":") + std::string(ring_colour(u.ring));
            dot << ", color=\"" << colours << "\", penwidth=2";
        } else {
            dot << ", color=gray";
        }
        if (layout.dashed(l.from, l.to)) dot << ", style=dashed";
        dot << "];\n";
    }
    dot << "}\n";
    return dot.str();
}

} // namespace nnpccl_tools
