// peer_bench.hpp — what mpi-bench and gloo-bench share: the nccl-tests
// command line, the buffer layout of each collective, the test pattern that
// makes every reduction exact in any order, and the nccl-tests report format.
//
// Nothing here talks to MPI or Gloo, so both peers print rows that line up
// column for column with each other and with ccl-bench (docs/design.md,
// "Benchmark output"). Header-only because each peer is a single
// executable and neither may depend on the library under test.
#pragma once

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace peer_bench {

// ---------------------------------------------------------------------------
// Collectives, datatypes, reduction operations

enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce };

struct CollectiveInfo {
    Collective collective;
    const char *name;
    bool reduces; // takes a reduction operation (the "redop" column)
    bool rooted;  // takes a root (the "root" column)
};

inline constexpr CollectiveInfo kCollectives[] = {
    {Collective::AllReduce, "allreduce", true, false},
    {Collective::ReduceScatter, "reduce_scatter", true, false},
    {Collective::AllGather, "allgather", false, false},
    {Collective::Broadcast, "broadcast", false, true},
    {Collective::Reduce, "reduce", true, true},
};

// The exit status of a peer asked for a collective its library lacks
// (Debian's Gloo has no reduce_scatter), told apart from a failure so that
// tools/compare-peers can leave that peer out of the table and say why.
inline constexpr int kExitNoSuchCollective = 3;

inline const CollectiveInfo &info(Collective c) {
    for (const CollectiveInfo &entry : kCollectives)
        if (entry.collective == c)
            return entry;
    return kCollectives[0]; // unreachable: every enumerator is in the table
}

// Accepts "allreduce", "all_reduce", "all-reduce", "AllReduce", "bcast" ...
inline bool parseCollective(const char *text, Collective *out) {
    std::string key;
    for (const char *p = text; *p != '\0'; ++p)
        if (*p != '_' && *p != '-')
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    if (key == "bcast")
        key = "broadcast";
    for (const CollectiveInfo &entry : kCollectives) {
        std::string name;
        for (const char *p = entry.name; *p != '\0'; ++p)
            if (*p != '_')
                name += *p;
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
inline double busFactor(Collective c, int nranks) {
    const double n = nranks;
    switch (c) {
    case Collective::AllReduce:
        return 2.0 * (n - 1) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather:
        return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
        return 1.0;
    }
    return 1.0;
}

enum class RedOp { Sum, Prod, Min, Max };

inline constexpr const char *kRedOpNames[] = {"sum", "prod", "min", "max"};

inline const char *name(RedOp op) { return kRedOpNames[static_cast<int>(op)]; }

inline bool parseRedOp(const char *text, RedOp *out) {
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
    double largestExactInteger; // every integer in [0, this] is representable
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

inline bool parseDtype(const char *text, Dtype *out) {
    for (const DtypeInfo &entry : kDtypes) {
        bool match = strcasecmp(text, entry.name) == 0;
        for (const char *alias : entry.aliases)
            match = match || (alias != nullptr && strcasecmp(text, alias) == 0);
        if (match) {
            *out = entry.dtype;
            return true;
        }
    }
    return false;
}

// Calls fn(T{}) with the C++ type of d, so that typed code is written once.
template <typename Fn> auto withType(Dtype d, Fn &&fn) {
    switch (d) {
    case Dtype::Int8:
        return fn(int8_t{});
    case Dtype::Uint8:
        return fn(uint8_t{});
    case Dtype::Int32:
        return fn(int32_t{});
    case Dtype::Uint32:
        return fn(uint32_t{});
    case Dtype::Int64:
        return fn(int64_t{});
    case Dtype::Uint64:
        return fn(uint64_t{});
    case Dtype::Float:
        return fn(float{});
    case Dtype::Double:
        return fn(double{});
    }
    return fn(float{});
}

// ---------------------------------------------------------------------------
// Command line (nccl-tests's flags and defaults, except -f which defaults to 2)

struct Options {
    Collective collective = Collective::AllReduce;
    size_t minBytes = 32u << 20;
    size_t maxBytes = 32u << 20;
    size_t stepFactor = 2;       // -f: multiply the size by this; 1 = add stepBytes
    size_t stepBytes = 1u << 20; // -i: used only with -f 1
    int iters = 20;
    int warmupIters = 5;
    Dtype dtype = Dtype::Float;
    RedOp op = RedOp::Sum;
    int root = 0;
    bool check = true;
    // Launcher flags, accepted only by tools that launch their own ranks.
    int launchRanks = 0;  // --np N
    std::string storeDir; // --store DIR
};

// "64M" -> 64 MiB. K, M, G (either case) are powers of 1024, as in nccl-tests.
inline bool parseBytes(const char *text, size_t *out) {
    errno = 0;
    char *end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (end == text || errno != 0 || text[0] == '-')
        return false;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        return false;
    }
    if (*end != '\0' && end[1] != '\0')
        return false;
    if (value > (SIZE_MAX >> shift))
        return false;
    *out = static_cast<size_t>(value) << shift;
    return true;
}

inline bool parseInt(const char *text, long min, long max, long *out) {
    errno = 0;
    char *end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || value < min || value > max)
        return false;
    *out = value;
    return true;
}

// An option whose text `parse(text, &value)` reads into *target; `error`
// starts the message when it cannot. Checked before stored, so a bad value
// leaves *target alone.
template <typename T, typename Parse>
CLI::Option *addParsed(CLI::App &app, const std::string &flags, T *target, Parse parse, const std::string &error,
                       const std::string &help, const std::string &typeName) {
    return app
        .add_option_function<std::string>(
            flags, [target, parse](const std::string &text) { parse(text.c_str(), target); }, help)
        ->check(CLI::Validator(
            [parse, error](std::string &text) {
                T scratch{};
                return parse(text.c_str(), &scratch) ? std::string() : error + text;
            },
            ""))
        ->type_name(typeName);
}

// A parser of whole numbers in [min, max] into an int or a size_t.
template <typename T> auto numberIn(long min, long max) {
    return [min, max](const char *text, T *out) {
        long value = 0;
        if (!parseInt(text, min, max, &value))
            return false;
        *out = static_cast<T>(value);
        return true;
    };
}

// The flags of both peers, defined once for parsing and for --help.
// *collective receives COLLECTIVE; --np and --store are hidden when the tool
// does not launch its own ranks, and parseOptions refuses them then.
inline void defineOptions(CLI::App &app, bool launcher, Options *opts, std::string *collective) {
    // The last of a repeated flag wins, as in nccl-tests: scripts append overrides.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.get_formatter()->column_width(26);
    app.add_option("COLLECTIVE", *collective, "allreduce | reduce_scatter | allgather | broadcast | reduce")
        ->required()
        ->check(CLI::Validator(
            [](std::string &text) {
                Collective c;
                return parseCollective(text.c_str(), &c) ? std::string() : "unknown collective: " + text;
            },
            ""))
        ->type_name("NAME");
    addParsed(app, "-b,--minbytes", &opts->minBytes, parseBytes, "not a size: ",
              "smallest size (default 32M; suffixes K M G = powers of 1024)", "SIZE");
    addParsed(app, "-e,--maxbytes", &opts->maxBytes, parseBytes, "not a size: ", "largest size (default 32M)", "SIZE");
    addParsed(app, "-f,--stepfactor", &opts->stepFactor, numberIn<size_t>(1, 1 << 20),
              "not a whole number in [1, 1048576]: ", "multiply the size by this between rows (default 2)", "N");
    addParsed(
        app, "-i,--stepbytes", &opts->stepBytes,
        [](const char *text, size_t *out) { return parseBytes(text, out) && *out > 0; }, "not a size above 0: ",
        "add this between rows when -f is 1 (default 1M)", "SIZE");
    addParsed(app, "-n,--iters", &opts->iters, numberIn<int>(1, INT_MAX), "not a whole number >= 1: ",
              "timed iterations per row (default 20)", "N");
    addParsed(app, "-w,--warmup_iters", &opts->warmupIters, numberIn<int>(0, INT_MAX), "not a whole number >= 0: ",
              "untimed iterations before each timed block (default 5)", "N");
    addParsed(app, "-d,--datatype", &opts->dtype, parseDtype, "unsupported datatype: ",
              "int8 uint8 int32 uint32 int64 uint64 float double (default float)", "TYPE");
    addParsed(app, "-o,--op", &opts->op, parseRedOp, "unsupported op: ", "sum prod min max (default sum)", "OP");
    addParsed(app, "-r,--root", &opts->root, numberIn<int>(0, INT_MAX), "not a whole number >= 0: ",
              "root of broadcast and reduce (default 0)", "RANK");
    addParsed(
        app, "-c,--check", &opts->check,
        [](const char *text, bool *out) {
            long value = 0;
            if (!parseInt(text, 0, 1, &value))
                return false;
            *out = value != 0;
            return true;
        },
        "not 0 or 1: ", "verify every element bit for bit (default 1)", "0|1");
    const char *group = launcher ? "Options" : "";
    addParsed(app, "--np", &opts->launchRanks, numberIn<int>(1, 4096), "not a rank count in [1, 4096]: ",
              "fork N local ranks (otherwise RANK/WORLD_SIZE or the\n"
              "OMPI_COMM_WORLD_*, PMI_*, SLURM_* variables name this rank)",
              "N")
        ->group(group);
    app.add_option("--store", opts->storeDir,
                   "empty directory shared by all ranks for the rendezvous\n"
                   "(without --np; default $GLOO_BENCH_STORE)")
        ->type_name("DIR")
        ->group(group);
}

inline void printUsage(const char *tool, bool launcher) {
    CLI::App app{"Times COLLECTIVE over a sweep of sizes, as ccl-bench does, each result checked bit for bit.\n",
                 tool};
    Options opts;
    std::string collective;
    defineOptions(app, launcher, &opts, &collective);
    std::fputs(app.help().c_str(), stderr);
}

// Returns false and fills *error when the command line is wrong; with an
// empty *error when it asks for --help.
inline bool parseOptions(int argc, char **argv, bool acceptLauncherFlags, Options *opts,
                         std::string *error) {
    CLI::App app;
    std::string collective;
    defineOptions(app, acceptLauncherFlags, opts, &collective);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &) {
        return *error = "", false;
    } catch (const CLI::ParseError &e) {
        return *error = e.what(), false;
    }
    for (const char *flag : {"--np", "--store"})
        if (!acceptLauncherFlags && app.get_option(flag)->count() > 0)
            return *error = std::string(flag) + " is not for this tool; use its launcher (mpirun -np N)", false;
    parseCollective(collective.c_str(), &opts->collective);
    if (opts->minBytes > opts->maxBytes)
        return *error = "-b is larger than -e", false;
    return true;
}

// parseOptions for a tool's main(): -1 when the run goes on; otherwise the
// exit status, having printed the help (0) or the error in one line (2) if
// `speaking` (an MPI tool's rank 0 only).
inline int parseCommandLine(const char *tool, int argc, char **argv, bool launcher, Options *opts,
                            bool speaking = true) {
    std::string error;
    if (parseOptions(argc, argv, launcher, opts, &error))
        return -1;
    if (speaking) {
        if (!error.empty())
            std::fprintf(stderr, "%s: %s (see --help)\n", tool, error.c_str());
        else
            printUsage(tool, launcher);
    }
    return error.empty() ? 0 : 2;
}

// The sizes of the rows, as nccl-tests walks them: multiply by -f, or add -i
// when -f is 1; stop past -e.
inline std::vector<size_t> sizeSeries(const Options &opts) {
    std::vector<size_t> sizes;
    for (size_t size = opts.minBytes; size <= opts.maxBytes;) {
        sizes.push_back(size);
        const size_t next = opts.stepFactor > 1 ? size * opts.stepFactor : size + opts.stepBytes;
        if (next <= size) // overflow, or -b 0 with a factor
            break;
        size = next;
    }
    return sizes;
}

// ---------------------------------------------------------------------------
// Buffer layout of one row

// How many elements each rank sends and receives for a requested size. Sizes
// round down to whole elements and, for reduce_scatter/allgather, to a whole
// number of elements per rank.
struct Layout {
    size_t sendCount = 0;  // elements of the out-of-place input
    size_t recvCount = 0;  // elements of the output
    size_t bufferCount = 0; // elements of the in-place buffer (input and output)
    size_t totalCount = 0; // the "count" column: the whole buffer, all ranks' parts
    size_t totalBytes = 0; // S: the "size" column and algbw = S / t
};

inline Layout layoutFor(Collective c, size_t bytes, size_t elementSize, int nranks) {
    const size_t count = bytes / elementSize;
    const size_t n = static_cast<size_t>(nranks);
    Layout layout;
    switch (c) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce:
        layout.sendCount = layout.recvCount = count;
        layout.totalCount = count;
        break;
    case Collective::ReduceScatter:
        layout.recvCount = count / n;
        layout.sendCount = layout.totalCount = layout.recvCount * n;
        break;
    case Collective::AllGather:
        layout.sendCount = count / n;
        layout.recvCount = layout.totalCount = layout.sendCount * n;
        break;
    }
    layout.bufferCount = std::max(layout.sendCount, layout.recvCount);
    layout.totalBytes = layout.totalCount * elementSize;
    return layout;
}

// Where the input of the in-place variant lives inside the one buffer: at
// this rank's block for allgather (MPI_IN_PLACE and Gloo agree), at the start
// otherwise. The output always starts at element 0 (for reduce_scatter
// MPI_IN_PLACE leaves this rank's block at the start of the buffer).
inline size_t inPlaceInputOffset(Collective c, const Layout &layout, int rank) {
    return c == Collective::AllGather ? static_cast<size_t>(rank) * layout.sendCount : 0;
}

enum class Placement { OutOfPlace, InPlace };

// ---------------------------------------------------------------------------
// Test pattern: small non-negative integers, so that every reduction is exact
// in any order and for every type, and a result is right only bit for bit.

struct Case {
    Collective collective;
    RedOp op;
    Dtype dtype;
    int rank;
    int nranks;
    int root;
    Layout layout;
};

// A 32-bit hash of (rank, element): neighbouring elements and ranks differ,
// so a block that lands in the wrong place is counted wrong.
inline uint32_t scramble(uint64_t element, uint64_t rank) {
    uint64_t x = element * 0x9E3779B97F4A7C15ull + (rank + 1) * 0xD1B54A32D192ED03ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return static_cast<uint32_t>(x >> 32);
}

// What `rank` contributes at global element index `element` (the element's
// index in the whole, all-ranks buffer).
inline double inputValue(const Case &c, int rank, uint64_t element) {
    const double largest = info(c.dtype).largestExactInteger;
    // Values stay below 255 and below the type's largest value: the poison
    // written into outputs (all bits set) never equals a right answer.
    const double valueSpan = std::min(255.0, largest);
    if (!info(c.collective).reduces)
        return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(valueSpan);
    switch (c.op) {
    case RedOp::Sum: {
        // nranks values below the span must add up below the largest value.
        const double span = std::max(1.0, std::min(valueSpan, std::floor(largest / c.nranks)));
        return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(span);
    }
    case RedOp::Prod:
        // One rank per element contributes 1, 2 or 3, the others 1: the
        // product never overflows whatever the number of ranks.
        if (element % static_cast<uint64_t>(c.nranks) == static_cast<uint64_t>(rank))
            return 1 + scramble(element, 0) % 3;
        return 1;
    case RedOp::Min:
    case RedOp::Max:
        return scramble(element, static_cast<uint64_t>(rank)) % static_cast<uint32_t>(valueSpan);
    }
    return 0;
}

inline double reduceOverRanks(const Case &c, uint64_t element) {
    double acc = inputValue(c, 0, element);
    for (int r = 1; r < c.nranks; ++r) {
        const double v = inputValue(c, r, element);
        switch (c.op) {
        case RedOp::Sum:
            acc += v;
            break;
        case RedOp::Prod:
            acc *= v;
            break;
        case RedOp::Min:
            acc = std::min(acc, v);
            break;
        case RedOp::Max:
            acc = std::max(acc, v);
            break;
        }
    }
    return acc;
}

// The right value of output element `index` on this rank.
inline double expectedValue(const Case &c, uint64_t index) {
    switch (c.collective) {
    case Collective::AllReduce:
    case Collective::Reduce:
        return reduceOverRanks(c, index);
    case Collective::ReduceScatter:
        return reduceOverRanks(c, static_cast<uint64_t>(c.rank) * c.layout.recvCount + index);
    case Collective::AllGather:
        return inputValue(c, static_cast<int>(index / c.layout.sendCount), index);
    case Collective::Broadcast:
        return inputValue(c, c.root, index);
    }
    return 0;
}

// The two buffers of one row. `send` is the out-of-place input; `recv` is
// the out-of-place output and the in-place buffer (input and output).
template <typename T> struct Buffers {
    explicit Buffers(const Layout &layout) : send(layout.sendCount), recv(layout.bufferCount) {}
    std::vector<T> send;
    std::vector<T> recv;
};

// Writes this rank's input for `placement` and poisons every output element
// that is not also input, so an element the collective forgot is wrong.
template <typename T> void prepareInput(const Case &c, Placement placement, Buffers<T> &buffers) {
    std::memset(buffers.recv.data(), 0xFF, buffers.recv.size() * sizeof(T));
    T *input = placement == Placement::OutOfPlace
                   ? buffers.send.data()
                   : buffers.recv.data() + inPlaceInputOffset(c.collective, c.layout, c.rank);
    // Only allgather's input is one block of the global buffer.
    const uint64_t firstElement =
        c.collective == Collective::AllGather ? static_cast<uint64_t>(c.rank) * c.layout.sendCount : 0;
    for (size_t i = 0; i < c.layout.sendCount; ++i)
        input[i] = static_cast<T>(inputValue(c, c.rank, firstElement + i));
}

// Elements of this rank's output that differ bit for bit from the right
// result. Only reduce's root has an output.
template <typename T> uint64_t countWrong(const Case &c, const Buffers<T> &buffers) {
    if (c.collective == Collective::Reduce && c.rank != c.root)
        return 0;
    uint64_t wrong = 0;
    for (size_t i = 0; i < c.layout.recvCount; ++i) {
        const T expected = static_cast<T>(expectedValue(c, i));
        if (std::memcmp(&expected, &buffers.recv[i], sizeof(T)) != 0)
            ++wrong;
    }
    return wrong;
}

// ---------------------------------------------------------------------------
// Report in nccl-tests's format

// Formats v right-aligned in `width` characters with 2 decimals, or fewer
// when 2 do not fit, so that large values keep the columns aligned; below
// 1, with 3, as ccl-bench does (sweep.cpp, fmt_num).
inline std::string fitted(double v, int width) {
    char text[64];
    for (int decimals = v < 1 ? 3 : 2; decimals >= 0; --decimals) {
        std::snprintf(text, sizeof text, "%*.*f", width, decimals, v);
        if (static_cast<int>(std::strlen(text)) <= width)
            break;
    }
    return text;
}

// Prints on one rank only (construct with printing = rank == 0); every rank
// calls the same methods so the code reads the same everywhere.
class Report {
  public:
    explicit Report(bool printing) : printing_(printing) {}

    void begin(const std::string &toolLine, const Options &opts) {
        if (!printing_)
            return;
        std::printf("# %s\n", toolLine.c_str());
        std::printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
                    "validation: %d\n",
                    opts.minBytes, opts.maxBytes, opts.stepFactor > 1 ? opts.stepFactor : opts.stepBytes,
                    opts.stepFactor > 1 ? "factor" : "bytes", opts.warmupIters, opts.iters,
                    opts.check ? 1 : 0);
        std::printf("#\n");
        std::printf("#                                                              out-of-place"
                    "                       in-place\n");
        std::printf("#       size         count      type   redop    root"
                    "     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
        std::printf("#        (B)    (elements)                          "
                    "     (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n");
        std::fflush(stdout);
    }

    void beginRow(const Case &c) {
        const CollectiveInfo &coll = info(c.collective);
        if (printing_)
            std::printf("%12zu  %12zu  %8s  %6s  %6i", c.layout.totalBytes, c.layout.totalCount,
                        info(c.dtype).name, coll.reduces ? name(c.op) : "none", coll.rooted ? c.root : -1);
    }

    // seconds: average time of one call (the slowest rank's); wrong: summed
    // over ranks; checked: whether wrong means anything (-c 1).
    void group(const Case &c, double seconds, uint64_t wrong, bool checked) {
        const double algbw = seconds > 0 ? static_cast<double>(c.layout.totalBytes) / 1.0e9 / seconds : 0.0;
        const double busbw = algbw * busFactor(c.collective, c.nranks);
        busbwSum_ += busbw;
        ++groups_;
        wrongTotal_ += wrong;
        if (!printing_)
            return;
        std::printf("  %7s  %6s  %6s", fitted(seconds * 1.0e6, 7).c_str(), fitted(algbw, 6).c_str(),
                    fitted(busbw, 6).c_str());
        if (checked)
            std::printf("  %6g", static_cast<double>(wrong));
        else
            std::printf("  %6s", "N/A");
    }

    void endRow() {
        if (printing_) {
            std::printf("\n");
            std::fflush(stdout);
        }
    }

    // Prints the footer; returns the process exit status.
    int finish() {
        if (printing_) {
            std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrongTotal_),
                        wrongTotal_ == 0 ? "OK" : "FAILED");
            std::printf("# Avg bus bandwidth    : %g\n", groups_ > 0 ? busbwSum_ / groups_ : 0.0);
            std::printf("#\n");
            std::fflush(stdout);
        }
        return wrongTotal_ == 0 ? 0 : 1;
    }

  private:
    bool printing_;
    double busbwSum_ = 0;
    int groups_ = 0;
    uint64_t wrongTotal_ = 0;
};

} // namespace peer_bench
