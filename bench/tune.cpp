#include "tune.hpp"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

namespace nnpccl_bench {

namespace {

// NNPCCL_ALGO's sizes: bytes, with K, M or G where they divide.
std::string size_text(size_t bytes) {
    const char *units = "GMK";
    for (int i = 0; i < 3; ++i) {
        const size_t unit = size_t(1) << (10 * (3 - i));
        if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + units[i];
    }
    return std::to_string(bytes);
}

std::string choices_line(const std::string &collective, const std::vector<std::pair<size_t, std::string>> &winners) {
    std::string line = collective + ":";
    for (size_t i = 0; i < winners.size(); ++i) {
        if (i > 0 && winners[i].second == winners[i - 1].second) continue;
        size_t next = i + 1;
        while (next < winners.size() && winners[next].second == winners[i].second) ++next;
        line += (i == 0 ? "" : ",") + winners[i].second + ":" + (i == 0 ? "0" : size_text(winners[i].first)) + "-" +
                (next == winners.size() ? "max" : size_text(winners[next].first));
    }
    return line;
}

} // namespace

bool write_tuning_file(const std::string &path, const std::string &collective, int nranks, const std::string &topology,
                       const std::vector<std::pair<size_t, std::string>> &winners, const std::string &how,
                       std::string *error) {
    if (winners.empty()) {
        *error = "no size was measured, so there is nothing to write";
        return false;
    }
    std::vector<std::string> kept, provenance; // other collectives' lines of an existing file, and their comments
    std::ifstream in(path);
    std::string line;
    while (in && std::getline(in, line)) {
        if (line.rfind("nranks ", 0) == 0 && line != "nranks " + std::to_string(nranks)) {
            *error = path + " holds choices for " + line + ", not " + std::to_string(nranks) + ": use another file";
            return false;
        }
        if (line.rfind("topology ", 0) == 0 && line != "topology " + topology) {
            *error = path + " holds choices for " + line + ", not " + topology + ": use another file";
            return false;
        }
        if (line.rfind("# ", 0) == 0 && line.find(": ccl-bench ") != std::string::npos &&
            line.rfind("# " + collective + ":", 0) != 0)
            provenance.push_back(line);
        else if (line.find(':') != std::string::npos && line[0] != '#' && line.rfind(collective + ":", 0) != 0)
            kept.push_back(line);
    }
    char date[32] = "";
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::ostringstream out;
    out << "# nnpccl tuning file (NNPCCL_TUNING_FILE): per collective, the algorithm measured fastest per size\n";
    for (const std::string &p : provenance) out << p << "\n";
    out << "# " << collective << ": " << how << ", " << date << "\n"
        << "nranks " << nranks << "\n"
        << "topology " << topology << "\n";
    for (const std::string &k : kept) out << k << "\n";
    out << choices_line(collective, winners) << "\n";
    const std::string tmp = path + ".tmp";
    std::ofstream file(tmp, std::ios::trunc);
    file << out.str();
    file.close();
    if (!file || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        *error = "cannot write " + path;
        return false;
    }
    return true;
}

} // namespace nnpccl_bench
