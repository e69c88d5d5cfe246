#include "topo_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "json_reader.hpp"

namespace nnpccl {

namespace {

// Largest machine a file may describe; it bounds what a hostile or mistyped
// file can make us allocate.
constexpr long kMaxFileChips = 1 << 20;

class FileReader {
public:
    FileReader(std::string source, std::string *error) : source_(std::move(source)), error_(error) {}

    bool fail(const JsonValue &at, const std::string &field, const std::string &message) {
        return fail_at(at.line, at.column, field, message);
    }
    bool fail_at(int line, int column, const std::string &field, const std::string &message) {
        *error_ = source_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                  (field.empty() ? "" : field + ": ") + message;
        return false;
    }

    bool expect(const JsonValue &v, JsonValue::Kind kind, const std::string &field, const char *what) {
        if (v.kind == kind) return true;
        return fail(v, field, std::string("expected ") + what + ", found " + describe(v));
    }

    // Members other than `allowed` are errors (a misspelt field must not be ignored).
    bool only_members(const JsonValue &object, const std::string &field, std::initializer_list<const char *> allowed) {
        for (const JsonMember &m : object.members) {
            bool known = false;
            std::string list;
            for (const char *a : allowed) {
                known = known || m.key == a;
                list += list.empty() ? a : std::string(", ") + a;
            }
            if (!known)
                return fail_at(m.line, m.column, join(field, printable(m.key)),
                               "unknown member (expected one of: " + list + ")");
        }
        return true;
    }

    bool integer(const JsonValue &v, const std::string &field, long lo, long hi, long *out) {
        if (v.kind != JsonValue::Kind::Number || std::floor(v.number) != v.number)
            return fail(v, field, "expected an integer, found " + describe(v));
        if (v.number < static_cast<double>(lo) || v.number > static_cast<double>(hi))
            return fail(v, field, "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
                                      ", found " + v.text);
        *out = static_cast<long>(v.number);
        return true;
    }

    // A string that will be printed on one line (a name, a host).
    bool one_line_string(const JsonValue &v, const std::string &field) {
        if (!expect(v, JsonValue::Kind::String, field, "a string")) return false;
        for (char c : v.text)
            if (static_cast<unsigned char>(c) < 0x20) return fail(v, field, "control characters are not allowed here");
        return true;
    }

    bool positive(const JsonValue &v, const std::string &field, double *out) {
        if (v.kind != JsonValue::Kind::Number || !(v.number > 0))
            return fail(v, field, "expected a positive number, found " + describe(v));
        *out = v.number;
        return true;
    }

    bool non_negative(const JsonValue &v, const std::string &field, double *out) {
        if (v.kind != JsonValue::Kind::Number || v.number < 0)
            return fail(v, field, "expected a number >= 0, found " + describe(v));
        *out = v.number;
        return true;
    }

    static std::string join(const std::string &field, const std::string &member) {
        return field.empty() ? member : field + "." + member;
    }
    static std::string index(const std::string &field, size_t i) { return field + "[" + std::to_string(i) + "]"; }

    static std::string describe(const JsonValue &v) {
        switch (v.kind) {
        case JsonValue::Kind::Number: return v.text;
        case JsonValue::Kind::String: return "\"" + printable(v.text) + "\"";
        case JsonValue::Kind::Bool: return v.boolean ? "true" : "false";
        default: return v.kind_name();
        }
    }

private:
    std::string source_;
    std::string *error_;
};

struct Defaults {
    int ports = kIclPortsPerChip;
    LinkParams link;
};

bool read_link_params(FileReader &r, const JsonValue &object, const std::string &field, LinkParams *params) {
    if (const JsonValue *v = object.find("gbps"))
        if (!r.positive(*v, FileReader::join(field, "gbps"), &params->gbps)) return false;
    if (const JsonValue *v = object.find("latency_us"))
        if (!r.non_negative(*v, FileReader::join(field, "latency_us"), &params->latency_us)) return false;
    return true;
}

bool read_chips(FileReader &r, const JsonValue &chips, const Defaults &defaults, Machine *m) {
    long count = 0;
    if (chips.kind == JsonValue::Kind::Number) {
        if (!r.integer(chips, "chips", 1, kMaxFileChips, &count)) return false;
        Chip chip;
        chip.ports = defaults.ports;
        for (long i = 0; i < count; ++i) m->add_chip(chip);
        return true;
    }
    if (chips.kind != JsonValue::Kind::Array || chips.items.empty())
        return r.fail(chips, "chips", "expected a chip count or a non-empty array of chips, found " +
                                          FileReader::describe(chips));
    if (static_cast<long>(chips.items.size()) > kMaxFileChips)
        return r.fail(chips, "chips", "more than " + std::to_string(kMaxFileChips) + " chips");
    for (size_t i = 0; i < chips.items.size(); ++i) {
        const JsonValue &c = chips.items[i];
        std::string field = FileReader::index("chips", i);
        if (!r.expect(c, JsonValue::Kind::Object, field, "a chip object")) return false;
        if (!r.only_members(c, field, {"id", "host", "ports", "injection_gbps", "network"})) return false;
        Chip chip;
        chip.ports = defaults.ports;
        long value = 0;
        if (const JsonValue *v = c.find("id")) {
            if (!r.integer(*v, field + ".id", 0, kMaxFileChips, &value)) return false;
            if (value != static_cast<long>(i))
                return r.fail(*v, field + ".id",
                              "chips are listed in id order: expected " + std::to_string(i) + ", found " + v->text);
        }
        if (const JsonValue *v = c.find("host")) {
            if (!r.one_line_string(*v, field + ".host")) return false;
            chip.host = v->text;
        }
        if (const JsonValue *v = c.find("ports")) {
            if (!r.integer(*v, field + ".ports", 1, kMaxFileChips, &value)) return false;
            chip.ports = static_cast<int>(value);
        }
        if (const JsonValue *v = c.find("injection_gbps"))
            if (!r.positive(*v, field + ".injection_gbps", &chip.injection_gbps)) return false;
        if (const JsonValue *v = c.find("network")) {
            if (!r.expect(*v, JsonValue::Kind::Bool, field + ".network", "true or false")) return false;
            chip.network = v->boolean;
        }
        m->add_chip(chip);
    }
    return true;
}

bool read_links(FileReader &r, const JsonValue &links, const Defaults &defaults, Machine *m) {
    if (!r.expect(links, JsonValue::Kind::Array, "links", "an array of links")) return false;
    for (size_t i = 0; i < links.items.size(); ++i) {
        const JsonValue &l = links.items[i];
        std::string field = FileReader::index("links", i);
        if (!r.expect(l, JsonValue::Kind::Object, field, "a link object")) return false;
        if (!r.only_members(l, field, {"from", "to", "gbps", "latency_us", "duplex"})) return false;
        long ends[2] = {0, 0};
        const char *names[2] = {"from", "to"};
        for (int e = 0; e < 2; ++e) {
            const JsonValue *v = l.find(names[e]);
            if (v == nullptr) return r.fail(l, field, std::string("missing \"") + names[e] + "\" (a chip id)");
            if (!r.integer(*v, field + "." + names[e], 0, m->num_chips() - 1, &ends[e])) return false;
        }
        LinkParams params = defaults.link;
        if (!read_link_params(r, l, field, &params)) return false;
        bool duplex = true;
        if (const JsonValue *v = l.find("duplex")) {
            if (!r.expect(*v, JsonValue::Kind::Bool, field + ".duplex", "true or false")) return false;
            duplex = v->boolean;
        }
        int a = static_cast<int>(ends[0]), b = static_cast<int>(ends[1]);
        Status linked = m->add_link(a, b, params);
        if (linked && duplex) linked = m->add_link(b, a, params);
        if (!linked) return r.fail(l, field, linked.message());
        for (int chip : {a, b})
            if (m->ports_used(chip) > m->chip(chip).ports)
                return r.fail(l, field,
                              "chip " + std::to_string(chip) + " would be cabled to " +
                                  std::to_string(m->ports_used(chip)) + " chips but has " +
                                  std::to_string(m->chip(chip).ports) +
                                  " ports (set \"ports\" on the chip or \"ports_per_chip\" to allow more)");
    }
    return true;
}

// A file that says "torus" must be one: X*Y(*Z) chips, each cabled to
// exactly its four (six) neighbours (fewer where a dimension is 1 or 2).
bool check_torus(FileReader &r, const JsonValue &at, Machine *m) {
    const TorusDims d = m->torus();
    const int dims[3] = {d.x, d.y, d.z}, stride[3] = {1, d.x, d.x * d.y};
    std::string shape = std::to_string(d.x) + "x" + std::to_string(d.y);
    if (d.z > 1) shape += "x" + std::to_string(d.z);
    if (static_cast<long>(d.x) * d.y * d.z != m->num_chips())
        return r.fail(at, "torus",
                      "a " + shape + " torus has " + std::to_string(static_cast<long>(d.x) * d.y * d.z) +
                          " chips, the file has " + std::to_string(m->num_chips()));
    for (int c = 0; c < m->num_chips(); ++c) {
        std::vector<int> expected;
        for (int k = 0; k < 3; ++k) {
            const int a = c / stride[k] % dims[k];
            for (int step : {1, dims[k] - 1}) expected.push_back(c + ((a + step) % dims[k] - a) * stride[k]);
        }
        for (int n : expected)
            if (n != c && !m->has_duplex_link(c, n))
                return r.fail(at, "torus",
                              "chips " + std::to_string(c) + " and " + std::to_string(n) +
                                  " are torus neighbours but not cabled both ways");
        for (int l : m->out_links(c)) {
            int to = m->links()[static_cast<size_t>(l)].to;
            if (std::find(expected.begin(), expected.end(), to) == expected.end())
                return r.fail(at, "torus",
                              "link " + std::to_string(c) + "->" + std::to_string(to) +
                                  " joins chips that are not torus neighbours");
        }
    }
    return true;
}

bool read_placement(FileReader &r, const JsonValue &list, const Machine &m, std::vector<int> *placement) {
    if (!r.expect(list, JsonValue::Kind::Array, "placement", "an array of chip ids (rank i on chip [i])"))
        return false;
    std::vector<int> rank_on_chip(static_cast<size_t>(m.num_chips()), -1);
    for (size_t i = 0; i < list.items.size(); ++i) {
        long chip = 0;
        std::string field = FileReader::index("placement", i);
        if (!r.integer(list.items[i], field, 0, m.num_chips() - 1, &chip)) return false;
        int &other = rank_on_chip[static_cast<size_t>(chip)];
        if (other >= 0)
            return r.fail(list.items[i], field,
                          "chip " + std::to_string(chip) + " already runs rank " + std::to_string(other));
        other = static_cast<int>(i);
        placement->push_back(static_cast<int>(chip));
    }
    return true;
}

} // namespace

namespace {

// The reader keeps where every value came from and writes the message of
// the first error, with its line, column and field, into *error.
bool read_topology_text(const std::string &text, const std::string &source, TopologyFile *out, std::string *error) {
    *out = TopologyFile();
    FileReader r(source, error);
    JsonValue root;
    JsonError syntax;
    if (!parse_json(text, &root, &syntax))
        return r.fail_at(syntax.line, syntax.column, syntax.path.empty() ? "" : "in " + syntax.path, syntax.message);
    if (!r.expect(root, JsonValue::Kind::Object, "", "a topology object { \"chips\": ..., \"links\": [...] }"))
        return false;
    if (!r.only_members(root, "", {"nnpccl_topology", "name", "description", "shape", "torus", "ports_per_chip",
                                   "link_defaults", "chips", "links", "placement"}))
        return false;

    Machine &m = out->machine;
    long value = 0;
    if (const JsonValue *v = root.find("nnpccl_topology"))
        if (!r.integer(*v, "nnpccl_topology", 1, 1, &value)) return false;
    m.set_name(source);
    if (const JsonValue *v = root.find("name")) {
        if (!r.one_line_string(*v, "name")) return false;
        m.set_name(v->text);
    }
    if (const JsonValue *v = root.find("description"))
        if (!r.expect(*v, JsonValue::Kind::String, "description", "a string")) return false;

    Defaults defaults;
    if (const JsonValue *v = root.find("ports_per_chip")) {
        if (!r.integer(*v, "ports_per_chip", 1, kMaxFileChips, &value)) return false;
        defaults.ports = static_cast<int>(value);
    }
    if (const JsonValue *v = root.find("link_defaults")) {
        if (!r.expect(*v, JsonValue::Kind::Object, "link_defaults", "an object")) return false;
        if (!r.only_members(*v, "link_defaults", {"gbps", "latency_us"})) return false;
        if (!read_link_params(r, *v, "link_defaults", &defaults.link)) return false;
    }

    const JsonValue *chips = root.find("chips");
    if (chips == nullptr) return r.fail(root, "chips", "missing (a chip count or an array of chips)");
    if (!read_chips(r, *chips, defaults, &m)) return false;
    if (const JsonValue *links = root.find("links"))
        if (!read_links(r, *links, defaults, &m)) return false;

    const JsonValue *shape = root.find("shape");
    const JsonValue *torus = root.find("torus");
    if (shape != nullptr) {
        Shape s = Shape::Graph;
        if (!r.expect(*shape, JsonValue::Kind::String, "shape", "a string")) return false;
        if (!parse_shape(shape->text, &s))
            return r.fail(*shape, "shape",
                          "unknown shape \"" + printable(shape->text) +
                              "\" (graph, ring, fully-connected, hybrid-cube-mesh, torus, flat)");
        m.set_shape(s);
    }
    if (torus != nullptr) {
        if (shape == nullptr) m.set_shape(Shape::Torus);
        if (m.shape() != Shape::Torus) return r.fail(*torus, "torus", "given but \"shape\" is not \"torus\"");
        if (torus->kind != JsonValue::Kind::Array || torus->items.size() < 2 || torus->items.size() > 3)
            return r.fail(*torus, "torus", "expected [X, Y] or [X, Y, Z], found " + FileReader::describe(*torus));
        long x = 0, y = 0, z = 1;
        if (!r.integer(torus->items[0], "torus[0]", 1, kMaxFileChips, &x) ||
            !r.integer(torus->items[1], "torus[1]", 1, kMaxFileChips, &y) ||
            (torus->items.size() == 3 && !r.integer(torus->items[2], "torus[2]", 1, kMaxFileChips, &z)))
            return false;
        m.set_torus({static_cast<int>(x), static_cast<int>(y), static_cast<int>(z)});
        if (!check_torus(r, *torus, &m)) return false;
    } else if (m.shape() == Shape::Torus) {
        return r.fail(*shape, "shape", "a torus needs \"torus\": [X, Y]");
    }

    if (const JsonValue *v = root.find("placement"))
        if (!read_placement(r, *v, m, &out->placement)) return false;
    return true;
}

} // namespace

Status parse_topology_text(const std::string &text, const std::string &source, TopologyFile *out) {
    std::string error;
    if (!read_topology_text(text, source, out, &error)) return Status(NNPCCL_ERR_INVALID_ARGUMENT, error);
    return Status::ok();
}

Status read_topology_file(const std::string &path, TopologyFile *out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status(NNPCCL_ERR_INVALID_ARGUMENT, path + ": cannot open the topology file");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return Status(NNPCCL_ERR_INVALID_ARGUMENT, path + ": cannot read the topology file");
    return parse_topology_text(text.str(), path, out);
}

namespace {

// The shortest spelling that reads back as the same double.
std::string number(double v) {
    char buf[32];
    for (int precision = 6; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

std::string quoted(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace

std::string topology_to_json(const Machine &m, const std::vector<int> &placement) {
    std::ostringstream out;
    out << "{\n  \"nnpccl_topology\": 1,\n  \"name\": " << quoted(m.name()) << ",\n";
    out << "  \"shape\": " << quoted(shape_name(m.shape())) << ",\n";
    if (m.shape() == Shape::Torus) {
        out << "  \"torus\": [" << m.torus().x << ", " << m.torus().y;
        if (m.torus().z > 1) out << ", " << m.torus().z;
        out << "],\n";
    }

    // The most common port count becomes the default; chips that differ say so.
    std::map<int, int> port_counts;
    for (const Chip &c : m.chips()) ++port_counts[c.ports];
    int ports = kIclPortsPerChip;
    int best = 0;
    for (const auto &pc : port_counts)
        if (pc.second > best) {
            best = pc.second;
            ports = pc.first;
        }
    out << "  \"ports_per_chip\": " << ports << ",\n";
    bool plain = true;
    for (const Chip &c : m.chips())
        plain = plain && c.host.empty() && c.ports == ports && c.injection_gbps == 0 && !c.network;
    if (plain) {
        out << "  \"chips\": " << m.num_chips() << ",\n";
    } else {
        out << "  \"chips\": [\n";
        for (int i = 0; i < m.num_chips(); ++i) {
            const Chip &c = m.chip(i);
            out << "    {\"id\": " << i;
            if (!c.host.empty()) out << ", \"host\": " << quoted(c.host);
            if (c.ports != ports) out << ", \"ports\": " << c.ports;
            if (c.injection_gbps != 0) out << ", \"injection_gbps\": " << number(c.injection_gbps);
            if (c.network) out << ", \"network\": true";
            out << "}" << (i + 1 < m.num_chips() ? ",\n" : "\n");
        }
        out << "  ],\n";
    }

    // A pair of opposite links with the same figures is written once; any
    // other link on its own with "duplex": false.
    out << "  \"links\": [";
    bool first = true;
    for (size_t i = 0; i < m.links().size(); ++i) {
        const Link &l = m.links()[i];
        int reverse = m.link_index(l.to, l.from);
        bool pair = reverse >= 0 && m.links()[static_cast<size_t>(reverse)].gbps == l.gbps &&
                    m.links()[static_cast<size_t>(reverse)].latency_us == l.latency_us;
        if (pair && l.from > l.to) continue;
        out << (first ? "\n" : ",\n") << "    {\"from\": " << l.from << ", \"to\": " << l.to
            << ", \"gbps\": " << number(l.gbps) << ", \"latency_us\": " << number(l.latency_us);
        if (!pair) out << ", \"duplex\": false";
        out << "}";
        first = false;
    }
    out << (first ? "]" : "\n  ]");
    if (!placement.empty()) {
        out << ",\n  \"placement\": [";
        for (size_t i = 0; i < placement.size(); ++i) out << (i ? ", " : "") << placement[i];
        out << "]";
    }
    out << "\n}\n";
    return out.str();
}

} // namespace nnpccl
