#include "dtype.hpp"

#include <strings.h>

namespace nnpccl {

namespace {

// Sizes are datatype_size's (dtype.hpp).
struct DatatypeInfo {
    const char *name;
    const char *aliases[4];
};

const DatatypeInfo kDatatypes[NNPCCL_NUM_DATATYPES] = {
    {"int8", {"char", "i8", nullptr, nullptr}},
    {"uint8", {"u8", nullptr, nullptr, nullptr}},
    {"int32", {"int", "i32", nullptr, nullptr}},
    {"uint32", {"u32", nullptr, nullptr, nullptr}},
    {"int64", {"i64", nullptr, nullptr, nullptr}},
    {"uint64", {"u64", nullptr, nullptr, nullptr}},
    {"half", {"float16", "fp16", "f16", nullptr}},
    {"bfloat16", {"bf16", nullptr, nullptr, nullptr}},
    {"float", {"float32", "fp32", "f32", nullptr}},
    {"double", {"float64", "fp64", "f64", nullptr}},
};

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
