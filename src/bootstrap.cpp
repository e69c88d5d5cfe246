#include "bootstrap.hpp"

#include "log.hpp"

namespace nnpccl {

Status Bootstrap::join(const UniqueId &id, int rank, int nranks, const Deadline &deadline,
                       std::unique_ptr<Bootstrap> *out) {
    int fd = -1;
    Status st = connect_tcp(id.root, deadline, &fd);
    if (!st)
        return Status(st.code(), format("rank %d could not reach the bootstrap root at %s: %s", rank,
                                        id.root.to_string().c_str(), st.message().c_str()));
    Hello hello{id.secret, static_cast<uint32_t>(rank), static_cast<uint32_t>(nranks)};
    std::string frame = encode_frame(FrameType::Hello, &hello, sizeof hello);
    st = send_all(fd, frame.data(), frame.size(), deadline);
    if (!st) {
        close_fd(fd);
        return st;
    }
    out->reset(new Bootstrap(fd, rank, nranks, id.root.to_string()));
    LOG_TRACE("joined the bootstrap root at %s as rank %d of %d", id.root.to_string().c_str(), rank, nranks);
    return Status::ok();
}

Bootstrap::~Bootstrap() { close_fd(fd_); }

Status Bootstrap::allgather(const std::string &mine, const Deadline &deadline, std::vector<std::string> *all) {
    if (mine.size() > kMaxRankPayload)
        return internal_error("bootstrap allgather part of %zu bytes exceeds %zu", mine.size(), kMaxRankPayload);
    std::string frame = encode_frame(FrameType::Gather, mine.data(), mine.size());
    NNPCCL_TRY(send_all(fd_, frame.data(), frame.size(), deadline));
    FrameHeader h{};
    Status st = recv_all(fd_, &h, sizeof h, deadline);
    if (st.code() == NNPCCL_ERR_TIMEOUT)
        return timeout_error("rank %d waited for the other ranks at the bootstrap root %s until the deadline; "
                             "some rank has not joined or has not reached the same point",
                             rank_, root_name_.c_str());
    NNPCCL_TRY(st);
    const size_t limit = 4 + static_cast<size_t>(nranks_) * (4 + kMaxRankPayload);
    NNPCCL_TRY(check_frame_header(h, limit));
    std::string payload(h.length, '\0');
    NNPCCL_TRY(recv_all(fd_, payload.data(), payload.size(), deadline));
    if (h.type == static_cast<uint32_t>(FrameType::Error))
        return remote_error("the bootstrap root ended the job: %s", payload.c_str());
    if (h.type != static_cast<uint32_t>(FrameType::GatherResult))
        return invalid_usage("bootstrap root sent message type %u where an allgather result was due", h.type);
    return decode_gather_result(payload, nranks_, all);
}

Status Bootstrap::barrier(const Deadline &deadline) {
    std::vector<std::string> ignored;
    return allgather(std::string(), deadline, &ignored);
}

} // namespace nnpccl
