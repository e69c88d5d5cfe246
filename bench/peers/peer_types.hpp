// The peers' collectives, datatypes and reduction operations, by the names
// nccl-tests and ccl-bench print, with the C++ type behind each datatype.
#pragma once

#include <strings.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

namespace peer_bench {

enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce };

struct CollectiveInfo {
    Collective collective;
    const char *name;
    bool reduces; // takes a reduction operation (the "redop" column)
    bool rooted;  // takes a root (the "root" column)
};

inline constexpr CollectiveInfo kCollectives[] = {
    {Collective::AllReduce, "allreduce", true, false},  {Collective::ReduceScatter, "reduce_scatter", true, false},
    {Collective::AllGather, "allgather", false, false}, {Collective::Broadcast, "broadcast", false, true},
    {Collective::Reduce, "reduce", true, true},
};

// The exit status of a peer asked for a collective its library lacks
// (Debian's Gloo has no reduce_scatter), told apart from a failure so that
// tools/compare-peers can leave that peer out of the table and say why.
inline constexpr int kExitNoSuchCollective = 3;

inline const CollectiveInfo &info(Collective c) {
    for (const CollectiveInfo &entry : kCollectives)
        if (entry.collective == c) return entry;
    return kCollectives[0]; // unreachable: every enumerator is in the table
}

// Accepts "allreduce", "all_reduce", "all-reduce", "AllReduce", "bcast" ...
inline bool parse_collective(const char *text, Collective *out) {
    std::string key;
    for (const char *p = text; *p != '\0'; ++p)
        if (*p != '_' && *p != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    if (key == "bcast") key = "broadcast";
    for (const CollectiveInfo &entry : kCollectives) {
        std::string name;
        for (const char *p = entry.name; *p != '\0'; ++p)
            if (*p != '_') name += *p;
        if (key == name) {
            *out = entry.collective;
            return true;
        }
    }
    return false;
}

// busbw = algbw x this factor: what each rank's link carries, so that the
// number is comparable across collectives and rank counts (nccl-tests's
// PERFORMANCE.md). S is the total size in both cases.
inline double bus_factor(Collective c, int nranks) {
    const double n = nranks;
    switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather: return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce: return 1.0;
    }
    return 1.0;
}

enum class RedOp { Sum, Prod, Min, Max };

inline constexpr const char *kRedOpNames[] = {"sum", "prod", "min", "max"};

inline const char *name(RedOp op) { return kRedOpNames[static_cast<int>(op)]; }

inline bool parse_redop(const char *text, RedOp *out) {
    for (int i = 0; i < 4; ++i) {
        if (strcasecmp(text, kRedOpNames[i]) == 0) {
            *out = static_cast<RedOp>(i);
            return true;
        }
    }
    return false;
}

// The datatypes both MPI and Gloo reduce natively. half and bfloat16 are left
// out: MPI has no standard type for them.
enum class Dtype { Int8, Uint8, Int32, Uint32, Int64, Uint64, Float, Double };

struct DtypeInfo {
    Dtype dtype;
    const char *name; // as nccl-tests and ccl-bench print it
    size_t size;
    double largest_exact_integer; // every integer in [0, this] is representable
    const char *aliases[3];
};

inline constexpr DtypeInfo kDtypes[] = {
    {Dtype::Int8, "int8", 1, 127.0, {"char", "i8", nullptr}},
    {Dtype::Uint8, "uint8", 1, 255.0, {"u8", nullptr, nullptr}},
    {Dtype::Int32, "int32", 4, 2147483647.0, {"int", "i32", nullptr}},
    {Dtype::Uint32, "uint32", 4, 4294967295.0, {"u32", nullptr, nullptr}},
    {Dtype::Int64, "int64", 8, 9007199254740992.0, {"i64", nullptr, nullptr}},
    {Dtype::Uint64, "uint64", 8, 9007199254740992.0, {"u64", nullptr, nullptr}},
    {Dtype::Float, "float", 4, 16777216.0, {"float32", "fp32", "f32"}},
    {Dtype::Double, "double", 8, 9007199254740992.0, {"float64", "fp64", "f64"}},
};

inline const DtypeInfo &info(Dtype d) { return kDtypes[static_cast<int>(d)]; }

inline bool parse_dtype(const char *text, Dtype *out) {
    for (const DtypeInfo &entry : kDtypes) {
        bool match = strcasecmp(text, entry.name) == 0;
        for (const char *alias : entry.aliases) match = match || (alias != nullptr && strcasecmp(text, alias) == 0);
        if (match) {
            *out = entry.dtype;
            return true;
        }
    }
    return false;
}

// Calls fn(T{}) with the C++ type of d, so that typed code is written once.
template <typename Fn> auto with_type(Dtype d, Fn &&fn) {
    switch (d) {
    case Dtype::Int8: return fn(int8_t{});
    case Dtype::Uint8: return fn(uint8_t{});
    case Dtype::Int32: return fn(int32_t{});
    case Dtype::Uint32: return fn(uint32_t{});
    case Dtype::Int64: return fn(int64_t{});
    case Dtype::Uint64: return fn(uint64_t{});
    case Dtype::Float: return fn(float{});
    case Dtype::Double: return fn(double{});
    }
    return fn(float{});
}

} // namespace peer_bench
