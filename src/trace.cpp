#include "trace.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string_view>
#include <unordered_map>

#include "collective.hpp"
#include "operation_descriptor.hpp"

namespace nnpccl {

namespace {

constexpr int64_t kOperationsTid = 1000;
// Lanes beyond the first: their operations on tid 1000 + lane, their
// channels on 1000 * (lane + 1) + channel.
constexpr uint32_t kMaxLanes = 999;

std::atomic<int> g_traced_communicators{0};

// A file descriptor closed when it goes out of scope.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// JSON text appended to a string; numbers by to_chars, since the steps of a
// long run make millions of events.
class Json {
public:
    explicit Json(std::string *out) : s_(*out) {}
    Json &raw(std::string_view text) {
        s_.append(text.data(), text.size());
        return *this;
    }
    Json &num(long long v) {
        char text[24];
        const auto r = std::to_chars(text, text + sizeof text, v);
        s_.append(text, r.ptr);
        return *this;
    }
    // Nanoseconds as microseconds, exactly: "12.345".
    Json &us(int64_t ns) {
        if (ns < 0) {
            s_ += '-';
            ns = -ns;
        }
        num(ns / 1000);
        const int f = static_cast<int>(ns % 1000);
        const char digits[4] = {'.', static_cast<char>('0' + f / 100), static_cast<char>('0' + f / 10 % 10),
                                static_cast<char>('0' + f % 10)};
        s_.append(digits, sizeof digits);
        return *this;
    }
    Json &str(std::string_view text) {
        s_ += '"';
        for (const char c : text) {
            if (c == '"' || c == '\\') {
                s_ += '\\';
                s_ += c;
            } else if (static_cast<unsigned char>(c) < 0x20) {
                char esc[8];
                std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
                s_ += esc;
            } else {
                s_ += c;
            }
        }
        s_ += '"';
        return *this;
    }

private:
    std::string &s_;
};

// "allreduce #12"; a send or recv also names its peer, since each pair
// numbers its own ("send #3 to rank 1").
std::string short_name(const OperationDescriptor &d) {
    const bool known = d.collective < std::size(kAllCollectives);
    const auto coll = static_cast<Collective>(d.collective);
    std::string text =
        format("%s #%llu", known ? collective_name(coll) : "operation", static_cast<unsigned long long>(d.sequence));
    if (known && coll == Collective::Send) text += format(" to rank %d", d.root);
    if (known && coll == Collective::Recv) text += format(" from rank %d", d.root);
    return text;
}

// Appends to the file at an offset through a buffer.
class FileWriter {
public:
    FileWriter(int fd, off_t at) : fd_(fd), at_(at) {}
    std::string buffer;
    // Writes the buffer out once it holds more than `keep` bytes.
    bool drain(size_t keep = 1 << 20) {
        if (buffer.size() <= keep) return true;
        size_t done = 0;
        while (done < buffer.size()) {
            const ssize_t n = ::pwrite(fd_, buffer.data() + done, buffer.size() - done, at_);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            done += static_cast<size_t>(n);
            at_ += n;
        }
        buffer.clear();
        return true;
    }
    off_t at() const { return at_; }

private:
    int fd_;
    off_t at_;
};

Status cannot_write(const std::string &path) {
    return invalid_argument("NNPCCL_TRACE=%s: cannot write the timeline there: %s", path.c_str(), std::strerror(errno));
}

} // namespace

TraceRecorder::TraceRecorder(std::string path, int rank, int communicator)
    : path_(std::move(path)), rank_(rank), communicator_(communicator) {}

TraceRecorder::~TraceRecorder() = default;

Status TraceRecorder::open(const std::string &path, int rank, std::shared_ptr<TraceRecorder> *out) {
    // No O_TRUNC: the file may already hold this job's other ranks' events.
    Fd file{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644)};
    if (file.fd < 0) return cannot_write(path);
    struct stat st;
    if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
        return invalid_argument("NNPCCL_TRACE=%s: not a regular file, so no timeline can be appended to it",
                                path.c_str());
    out->reset(new TraceRecorder(path, rank, g_traced_communicators.fetch_add(1)));
    return Status::ok();
}

Status TraceRecorder::start_file() {
    if (communicator_ != 0) return Status::ok();
    Fd file{::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644)};
    if (file.fd < 0) return cannot_write(path_);
    // Under the lock the writers take, though none writes before init ends.
    while (::flock(file.fd, LOCK_EX) != 0)
        if (errno != EINTR) return errno_error(format("NNPCCL_TRACE=%s: cannot lock it", path_.c_str()));
    static const char kEmpty[] = "[]\n";
    if (::ftruncate(file.fd, 0) != 0 || ::pwrite(file.fd, kEmpty, sizeof kEmpty - 1, 0) != sizeof kEmpty - 1)
        return errno_error(format("NNPCCL_TRACE=%s: cannot start the timeline", path_.c_str()));
    return Status::ok();
}

bool TraceRecorder::full() {
    if (steps_.size() + ops_.size() < kMaxEvents) return false;
    if (truncated_ns_ < 0) truncated_ns_ = trace_now_ns();
    return true;
}

uint32_t TraceRecorder::begin_operation(const OperationDescriptor &descriptor, const std::string &algorithm,
                                        uint64_t bytes, size_t steps, int64_t now_ns) {
    if (full()) return kNoOperation;
    // A handful of names, the last one used most often.
    size_t name = algorithms_.size();
    while (name > 0 && algorithms_[name - 1] != algorithm) --name;
    if (name == 0) {
        algorithms_.push_back(algorithm);
        name = algorithms_.size();
    }
    OpRecord &op = ops_.push();
    op.start_ns = now_ns;
    op.end_ns = -1;
    op.sequence = descriptor.sequence;
    op.count = descriptor.count;
    op.bytes = bytes;
    op.steps = steps;
    op.collective = descriptor.collective;
    op.datatype = descriptor.datatype;
    op.op = descriptor.op;
    op.root = descriptor.root;
    op.algorithm = static_cast<uint32_t>(name - 1);
    return static_cast<uint32_t>(ops_.size() - 1);
}

void TraceRecorder::end_operation(uint32_t op, int64_t now_ns) {
    if (op < ops_.size()) ops_[op].end_ns = now_ns;
}

void TraceRecorder::step(uint32_t op, int channel, size_t index, const Step &s, size_t bytes, int64_t ready_ns,
                         int64_t start_ns, int64_t end_ns) {
    if (op == kNoOperation || full()) return;
    StepRecord &r = steps_.push();
    r.ready_ns = ready_ns;
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.bytes = bytes;
    r.op = op;
    r.index = static_cast<uint32_t>(index);
    r.recv_peer = s.recv_peer;
    r.send_peer = s.send_peer;
    r.channel = static_cast<uint16_t>(channel);
    r.flags = s.flags;
}

// Writes one recorder's events into the job's file, under the flock the
// ranks take in turn: where they go, the lanes that overlapping operations
// take, then the events, metadata first.
class TraceFile {
public:
    TraceFile(const TraceRecorder &recorder, int64_t now_ns) : r_(recorder), now_(now_ns) {}
    Status write();

private:
    using StepRecord = TraceRecorder::StepRecord;
    using OpRecord = TraceRecorder::OpRecord;

    Status fail(const char *what) const {
        return errno_error(format("NNPCCL_TRACE=%s: rank %d cannot %s", r_.path_.c_str(), r_.rank_, what));
    }
    // Where this rank's events go: over the array's closing bracket, or at
    // the start of an empty file; and what opens them there.
    Status find_append_point(int fd, off_t *at, const char **opening) const;
    void assign_lanes();
    int64_t step_tid(uint32_t lane, size_t channel) const {
        return lane == 0 ? static_cast<int64_t>(channel) : int64_t{1000} * (lane + 1) + static_cast<int64_t>(channel);
    }
    void write_process(Json &j) const;
    bool write_operations(Json &j, FileWriter &out);
    void write_step(Json &j, const StepRecord &s, const std::string &size);
    bool write_steps(Json &j, FileWriter &out);
    void write_threads(Json &j) const;

    const TraceRecorder &r_;
    const int64_t now_;
    std::vector<uint32_t> lane_; // per operation
    uint32_t lanes_ = 1;
    std::string pid_field_;               // ,"pid":N
    std::vector<std::string> op_names_;   // quoted short names, for the steps
    std::vector<std::vector<bool>> used_; // per lane, the channels its steps ran on
};

Status TraceFile::find_append_point(int fd, off_t *at, const char **opening) const {
    const off_t size = ::lseek(fd, 0, SEEK_END);
    if (size < 0) return fail("find its end");
    *at = 0;
    *opening = "[\n";
    if (size == 0) return Status::ok();
    char tail[256];
    const off_t from = std::max<off_t>(0, size - static_cast<off_t>(sizeof tail));
    const ssize_t n = ::pread(fd, tail, static_cast<size_t>(size - from), from);
    if (n != size - from) return fail("read its end");
    const auto space = [&tail](ssize_t k) {
        return tail[k] == ' ' || tail[k] == '\n' || tail[k] == '\t' || tail[k] == '\r';
    };
    ssize_t i = n - 1; // the closing bracket
    while (i >= 0 && space(i)) --i;
    ssize_t j = i - 1; // what it closes: the last event, or the opening bracket
    while (j >= 0 && space(j)) --j;
    if (i < 0 || tail[i] != ']' || j < 0 || (tail[j] != '[' && tail[j] != '}'))
        return invalid_usage("NNPCCL_TRACE=%s: rank %d cannot append its timeline: the file does not end in a "
                             "JSON array of events, so something other than this job wrote it",
                             r_.path_.c_str(), r_.rank_);
    *at = from + i;
    *opening = tail[j] == '[' ? "\n" : ",\n";
    return Status::ok();
}

// Lanes: operations that overlapped in time (sends and receives running
// side by side) each go to the lowest lane free at their start.
void TraceFile::assign_lanes() {
    const auto &ops = r_.ops_;
    lane_.assign(ops.size(), 0);
    std::vector<uint32_t> order(ops.size());
    for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&ops](uint32_t a, uint32_t b) { return ops[a].start_ns < ops[b].start_ns; });
    std::vector<int64_t> lane_free; // when each lane's last operation ended
    for (uint32_t k : order) {
        const int64_t end = ops[k].end_ns >= 0 ? ops[k].end_ns : now_;
        size_t l = 0;
        while (l < lane_free.size() && l + 1 < kMaxLanes && lane_free[l] > ops[k].start_ns) ++l;
        if (l == lane_free.size()) lane_free.push_back(end);
        lane_free[l] = std::max(lane_free[l], end);
        lane_[k] = static_cast<uint32_t>(l);
    }
    for (uint32_t l : lane_) lanes_ = std::max(lanes_, l + 1);
}

// Metadata: the process, sorted by rank.
void TraceFile::write_process(Json &j) const {
    std::string process = "rank " + std::to_string(r_.rank_);
    if (r_.communicator_ > 0) process += ", communicator " + std::to_string(r_.communicator_ + 1);
    j.raw("{\"name\":\"process_name\",\"ph\":\"M\"").raw(pid_field_).raw(",\"args\":{\"name\":").str(process).raw("}}");
    j.raw(",\n{\"name\":\"process_sort_index\",\"ph\":\"M\"").raw(pid_field_).raw(",\"args\":{\"sort_index\":");
    j.num(static_cast<long long>(r_.communicator_) * 1000000 + r_.rank_).raw("}}");
}

bool TraceFile::write_operations(Json &j, FileWriter &out) {
    op_names_.assign(r_.ops_.size(), std::string());
    for (size_t k = 0; k < r_.ops_.size(); ++k) {
        const OpRecord &op = r_.ops_[k];
        OperationDescriptor d;
        d.collective = op.collective;
        d.sequence = op.sequence;
        d.count = op.count;
        d.datatype = op.datatype;
        d.op = op.op;
        d.root = op.root;
        Json(&op_names_[k]).str(short_name(d));
        const bool finished = op.end_ns >= 0;
        j.raw(",\n{\"name\":").str(describe(d)).raw(",\"cat\":\"operation\",\"ph\":\"X\"").raw(pid_field_);
        j.raw(",\"tid\":").num(kOperationsTid + lane_[k]).raw(",\"ts\":").us(op.start_ns);
        j.raw(",\"dur\":").us((finished ? op.end_ns : now_) - op.start_ns);
        j.raw(",\"args\":{\"algorithm\":")
            .str(r_.algorithms_[op.algorithm])
            .raw(",\"bytes\":")
            .num(static_cast<long long>(op.bytes));
        j.raw(",\"steps\":").num(static_cast<long long>(op.steps));
        if (!finished) j.raw(",\"unfinished\":true");
        j.raw("}}");
        if (!out.drain()) return false;
    }
    return true;
}

// A step's event and, nested in it, its work after the wait.
void TraceFile::write_step(Json &j, const StepRecord &s, const std::string &size) {
    const uint32_t l = lane_[s.op];
    if (used_[l].size() <= s.channel) used_[l].resize(s.channel + size_t{1}, false);
    used_[l][s.channel] = true;
    const int64_t tid = step_tid(l, s.channel);
    j.raw(",\n{\"name\":\"").raw(step_verb(s.flags)).raw(size);
    if ((s.flags & kRecv) != 0) j.raw(" from ").num(s.recv_peer);
    if ((s.flags & kSend) != 0) j.raw(" to ").num(s.send_peer);
    j.raw("\",\"cat\":\"step\",\"ph\":\"X\"").raw(pid_field_).raw(",\"tid\":").num(tid);
    j.raw(",\"ts\":").us(s.ready_ns).raw(",\"dur\":").us(s.end_ns - s.ready_ns);
    j.raw(",\"args\":{\"op\":").raw(op_names_[s.op]).raw(",\"step\":").num(s.index);
    j.raw(",\"bytes\":").num(static_cast<long long>(s.bytes));
    if ((s.flags & kRecv) != 0) j.raw(",\"recv_peer\":").num(s.recv_peer);
    if ((s.flags & kSend) != 0) j.raw(",\"send_peer\":").num(s.send_peer);
    j.raw(",\"wait_us\":").us(s.start_ns - s.ready_ns).raw("}}");
    const char *work = s.bytes == 0 ? "signal" : (s.flags & kReduce) != 0 ? "reduce" : "copy";
    j.raw(",\n{\"name\":\"").raw(work).raw("\",\"cat\":\"work\",\"ph\":\"X\"").raw(pid_field_);
    j.raw(",\"tid\":").num(tid).raw(",\"ts\":").us(s.start_ns).raw(",\"dur\":").us(s.end_ns - s.start_ns).raw("}");
}

// The steps, the bulk of the file, then where the recording stopped if it did.
bool TraceFile::write_steps(Json &j, FileWriter &out) {
    used_.assign(lanes_, std::vector<bool>());
    std::unordered_map<uint64_t, std::string> sizes; // " 1.0 MiB"
    for (size_t i = 0; i < r_.steps_.size(); ++i) {
        const StepRecord &s = r_.steps_[i];
        auto size = sizes.find(s.bytes);
        if (size == sizes.end()) size = sizes.emplace(s.bytes, " " + trace_size(s.bytes)).first;
        write_step(j, s, size->second);
        if (!out.drain()) return false;
    }
    if (r_.truncated_ns_ >= 0) {
        j.raw(",\n{\"name\":\"trace truncated\",\"cat\":\"trace\",\"ph\":\"i\",\"s\":\"p\"").raw(pid_field_);
        j.raw(",\"tid\":").num(kOperationsTid).raw(",\"ts\":").us(r_.truncated_ns_);
        j.raw(",\"args\":{\"events\":").num(static_cast<long long>(TraceRecorder::kMaxEvents)).raw("}}");
    }
    return true;
}

// The threads' names, sorted top to bottom: each lane's operations, then its channels.
void TraceFile::write_threads(Json &j) const {
    const auto thread = [&](int64_t tid, const std::string &name, long long sort_index) {
        j.raw(",\n{\"name\":\"thread_name\",\"ph\":\"M\"").raw(pid_field_).raw(",\"tid\":").num(tid);
        j.raw(",\"args\":{\"name\":").str(name).raw("}}");
        j.raw(",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\"").raw(pid_field_).raw(",\"tid\":").num(tid);
        j.raw(",\"args\":{\"sort_index\":").num(sort_index).raw("}}");
    };
    for (uint32_t l = 0; l < lanes_; ++l) {
        const std::string in_lane = l == 0 ? "" : ", lane " + std::to_string(l + 1);
        const long long base = 100000LL * l;
        thread(kOperationsTid + l, "operations" + in_lane, base);
        for (size_t c = 0; c < used_[l].size(); ++c)
            if (used_[l][c])
                thread(step_tid(l, c), "channel " + std::to_string(c) + in_lane, base + 1 + static_cast<long long>(c));
    }
}

Status TraceFile::write() {
    Fd file{::open(r_.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644)};
    if (file.fd < 0) return fail("open it to write its timeline");
    while (::flock(file.fd, LOCK_EX) != 0)
        if (errno != EINTR) return fail("lock it");
    off_t at = 0;
    const char *opening = nullptr;
    NNPCCL_TRY(find_append_point(file.fd, &at, &opening));
    assign_lanes();
    Json(&pid_field_).raw(",\"pid\":").num(static_cast<long long>(r_.communicator_) * 1000000 + r_.rank_);
    FileWriter out(file.fd, at);
    Json j(&out.buffer);
    j.raw(opening);
    write_process(j);
    if (!write_operations(j, out) || !write_steps(j, out)) return fail("write its timeline");
    write_threads(j);
    j.raw("\n]\n");
    if (!out.drain(0)) return fail("write its timeline");
    if (::ftruncate(file.fd, out.at()) != 0) return fail("end its timeline");
    return Status::ok();
}

Status TraceRecorder::write() {
    if (written_) return Status::ok();
    written_ = true;
    return TraceFile(*this, trace_now_ns()).write();
}

} // namespace nnpccl
