#include "init_wire.hpp"

#include <cmath>
#include <cstring>
#include <utility>

#include "bootstrap_wire.hpp"
#include "shared_memory.hpp"

namespace nnpccl {

namespace {

constexpr uint32_t kInitMagic = 0x49504e4e; // "NNPI" in memory on a little-endian host
constexpr uint8_t kInitVersion = 1;
// Bounds that no record of a real job comes near; the allgather's own
// limit on a rank's part (kMaxRankPayload) bounds the rest.
constexpr uint32_t kMaxSettings = 64;
constexpr uint32_t kMaxNameBytes = 64;
constexpr uint32_t kMaxTransportBytes = 16;
constexpr uint32_t kMaxTextBytes = kMaxRankPayload;

const char *kind_name(InitRecordKind kind) {
    switch (kind) {
    case InitRecordKind::Host: return "host record";
    case InitRecordKind::Planning: return "planning record";
    case InitRecordKind::LinkSpeed: return "link speed record";
    case InitRecordKind::LinkTable: return "link table record";
    case InitRecordKind::NetworkChoice: return "network choice record";
    }
    return "init record";
}

class Writer {
public:
    explicit Writer(InitRecordKind kind) {
        u32(kInitMagic);
        u8(static_cast<uint8_t>(kind));
        u8(kInitVersion);
    }
    void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u32(uint32_t v) { out_.append(reinterpret_cast<const char *>(&v), sizeof v); }
    void f64(double v) { out_.append(reinterpret_cast<const char *>(&v), sizeof v); }
    void flag(bool v) { u8(v ? 1 : 0); }
    void text(const std::string &s) {
        u32(static_cast<uint32_t>(s.size()));
        out_.append(s);
    }
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

// Reads fields in order, checking each against what is left. After the
// first failure every read fails and leaves its output alone; the first
// failure is the one reported.
class Reader {
public:
    Reader(const std::string &bytes, InitRecordKind kind) : bytes_(bytes), kind_(kind) {
        uint32_t magic = 0;
        uint8_t got_kind = 0, version = 0;
        if (!take(&magic, sizeof magic, "its magic number")) return;
        if (magic != kInitMagic) {
            fail(format("does not start with the init records' magic number (0x%08x); every rank needs the same "
                        "nnpccl",
                        magic));
            return;
        }
        if (!take(&got_kind, 1, "its kind") || !take(&version, 1, "its version")) return;
        if (got_kind != static_cast<uint8_t>(kind)) {
            fail(format("is of kind %u, not a %s", got_kind, kind_name(kind)));
        } else if (version != kInitVersion) {
            fail(format("is of version %u, where this nnpccl reads version %u; every rank needs the same nnpccl",
                        version, kInitVersion));
        }
    }

    bool u8(uint8_t *v, const char *what) { return take(v, sizeof *v, what); }
    bool u32(uint32_t *v, const char *what) { return take(v, sizeof *v, what); }
    bool f64(double *v, const char *what) { return take(v, sizeof *v, what); }
    bool flag(bool *v, const char *what) {
        uint8_t b = 0;
        if (!u8(&b, what)) return false;
        if (b > 1) return fail(format("has %u as %s, which is 0 or 1", b, what));
        *v = b == 1;
        return true;
    }
    // A string of at most `max_bytes`, holding none of `banned` (nor NUL).
    bool text(std::string *s, uint32_t max_bytes, const char *banned, const char *what) {
        uint32_t length = 0;
        if (!u32(&length, what)) return false;
        if (length > max_bytes)
            return fail(format("gives %s %u bytes, more than the %u it may have", what, length, max_bytes));
        if (length > left()) return fail(format("is truncated in %s (%u bytes, %zu left)", what, length, left()));
        const char *begin = bytes_.data() + at_;
        if (std::memchr(begin, '\0', length) != nullptr) return fail(format("has a NUL byte in %s", what));
        for (const char *c = banned; *c != '\0'; ++c)
            if (std::memchr(begin, *c, length) != nullptr)
                return fail(format("has a %s in %s", *c == '\n' ? "newline" : "'='", what));
        s->assign(begin, length);
        at_ += length;
        return true;
    }
    bool fail(const std::string &why) {
        if (failure_.empty()) failure_ = why;
        return false;
    }
    bool ok() const { return failure_.empty(); }
    // The outcome, once every field is read: nothing may follow them.
    Status finish() {
        if (ok() && at_ != bytes_.size()) fail(format("has %zu bytes after its last field", bytes_.size() - at_));
        if (ok()) return Status::ok();
        return invalid_usage("%s %s", kind_name(kind_), failure_.c_str());
    }

private:
    size_t left() const { return bytes_.size() - at_; }
    bool take(void *out, size_t n, const char *what) {
        if (!ok()) return false;
        if (left() < n) return fail(format("is truncated in %s (%zu bytes, %zu left)", what, n, left()));
        std::memcpy(out, bytes_.data() + at_, n);
        at_ += n;
        return true;
    }

    const std::string &bytes_;
    InitRecordKind kind_;
    size_t at_ = 0;
    std::string failure_;
};

bool finite_at_least_zero(double v) { return std::isfinite(v) && v >= 0; }

void decode_tuning_file(Reader &in, TuningFileEntry *out) {
    uint8_t kind = 0;
    if (!in.u8(&kind, "its tuning file's kind")) return;
    switch (static_cast<TuningFileEntry::Kind>(kind)) {
    case TuningFileEntry::Kind::None: break;
    case TuningFileEntry::Kind::File:
        if (in.text(&out->path, kMaxTextBytes, "", "its tuning file's path") && out->path.empty())
            in.fail("names a tuning file with an empty path");
        in.text(&out->text, kMaxTextBytes, "", "its tuning file's text");
        break;
    case TuningFileEntry::Kind::Unreadable:
        if (in.text(&out->text, kMaxTextBytes, "", "why its tuning file is unreadable") && out->text.empty())
            in.fail("says its tuning file is unreadable without saying why");
        break;
    default: in.fail(format("has an unknown tuning file kind %u", kind)); return;
    }
    out->kind = static_cast<TuningFileEntry::Kind>(kind);
}

} // namespace

const char *network_name(NetworkChoiceRecord::Network network) {
    return network == NetworkChoiceRecord::Network::Ofi ? "ofi" : "socket";
}

std::string encode_host_record(const HostRecord &record) {
    Writer out(InitRecordKind::Host);
    out.text(record.transport);
    out.flag(record.process_hosts_root);
    out.text(record.host);
    out.u32(static_cast<uint32_t>(record.shared_settings.size()));
    for (const NamedSetting &s : record.shared_settings) {
        out.text(s.name);
        out.text(s.value);
    }
    return out.take();
}

Status decode_host_record(const std::string &bytes, HostRecord *out) {
    HostRecord record;
    Reader in(bytes, InitRecordKind::Host);
    if (in.text(&record.transport, kMaxTransportBytes, "\n=", "its transport mode") && record.transport.empty())
        in.fail("names no transport mode");
    in.flag(&record.process_hosts_root, "whether its process hosts the root");
    if (in.text(&record.host, kMaxTextBytes, "\n", "its host") && record.host.empty()) in.fail("names no host");
    uint32_t count = 0;
    if (in.u32(&count, "its count of settings") && count > kMaxSettings)
        in.fail(format("holds %u settings, more than the %u it may", count, kMaxSettings));
    for (uint32_t i = 0; i < count && in.ok(); ++i) {
        NamedSetting s;
        if (in.text(&s.name, kMaxNameBytes, "\n=", "a setting's name") && s.name.empty())
            in.fail("has a setting without a name");
        in.text(&s.value, kMaxTextBytes, "\n", "a setting's value");
        record.shared_settings.push_back(std::move(s));
    }
    NNPCCL_TRY(in.finish());
    *out = std::move(record);
    return Status::ok();
}

std::string encode_planning_record(const PlanningRecord &record) {
    Writer out(InitRecordKind::Planning);
    out.f64(record.ranks_per_core);
    out.flag(record.host_over_network);
    out.flag(record.has_root_part);
    if (!record.has_root_part) return out.take();
    out.flag(record.tune);
    if (record.tune)
        for (double v : record.reduce_us_per_byte) out.f64(v);
    const TuningFileEntry &file = record.tuning_file;
    out.u8(static_cast<uint8_t>(file.kind));
    if (file.kind == TuningFileEntry::Kind::File) out.text(file.path);
    if (file.kind != TuningFileEntry::Kind::None) out.text(file.text);
    return out.take();
}

Status decode_planning_record(const std::string &bytes, PlanningRecord *out) {
    PlanningRecord record;
    Reader in(bytes, InitRecordKind::Planning);
    if (in.f64(&record.ranks_per_core, "its ranks per core") &&
        !(std::isfinite(record.ranks_per_core) && record.ranks_per_core > 0))
        in.fail(format("gives %g ranks per core, where a positive number is due", record.ranks_per_core));
    in.flag(&record.host_over_network, "whether its host's ranks talk over the network");
    in.flag(&record.has_root_part, "whether rank 0's part follows");
    if (record.has_root_part) {
        in.flag(&record.tune, "rank 0's NNPCCL_TUNE");
        if (record.tune)
            for (double &v : record.reduce_us_per_byte)
                if (in.f64(&v, "a reduction speed") && !finite_at_least_zero(v))
                    in.fail(format("gives a reduction speed of %g us per byte", v));
        decode_tuning_file(in, &record.tuning_file);
    }
    NNPCCL_TRY(in.finish());
    *out = std::move(record);
    return Status::ok();
}

std::string encode_link_speed_record(const LinkSpeedRecord &record) {
    Writer out(InitRecordKind::LinkSpeed);
    out.f64(record.reported_gbps);
    return out.take();
}

Status decode_link_speed_record(const std::string &bytes, LinkSpeedRecord *out) {
    LinkSpeedRecord record;
    Reader in(bytes, InitRecordKind::LinkSpeed);
    if (in.f64(&record.reported_gbps, "its link speed") && !finite_at_least_zero(record.reported_gbps))
        in.fail(format("gives a link speed of %g GB/s", record.reported_gbps));
    NNPCCL_TRY(in.finish());
    *out = record;
    return Status::ok();
}

std::string encode_link_table_record(const LinkTableRecord &record) {
    Writer out(InitRecordKind::LinkTable);
    out.text(record.region);
    return out.take();
}

Status decode_link_table_record(const std::string &bytes, LinkTableRecord *out) {
    LinkTableRecord record;
    Reader in(bytes, InitRecordKind::LinkTable);
    long pid = 0, fd = 0;
    if (in.text(&record.region, kMaxNameBytes, "", "its table's announcement") && !record.region.empty() &&
        !parse_pid_fd(record.region, &pid, &fd))
        in.fail("announces its table as '" + record.region + "', not 'PID FD'");
    NNPCCL_TRY(in.finish());
    *out = std::move(record);
    return Status::ok();
}

std::string encode_network_choice_record(const NetworkChoiceRecord &record) {
    Writer out(InitRecordKind::NetworkChoice);
    out.u8(static_cast<uint8_t>(record.network));
    out.flag(record.asked);
    return out.take();
}

Status decode_network_choice_record(const std::string &bytes, NetworkChoiceRecord *out) {
    NetworkChoiceRecord record;
    Reader in(bytes, InitRecordKind::NetworkChoice);
    uint8_t network = 0;
    if (in.u8(&network, "its network transport")) {
        if (network == static_cast<uint8_t>(NetworkChoiceRecord::Network::Socket) ||
            network == static_cast<uint8_t>(NetworkChoiceRecord::Network::Ofi))
            record.network = static_cast<NetworkChoiceRecord::Network>(network);
        else
            in.fail(format("names an unknown network transport %u", network));
    }
    in.flag(&record.asked, "whether NNPCCL_NET_TRANSPORT asked for it");
    NNPCCL_TRY(in.finish());
    *out = record;
    return Status::ok();
}

} // namespace nnpccl
