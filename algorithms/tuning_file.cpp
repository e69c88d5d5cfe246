#include "tuning_file.hpp"

#include <cstdlib>

namespace nnpccl {

Status parse_tuning_file(std::string_view text, std::string_view source, TuningFile *out) {
    *out = TuningFile{};
    std::string rules; // the collective lines, joined as one NNPCCL_ALGO spec
    int line_number = 0;
    while (!text.empty()) {
        const size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        ++line_number;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
            line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;
        const std::string where = std::string(source) + ", line " + std::to_string(line_number);
        if (line.substr(0, 7) == "nranks ") {
            const std::string value(line.substr(7));
            char *rest = nullptr;
            const long n = std::strtol(value.c_str(), &rest, 10);
            if (*rest != '\0' || n < 1 || n > (1 << 20))
                return invalid_argument("%s: nranks '%s' is not a number of ranks", where.c_str(), value.c_str());
            out->nranks = static_cast<int>(n);
        } else if (line.substr(0, 9) == "topology ") {
            out->topology = std::string(line.substr(9));
        } else if (line.find(':') != std::string_view::npos) {
            AlgoOverride one;
            NNPCCL_TRY(one.parse(line, where));
            rules += (rules.empty() ? "" : ";") + std::string(line);
        } else {
            return invalid_argument("%s: '%.*s' is not 'nranks N', 'topology NAME' or 'collective:algorithm...'",
                                    where.c_str(), static_cast<int>(line.size()), line.data());
        }
    }
    if (out->nranks == 0 || out->topology.empty())
        return invalid_argument("%.*s: the file names no %s (a tuning file holds 'nranks N' and 'topology NAME')",
                                static_cast<int>(source.size()), source.data(),
                                out->nranks == 0 ? "nranks" : "topology");
    return out->choices.parse(rules, source);
}

} // namespace nnpccl
