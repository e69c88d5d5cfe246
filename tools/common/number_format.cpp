#include "number_format.hpp"

#include <cstdio>

namespace nnpccl_tools {

std::string table_number(double v, int width, int decimals_below_one) {
    char buf[40];
    int power = 0; // digits before the point
    for (double p = 1; v >= p && power < 30; p *= 10) ++power;
    if (v < 1 && decimals_below_one != 2)
        std::snprintf(buf, sizeof buf, "%*.*f", width, decimals_below_one, v);
    else if (power < width - 2)
        std::snprintf(buf, sizeof buf, "%*.2f", width, v);
    else if (power < width - 1)
        std::snprintf(buf, sizeof buf, "%*.1f", width, v);
    else if (power < width + 1)
        std::snprintf(buf, sizeof buf, "%*.0f", width, v);
    else
        std::snprintf(buf, sizeof buf, "%*.1e", width, v);
    return buf;
}

} // namespace nnpccl_tools
