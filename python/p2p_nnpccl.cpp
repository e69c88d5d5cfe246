// Point to point: send/recv with tags, receive from any source, and the
// send/recv form of alltoall.
//
// Pairing: nnpccl pairs the n-th send from rank a to rank b with the n-th
// receive on b from a. A torch send is two nnpccl sends, a header (the tag
// and the element count) and the tensor; a torch receive is the two
// matching receives. So sends and receives between two ranks pair in the
// order they are issued, whatever their tags, and a receive whose tag
// differs from its send's fails naming both (Gloo instead matches a receive
// with the first send of its tag: code that sends two tags to one peer and
// receives them in the other order works on Gloo, and fails here).
//
// A receive from any source learns its sender from the store: every send
// first leaves a notice (its tag) under a key naming sender, receiver and
// the send's number between them; the receiver looks for the notice of the
// next message from each peer, takes the first peer whose next message
// carries its tag, and deletes notices it has used. That costs a store
// round trip per send and per receive; NNPCCL_TORCH_ANY_SOURCE=0 (on every
// rank) turns notices off, and then a receive from any source raises.
#include "process_group_nnpccl.hpp"
#include "tensor_checks.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <thread>

namespace nnpccl_torch {

void ProcessGroupNnpccl::postAlltoallP2P(WorkNnpccl &work, const std::vector<const char *> &sendPtrs,
                                         const std::vector<char *> &recvPtrs, const std::vector<size_t> &sendCounts,
                                         const std::vector<size_t> &recvCounts, nnpccl_datatype_t dtype) {
    // Every rank posts all its sends and receives before waiting: nnpccl
    // progresses pending sends and receives together, so no order of peers
    // can deadlock.
    for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        nnpccl_request_t req = nullptr;
        post(work, nnpccl_isend(sendPtrs[peer], sendCounts[peer], dtype, peer, comm_, &req), req);
        post(work, nnpccl_irecv(recvPtrs[peer], recvCounts[peer], dtype, peer, comm_, &req), req);
    }
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::alltoall_base(at::Tensor &output, at::Tensor &input,
                                                                   std::vector<int64_t> &outputSplits,
                                                                   std::vector<int64_t> &inputSplits,
                                                                   const ::c10d::AllToAllOptions &) {
    nnpccl_datatype_t dtype = checkTensor(input, "the alltoall input");
    checkTensor(output, "the alltoall output");
    checkSameKind(output, input, "the alltoall output");
    auto work = makeWork(::c10d::OpType::ALLTOALL_BASE, "nnpccl:all_to_all", {output}, {input});
    work->keepAlive = {input};
    if (outputSplits.empty() && inputSplits.empty()) {
        TORCH_CHECK(input.numel() == output.numel(), "nnpccl backend: alltoall input and output differ in size (",
                    input.numel(), " and ", output.numel(), " elements)");
        TORCH_CHECK(input.dim() > 0 && input.size(0) % size_ == 0, "nnpccl backend: alltoall without splits needs ",
                    "a first dimension divisible by the group size ", size_);
        size_t block = count(input) / static_cast<size_t>(size_);
        return submit(work, [&] {
            nnpccl_request_t req = nullptr;
            post(*work, nnpccl_ialltoall(input.data_ptr(), output.data_ptr(), block, dtype, comm_, &req), req);
        });
    }
    TORCH_CHECK(input.dim() > 0 && output.dim() > 0, "nnpccl backend: alltoall with splits needs tensors ",
                "with a first dimension");
    TORCH_CHECK(input.data_ptr() != output.data_ptr() || input.numel() == 0,
                "nnpccl backend: alltoall with unequal splits cannot run in place");
    // Splits count rows of the first dimension; an empty list means equal.
    auto rows = [this](const std::vector<int64_t> &splits, const at::Tensor &t, const char *what) {
        std::vector<int64_t> r = splits;
        if (r.empty()) {
            TORCH_CHECK(t.size(0) % size_ == 0, "nnpccl backend: alltoall ", what, " has ", t.size(0),
                        " rows, not divisible by the group size ", size_, "; give its split sizes");
            r.assign(static_cast<size_t>(size_), t.size(0) / size_);
        }
        TORCH_CHECK(r.size() == static_cast<size_t>(size_), "nnpccl backend: alltoall ", what, " split sizes ",
                    "must have one entry per rank (", size_, "), got ", r.size());
        int64_t sum = 0;
        for (int64_t n : r) {
            TORCH_CHECK(n >= 0, "nnpccl backend: alltoall ", what, " split size ", n, " is negative");
            sum += n;
        }
        TORCH_CHECK(sum == t.size(0), "nnpccl backend: alltoall ", what, " split sizes add up to ", sum,
                    " but the tensor has ", t.size(0), " rows");
        return r;
    };
    std::vector<int64_t> inRows = rows(inputSplits, input, "input");
    std::vector<int64_t> outRows = rows(outputSplits, output, "output");
    // Splits count rows, so a row must hold as many elements on both sides.
    auto rowElems = [](const at::Tensor &t) { return t.numel() / std::max<int64_t>(t.size(0), 1); };
    int64_t inRowElems = input.size(0) == 0 ? rowElems(output) : rowElems(input);
    int64_t outRowElems = output.size(0) == 0 ? inRowElems : rowElems(output);
    TORCH_CHECK(inRowElems == outRowElems, "nnpccl backend: alltoall input rows hold ", inRowElems,
                " elements but output rows ", outRowElems);
    size_t item = input.element_size();
    std::vector<const char *> sendPtrs(static_cast<size_t>(size_));
    std::vector<char *> recvPtrs(static_cast<size_t>(size_));
    std::vector<size_t> sendCounts(static_cast<size_t>(size_)), recvCounts(static_cast<size_t>(size_));
    int64_t inOff = 0, outOff = 0;
    for (size_t p = 0; p < static_cast<size_t>(size_); ++p) {
        sendPtrs[p] = bytes(input) + static_cast<size_t>(inOff * inRowElems) * item;
        recvPtrs[p] = bytes(output) + static_cast<size_t>(outOff * outRowElems) * item;
        sendCounts[p] = static_cast<size_t>(inRows[p] * inRowElems);
        recvCounts[p] = static_cast<size_t>(outRows[p] * outRowElems);
        inOff += inRows[p];
        outOff += outRows[p];
    }
    size_t self = static_cast<size_t>(rank_);
    TORCH_CHECK(sendCounts[self] == recvCounts[self], "nnpccl backend: alltoall sends ", sendCounts[self],
                " elements to this rank itself but receives ", recvCounts[self]);
    std::copy(sendPtrs[self], sendPtrs[self] + sendCounts[self] * item, recvPtrs[self]);
    return submit(work, [&] { postAlltoallP2P(*work, sendPtrs, recvPtrs, sendCounts, recvCounts, dtype); });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::alltoall(std::vector<at::Tensor> &outputs,
                                                              std::vector<at::Tensor> &inputs,
                                                              const ::c10d::AllToAllOptions &) {
    size_t n = static_cast<size_t>(size_);
    TORCH_CHECK(inputs.size() == n && outputs.size() == n, "nnpccl backend: alltoall takes one input and one ",
                "output tensor per rank (", size_, "), got ", inputs.size(), " and ", outputs.size());
    nnpccl_datatype_t dtype = checkTensor(inputs[0], "an alltoall input");
    bool equal = true;
    for (size_t p = 0; p < n; ++p) {
        checkTensor(inputs[p], "an alltoall input");
        checkTensor(outputs[p], "an alltoall output");
        checkSameKind(inputs[p], inputs[0], "an alltoall input");
        checkSameKind(outputs[p], inputs[0], "an alltoall output");
        equal = equal && inputs[p].numel() == inputs[0].numel() && outputs[p].numel() == inputs[0].numel();
    }
    auto work = makeWork(::c10d::OpType::ALLTOALL, "nnpccl:all_to_all", outputs, inputs);
    if (equal) {
        at::Tensor in = flatten(inputs);
        at::Tensor out = at::empty_like(in);
        work->keepAlive = {in, out};
        std::vector<at::Tensor> list = outputs;
        work->copyOut = [out, list] { unflatten(out, list); };
        return submit(work, [&] {
            nnpccl_request_t req = nullptr;
            post(*work, nnpccl_ialltoall(in.data_ptr(), out.data_ptr(), count(inputs[0]), dtype, comm_, &req), req);
        });
    }
    std::vector<const char *> sendPtrs(n);
    std::vector<char *> recvPtrs(n);
    std::vector<size_t> sendCounts(n), recvCounts(n);
    for (size_t p = 0; p < n; ++p) {
        sendPtrs[p] = bytes(inputs[p]);
        recvPtrs[p] = bytes(outputs[p]);
        sendCounts[p] = count(inputs[p]);
        recvCounts[p] = count(outputs[p]);
    }
    size_t self = static_cast<size_t>(rank_);
    TORCH_CHECK(sendCounts[self] == recvCounts[self], "nnpccl backend: alltoall's tensors for this rank itself ",
                "differ in size (", sendCounts[self], " and ", recvCounts[self], " elements)");
    outputs[self].copy_(inputs[self]);
    work->keepAlive = inputs;
    return submit(work, [&] { postAlltoallP2P(*work, sendPtrs, recvPtrs, sendCounts, recvCounts, dtype); });
}

namespace {

at::Tensor header(int64_t tag, int64_t numel) {
    at::Tensor h = at::empty({2}, at::kLong);
    h.data_ptr<int64_t>()[0] = tag;
    h.data_ptr<int64_t>()[1] = numel;
    return h;
}

std::vector<uint8_t> encodeTag(int tag) {
    std::string text = std::to_string(tag);
    return std::vector<uint8_t>(text.begin(), text.end());
}

void checkPeer(int peer, int rank, int size, const char *what) {
    TORCH_CHECK(peer >= 0 && peer < size && peer != rank, "nnpccl backend: ", what, " rank ", peer,
                " is not another rank of this group (size ", size, ", this rank ", rank, ")");
}

} // namespace

std::string ProcessGroupNnpccl::noticeKey(int src, int dst, uint64_t seq) const {
    return keyPrefix_ + "p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(seq);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::send(std::vector<at::Tensor> &tensors, int dstRank, int tag) {
    const at::Tensor &t = single(tensors, "send");
    nnpccl_datatype_t dtype = checkTensor(t, "the sent tensor");
    checkPeer(dstRank, rank_, size_, "send: the destination");
    auto work = makeWork(::c10d::OpType::SEND, "nnpccl:send", tensors, tensors);
    at::Tensor h = header(tag, t.numel());
    work->keepAlive = {h};
    return submit(work, [&] {
        uint64_t seq = sentTo_[static_cast<size_t>(dstRank)];
        if (notices_) store_->set(noticeKey(rank_, dstRank, seq), encodeTag(tag));
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_isend(h.data_ptr(), 2, NNPCCL_INT64, dstRank, comm_, &req), req);
        post(*work, nnpccl_isend(t.data_ptr(), count(t), dtype, dstRank, comm_, &req), req);
        ++sentTo_[static_cast<size_t>(dstRank)];
    });
}

void ProcessGroupNnpccl::postRecv(const c10::intrusive_ptr<WorkNnpccl> &work, const at::Tensor &t, int src, int tag) {
    nnpccl_datatype_t dtype = toNnpccl(t.scalar_type());
    at::Tensor h = header(-1, -1);
    std::string key = noticeKey(src, rank_, receivedFrom_[static_cast<size_t>(src)]);
    nnpccl_request_t req = nullptr;
    post(*work, nnpccl_irecv(h.data_ptr(), 2, NNPCCL_INT64, src, comm_, &req), req);
    post(*work, nnpccl_irecv(t.data_ptr(), count(t), dtype, src, comm_, &req), req);
    ++receivedFrom_[static_cast<size_t>(src)];
    work->keepAlive.push_back(h);
    int rank = rank_;
    c10::intrusive_ptr<::c10d::Store> store = notices_ ? store_ : c10::intrusive_ptr<::c10d::Store>();
    work->copyOut = [h, tag, src, rank, store, key] {
        if (store) {
            // Housekeeping only: a store that has gone away costs nothing
            // here, and the message has arrived.
            try {
                store->deleteKey(key);
            } catch (const std::exception &) {
            }
        }
        int64_t sentTag = h.data_ptr<int64_t>()[0];
        TORCH_CHECK(sentTag == tag, "nnpccl backend: rank ", rank, " received from rank ", src,
                    " a message sent with tag ", sentTag, " by a recv for tag ", tag,
                    "; sends and receives between two ranks pair in the order they are issued, and their tags "
                    "must agree");
    };
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::recv(std::vector<at::Tensor> &tensors, int srcRank, int tag) {
    const at::Tensor &t = single(tensors, "recv");
    checkTensor(t, "the received tensor");
    checkPeer(srcRank, rank_, size_, "recv: the source");
    auto work = makeWork(::c10d::OpType::RECV, "nnpccl:recv", tensors, tensors);
    return submit(work, [&] { postRecv(work, t, srcRank, tag); });
}

int ProcessGroupNnpccl::findAnySource(int tag) {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    std::chrono::microseconds pause(100);
    for (;;) {
        for (int src = 0; src < size_; ++src) {
            if (src == rank_) continue;
            std::string key = noticeKey(src, rank_, receivedFrom_[static_cast<size_t>(src)]);
            if (store_->check({key}) && store_->get(key) == encodeTag(tag)) return src;
        }
        TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "nnpccl backend: no rank sent rank ", rank_,
                    " a message with tag ", tag, " for a receive from any source within the group's timeout (",
                    timeout_.count(), " ms)");
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
    }
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::recvAnysource(std::vector<at::Tensor> &tensors, int tag) {
    const at::Tensor &t = single(tensors, "recv");
    checkTensor(t, "the received tensor");
    TORCH_CHECK(notices_, "nnpccl backend: a receive from any source needs the notices that sends leave in the "
                          "store, which NNPCCL_TORCH_ANY_SOURCE=0 turned off");
    auto work = makeWork(::c10d::OpType::RECVANYSOURCE, "nnpccl:recvAnySource", tensors, tensors);
    return submit(work, [&] {
        int src = findAnySource(tag);
        work->source = src;
        postRecv(work, t, src, tag);
    });
}

} // namespace nnpccl_torch
