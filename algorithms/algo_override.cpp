#include "algo_override.hpp"

#include <cstdint>

#include "registry.hpp"

namespace nnpccl {

namespace {

// Cuts `text` at each `sep`, remembering where each piece starts.
struct Piece {
    std::string_view text;
    size_t position; // 0-based offset in the whole spec
};

std::vector<Piece> split(std::string_view text, size_t base, char sep) {
    std::vector<Piece> pieces;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == sep) {
            pieces.push_back({text.substr(start, i - start), base + start});
            start = i + 1;
        }
    }
    return pieces;
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string at(size_t position) { return " at character " + std::to_string(position + 1); }

bool parse_bound(std::string_view text, bool allow_max, size_t *out) {
    if (allow_max && text == "max") {
        *out = SIZE_MAX;
        return true;
    }
    if (text.empty()) return false;
    unsigned shift = 0;
    switch (text.back()) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    default: break;
    }
    if (shift != 0) text.remove_suffix(1);
    if (text.empty() || text.size() > 19) return false;
    uint64_t value = 0;
    for (char ch : text) {
        if (ch < '0' || ch > '9') return false;
        value = value * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (value > (SIZE_MAX >> shift)) return false;
    *out = static_cast<size_t>(value) << shift;
    return true;
}

} // namespace

Status AlgoOverride::parse(std::string_view spec, std::string_view source) {
    const std::string prefix = std::string(source) + ": ";
    std::vector<AlgoChoice> parsed;
    if (spec.empty()) {
        choices_.clear();
        source_ = source;
        return Status::ok();
    }
    for (const Piece &entry : split(spec, 0, ';')) {
        const size_t colon = entry.text.find(':');
        if (colon == std::string_view::npos)
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, prefix + quoted(entry.text) + at(entry.position) +
                                                           " is not 'collective:algorithm[:low-high],...'");
        Collective collective;
        const std::string_view coll_name = entry.text.substr(0, colon);
        if (!collective_from_name(coll_name, &collective)) {
            std::string known;
            for (Collective c : kAllCollectives) known += std::string(known.empty() ? "" : ", ") + collective_name(c);
            return Status(NNPCCL_ERR_INVALID_ARGUMENT, prefix + "unknown collective " + quoted(coll_name) +
                                                           at(entry.position) + " (known: " + known + ")");
        }
        for (const Piece &choice : split(entry.text.substr(colon + 1), entry.position + colon + 1, ',')) {
            AlgoChoice parsed_choice;
            parsed_choice.collective = collective;
            const size_t range_colon = choice.text.find(':');
            const std::string_view name = choice.text.substr(0, range_colon);
            const AlgorithmInfo *info = find_algorithm_for(collective, name);
            if (info == nullptr || !info->serves_collective(collective))
                return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                              prefix + std::string(info == nullptr ? "unknown algorithm " : "algorithm ") +
                                  quoted(name) + at(choice.position) +
                                  (info == nullptr ? "" : " does not serve " + std::string(coll_name)) + " (" +
                                  std::string(coll_name) + " has: " + algorithm_names_for(collective) + ")");
            parsed_choice.algorithm = info->name;
            if (range_colon != std::string_view::npos) {
                const std::string_view range = choice.text.substr(range_colon + 1);
                const size_t range_position = choice.position + range_colon + 1;
                const size_t dash = range.find('-');
                if (dash == std::string_view::npos ||
                    !parse_bound(range.substr(0, dash), false, &parsed_choice.low) ||
                    !parse_bound(range.substr(dash + 1), true, &parsed_choice.high)) {
                    return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                                  prefix + "size range " + quoted(range) + at(range_position) +
                                      " is not 'low-high' (sizes like 0, 8K, 4M, 1G; high may be 'max')");
                }
                if (parsed_choice.low >= parsed_choice.high)
                    return Status(NNPCCL_ERR_INVALID_ARGUMENT,
                                  prefix + "size range " + quoted(range) + at(range_position) + " is empty");
            }
            parsed.push_back(std::move(parsed_choice));
        }
    }
    choices_ = std::move(parsed);
    source_ = source;
    return Status::ok();
}

const std::string *AlgoOverride::pick(Collective c, size_t bytes) const {
    for (const AlgoChoice &choice : choices_)
        if (choice.collective == c && bytes >= choice.low && (bytes < choice.high || choice.high == SIZE_MAX))
            return &choice.algorithm;
    return nullptr;
}

} // namespace nnpccl
