#include "chrome_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace nnpccl::sim {

namespace {

// Real runs' traces (src/trace.cpp) put operations on tid 1000 + lane.
constexpr int kOperationsTid = 1000;

std::string quoted(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace

ChromeTrace::ChromeTrace(const std::string &path, std::string algorithm, OperationNames names)
    : path_(path), algorithm_(std::move(algorithm)), names_(std::move(names)) {
    out_ = std::fopen(path.c_str(), "w");
    if (out_ == nullptr) {
        open_errno_ = errno;
        return;
    }
    std::setvbuf(out_, nullptr, _IOFBF, 1 << 20);
    std::fputs("[\n", out_);
}

ChromeTrace::~ChromeTrace() {
    if (out_ != nullptr) std::fclose(out_);
}

Status ChromeTrace::opened() const {
    if (out_ == nullptr)
        return invalid_argument("--trace %s: cannot write it: %s", path_.c_str(), std::strerror(open_errno_));
    return Status::ok();
}

void ChromeTrace::event_separator() {
    if (!first_) std::fputs(",\n", out_);
    first_ = false;
}

void ChromeTrace::begin(int nranks) {
    ops_.assign(static_cast<size_t>(nranks), {});
    channel_tids_.assign(static_cast<size_t>(nranks), {});
    if (out_ == nullptr) return;
    for (int r = 0; r < nranks; ++r) {
        event_separator();
        std::fprintf(out_,
                     "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
                     "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n"
                     "{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"labels\":\"simulated\"}}",
                     r, r, r, r, r);
    }
}

void ChromeTrace::step(const StepEvent &e) {
    std::vector<Op> &ops = ops_[static_cast<size_t>(e.rank)];
    if (ops.size() <= static_cast<size_t>(e.op)) ops.resize(static_cast<size_t>(e.op) + 1);
    Op &op = ops[static_cast<size_t>(e.op)];
    op.end_us = std::max(op.end_us, e.end_us);
    ++op.steps;
    ++steps_;
    const int64_t tid = e.op == 0 ? e.channel : int64_t{1000} * (e.op + 1) + e.channel;
    std::vector<int64_t> &tids = channel_tids_[static_cast<size_t>(e.rank)];
    if (std::find(tids.begin(), tids.end(), tid) == tids.end()) tids.push_back(tid);
    if (out_ == nullptr) return;
    event_separator();
    const TraceOperation names = names_(e.rank, e.op);
    std::fprintf(out_,
                 "{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%lld,\"ts\":%.6f,\"dur\":%.6f,"
                 "\"args\":{\"op\":%s,\"step\":%zu,\"bytes\":%zu,\"recv\":%s,\"reduce\":%s,\"store\":%s,\"send\":%s",
                 trace_step_name(e.flags, e.bytes, e.recv_peer, e.send_peer).c_str(), e.rank,
                 static_cast<long long>(tid), e.ready_us, e.end_us - e.ready_us, quoted(names.short_name).c_str(),
                 e.step, e.bytes, (e.flags & kRecv) ? "true" : "false", (e.flags & kReduce) ? "true" : "false",
                 (e.flags & kStore) ? "true" : "false", (e.flags & kSend) ? "true" : "false");
    if (e.flags & kRecv) std::fprintf(out_, ",\"recv_peer\":%d", e.recv_peer);
    if (e.flags & kSend) std::fprintf(out_, ",\"send_peer\":%d", e.send_peer);
    const char *work = e.bytes == 0 ? "signal" : (e.flags & kReduce) ? "reduce" : "copy";
    std::fprintf(out_,
                 ",\"wait_us\":%.6f}},\n{\"name\":\"%s\",\"cat\":\"work\",\"ph\":\"X\",\"pid\":%d,\"tid\":%lld,"
                 "\"ts\":%.6f,\"dur\":%.6f}",
                 e.start_us - e.ready_us, work, e.rank, static_cast<long long>(tid), e.start_us, e.end_us - e.start_us);
}

Status ChromeTrace::finish() {
    if (out_ == nullptr) return opened();
    // Every rank's operations start together at 0 and end with their last step.
    for (size_t r = 0; r < ops_.size(); ++r) {
        for (size_t k = 0; k < ops_[r].size(); ++k) {
            const TraceOperation names = names_(static_cast<int>(r), static_cast<int>(k));
            const int tid = kOperationsTid + static_cast<int>(k);
            event_separator();
            std::fprintf(out_,
                         "{\"name\":%s,\"cat\":\"operation\",\"ph\":\"X\",\"pid\":%zu,\"tid\":%d,\"ts\":0,"
                         "\"dur\":%.6f,\"args\":{\"algorithm\":%s,\"bytes\":%zu,\"steps\":%zu}},\n"
                         "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%zu,\"tid\":%d,\"args\":{\"name\":"
                         "\"operations%s\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%zu,\"tid\":%d,"
                         "\"args\":{\"sort_index\":%d}}",
                         quoted(names.name).c_str(), r, tid, ops_[r][k].end_us, quoted(algorithm_).c_str(), names.bytes,
                         ops_[r][k].steps, r, tid, k == 0 ? "" : (", lane " + std::to_string(k + 1)).c_str(), r, tid,
                         static_cast<int>(k) * 100000);
        }
    }
    for (size_t r = 0; r < channel_tids_.size(); ++r)
        for (int64_t tid : channel_tids_[r]) {
            const int64_t lane = tid / 1000, channel = tid % 1000;
            const std::string name =
                "channel " + std::to_string(channel) + (lane == 0 ? "" : ", lane " + std::to_string(lane));
            event_separator();
            std::fprintf(out_,
                         "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%zu,\"tid\":%lld,\"args\":{\"name\":%s}},\n"
                         "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%zu,\"tid\":%lld,\"args\":{"
                         "\"sort_index\":%lld}}",
                         r, static_cast<long long>(tid), quoted(name).c_str(), r, static_cast<long long>(tid),
                         static_cast<long long>((lane == 0 ? 0 : lane - 1) * 100000 + 1 + channel));
        }
    std::fputs("\n]\n", out_);
    const bool failed = std::ferror(out_) != 0;
    const bool closed = std::fclose(out_) == 0;
    out_ = nullptr;
    if (failed || !closed) return system_error("--trace %s: writing it failed", path_.c_str());
    return Status::ok();
}

} // namespace nnpccl::sim
