#include "dtype.hpp"

#include <strings.h>

namespace nnpccl {

namespace {

struct DatatypeInfo {
    const char *name;
    size_t size;
    const char *aliases[4];
};

constexpr DatatypeInfo kDatatypes[NNPCCL_NUM_DATATYPES] = {
    {"int8", 1, {"char", "i8", nullptr, nullptr}},
    {"uint8", 1, {"u8", nullptr, nullptr, nullptr}},
    {"int32", 4, {"int", "i32", nullptr, nullptr}},
    {"uint32", 4, {"u32", nullptr, nullptr, nullptr}},
    {"int64", 8, {"i64", nullptr, nullptr, nullptr}},
    {"uint64", 8, {"u64", nullptr, nullptr, nullptr}},
    {"half", 2, {"float16", "fp16", "f16", nullptr}},
    {"bfloat16", 2, {"bf16", nullptr, nullptr, nullptr}},
    {"float", 4, {"float32", "fp32", "f32", nullptr}},
    {"double", 8, {"float64", "fp64", "f64", nullptr}},
};

constexpr bool sizes_agree() {
    for (int i = 0; i < NNPCCL_NUM_DATATYPES; ++i)
        if (kDatatypes[i].size != datatype_size(static_cast<nnpccl_datatype_t>(i))) return false;
    return true;
}
static_assert(sizes_agree(), "datatype_size (dtype.hpp) and kDatatypes disagree");

const char *const kRedops[NNPCCL_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};

} // namespace

const char *datatype_name(nnpccl_datatype_t dt) { return valid_datatype(dt) ? kDatatypes[dt].name : "?"; }

const char *redop_name(nnpccl_redop_t op) { return valid_redop(op) ? kRedops[op] : "?"; }

bool parse_datatype(const char *name, nnpccl_datatype_t *dt) {
    for (int i = 0; i < NNPCCL_NUM_DATATYPES; ++i) {
        bool match = strcasecmp(name, kDatatypes[i].name) == 0;
        for (const char *alias : kDatatypes[i].aliases)
            match = match || (alias != nullptr && strcasecmp(name, alias) == 0);
        if (match) {
            *dt = static_cast<nnpccl_datatype_t>(i);
            return true;
        }
    }
    return false;
}

bool parse_redop(const char *name, nnpccl_redop_t *op) {
    for (int i = 0; i < NNPCCL_NUM_OPS; ++i) {
        if (strcasecmp(name, kRedops[i]) == 0) {
            *op = static_cast<nnpccl_redop_t>(i);
            return true;
        }
    }
    return false;
}

} // namespace nnpccl
