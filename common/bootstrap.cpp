#include "bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "bootstrap_root.hpp"
#include "log.hpp"

namespace nnpccl {

namespace {

// The root's first frame must prove it holds the job secret; until it has,
// nothing it sends is read (a stranger at the root's address could
// otherwise end the job or make this rank allocate what its header says).
// A genuine welcome carries the challenge this rank must answer.
Status await_welcome(int fd, const UniqueId &id, const Hello &hello, const Deadline &deadline, const StopSignal *stop,
                     Nonce *challenge) {
    const std::string root = id.root.to_string();
    FrameHeader h{};
    Status st = recv_all(fd, &h, sizeof h, deadline, stop);
    if (st.code() == NNPCCL_ERR_TIMEOUT)
        return timeout_error("rank %u: the bootstrap root at %s did not answer its hello before the deadline",
                             hello.rank, root.c_str());
    if (stop != nullptr && stop->raised()) return st;
    if (!st)
        return Status(st.code(), format("rank %u: the process at %s closed the connection without welcoming it: "
                                        "it is not this job's bootstrap root (another job's, or the rank's unique id "
                                        "or NNPCCL_ROOT is not the job's), or it refused the hello (its log says why)",
                                        hello.rank, root.c_str()));
    if (h.magic != kFrameMagic || h.type != static_cast<uint32_t>(FrameType::Welcome) || h.length != sizeof(Welcome))
        return invalid_usage("rank %u: the process at %s answered its hello with something other than nnpccl's "
                             "welcome: it is not a bootstrap root of this nnpccl version",
                             hello.rank, root.c_str());
    std::string payload(sizeof(Welcome), '\0');
    NNPCCL_TRY(recv_all(fd, payload.data(), payload.size(), deadline, stop));
    if (!welcome_is_genuine(id.secret, hello, payload, challenge))
        return invalid_usage("rank %u: the process at %s that answered as the bootstrap root does not hold the "
                             "job's secret: it is another job's root or an impostor",
                             hello.rank, root.c_str());
    return Status::ok();
}

} // namespace

Status Bootstrap::join(const UniqueId &id, int rank, int nranks, const Deadline &deadline,
                       std::unique_ptr<Bootstrap> *out, const StopSignal *stop) {
    int fd = -1;
    Status st = connect_tcp(id.root, deadline, &fd, stop);
    if (!st && stop != nullptr && stop->raised()) return st;
    if (!st)
        return Status(st.code(), format("rank %d could not reach the bootstrap root at %s: %s", rank,
                                        id.root.to_string().c_str(), st.message().c_str()));
    Hello hello;
    st = make_hello(id.secret, rank, nranks, static_cast<uint32_t>(deadline.ms_left()), &hello);
    if (st) {
        std::string frame = encode_frame(FrameType::Hello, &hello, sizeof hello);
        st = send_all(fd, frame.data(), frame.size(), deadline, stop);
    }
    Nonce challenge{};
    if (st) st = await_welcome(fd, id, hello, deadline, stop, &challenge);
    if (st) {
        std::string answer = encode_answer(id.secret, hello, challenge);
        st = send_all(fd, answer.data(), answer.size(), deadline, stop);
    }
    if (!st) {
        close_fd(fd);
        return st;
    }
    out->reset(new Bootstrap(fd, rank, nranks, id.root.to_string(), stop, process_hosts_bootstrap_root(id.secret)));
    LOG_TRACE("joined the bootstrap root at %s as rank %d of %d", id.root.to_string().c_str(), rank, nranks);
    return Status::ok();
}

Bootstrap::~Bootstrap() { close_fd(fd_); }

Status Bootstrap::root_host_lost() const {
    if (root_host_ < 0 || root_host_ == rank_) return Status::ok();
    if (root_silent_)
        return remote_error("rank %d, whose process hosts the job's rendezvous root at %s, went silent: the "
                            "root's connection timed out (its host stopped answering: powered off, or the network "
                            "between cut)",
                            root_host_, root_name_.c_str());
    return remote_error("rank %d, whose process hosted the job's rendezvous root at %s, has gone: the root's "
                        "connection closed (the rank died, or left the job)",
                        root_host_, root_name_.c_str());
}

Status Bootstrap::check_job(bool between_calls) {
    if (root_gone_) return between_calls ? Status::ok() : root_host_lost();
    if (fd_ < 0) return Status::ok();
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return Status::ok();
    FrameHeader h{};
    ssize_t n = recv(fd_, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        root_silent_ = n < 0 && errno == ETIMEDOUT;
        root_gone_ = true;
        if (root_host_ < 0)
            LOG_INFO("the bootstrap root at %s has gone away; peers' failures are now seen only by the transports",
                     root_name_.c_str());
        return between_calls ? Status::ok() : root_host_lost();
    }
    if (n < static_cast<ssize_t>(sizeof h)) return Status::ok(); // the rest is on its way
    Deadline soon = Deadline::after_seconds(1);
    NNPCCL_TRY(recv_all(fd_, &h, sizeof h, soon));
    NNPCCL_TRY(check_frame_header(h, kMaxRankPayload));
    std::string payload(h.length, '\0');
    NNPCCL_TRY(recv_all(fd_, payload.data(), payload.size(), soon));
    if (h.type == static_cast<uint32_t>(FrameType::Error)) return decode_failure(payload);
    return invalid_usage("bootstrap root sent message type %u outside an allgather", h.type);
}

void Bootstrap::report_failure(const Status &why) {
    if (fd_ < 0 || root_gone_) return;
    std::string payload = encode_failure(why.code(), why.message().substr(0, 4096));
    std::string frame = encode_frame(FrameType::Failure, payload.data(), payload.size());
    (void)send_all(fd_, frame.data(), frame.size(), Deadline::after_seconds(1));
}

void Bootstrap::say_goodbye() {
    if (fd_ < 0 || root_gone_) return;
    std::string frame = encode_frame(FrameType::Goodbye, nullptr, 0);
    (void)send_all(fd_, frame.data(), frame.size(), Deadline::after_seconds(1));
}

Status Bootstrap::allgather(const std::string &mine, const Deadline &deadline, std::vector<std::string> *all) {
    if (mine.size() > kMaxRankPayload)
        return internal_error("bootstrap allgather part of %zu bytes exceeds %zu", mine.size(), kMaxRankPayload);
    std::string frame = encode_frame(FrameType::Gather, mine.data(), mine.size());
    NNPCCL_TRY(send_all(fd_, frame.data(), frame.size(), deadline, stop_));
    FrameHeader h{};
    Status st = recv_all(fd_, &h, sizeof h, deadline, stop_);
    if (st.code() == NNPCCL_ERR_TIMEOUT)
        return timeout_error("rank %d waited for the other ranks at the bootstrap root %s until the deadline; "
                             "some rank has not joined or has not reached the same point",
                             rank_, root_name_.c_str());
    if (st.code() == NNPCCL_ERR_REMOTE && !(stop_ != nullptr && stop_->raised()))
        return remote_error("rank %d lost the bootstrap root %s during set-up (%s): the process that hosts it (the "
                            "one that called nnpccl_get_unique_id, or rank 0 under nnpccl_comm_init_from_env) has "
                            "ended, aborted or stopped answering",
                            rank_, root_name_.c_str(), st.message().c_str());
    NNPCCL_TRY(st);
    const size_t limit = 4 + static_cast<size_t>(nranks_) * (4 + kMaxRankPayload);
    NNPCCL_TRY(check_frame_header(h, limit));
    // Grown as the bytes arrive, so a header that promises more than is
    // sent costs no more memory than what was sent.
    std::string payload;
    constexpr size_t kStep = size_t{1} << 20;
    while (payload.size() < h.length) {
        size_t had = payload.size();
        payload.resize(had + std::min<size_t>(kStep, h.length - had));
        NNPCCL_TRY(recv_all(fd_, payload.data() + had, payload.size() - had, deadline, stop_));
    }
    if (h.type == static_cast<uint32_t>(FrameType::Error)) {
        Status why = decode_failure(payload);
        return Status(why.code(), "the bootstrap root ended the job: " + why.message());
    }
    if (h.type != static_cast<uint32_t>(FrameType::GatherResult))
        return invalid_usage("bootstrap root sent message type %u where an allgather result was due", h.type);
    return decode_gather_result(payload, nranks_, all);
}

Status Bootstrap::barrier(const Deadline &deadline) {
    std::vector<std::string> ignored;
    return allgather(std::string(), deadline, &ignored);
}

} // namespace nnpccl
