#include "process_group_nnpccl.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace nnpccl_torch {

namespace {

const char *const kSupportedDtypes =
    "torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, "
    "torch.int32, torch.int64";

// torch's Python spelling, which is what users wrote.
std::string dtypeName(at::ScalarType type) {
    switch (type) {
    case at::kBool: return "torch.bool";
    case at::kShort: return "torch.int16";
    case at::kComplexHalf: return "torch.complex32";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(type);
    }
}

nnpccl_datatype_t toNnpccl(at::ScalarType type) {
    switch (type) {
    case at::kFloat: return NNPCCL_FLOAT32;
    case at::kDouble: return NNPCCL_FLOAT64;
    case at::kHalf: return NNPCCL_FLOAT16;
    case at::kBFloat16: return NNPCCL_BFLOAT16;
    case at::kChar: return NNPCCL_INT8;
    case at::kByte: return NNPCCL_UINT8;
    case at::kInt: return NNPCCL_INT32;
    case at::kLong: return NNPCCL_INT64;
    default:
        TORCH_CHECK(false, "nnpccl backend does not support tensors of dtype ", dtypeName(type),
                    " (supported: ", kSupportedDtypes, ")");
    }
}

const char *redopName(::c10d::ReduceOp::RedOpType op) {
    switch (op) {
    case ::c10d::ReduceOp::BAND: return "BAND";
    case ::c10d::ReduceOp::BOR: return "BOR";
    case ::c10d::ReduceOp::BXOR: return "BXOR";
    case ::c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
    }
}

nnpccl_redop_t toNnpccl(const ::c10d::ReduceOp &op) {
    switch (op.op_) {
    case ::c10d::ReduceOp::SUM: return NNPCCL_SUM;
    case ::c10d::ReduceOp::PRODUCT: return NNPCCL_PROD;
    case ::c10d::ReduceOp::MIN: return NNPCCL_MIN;
    case ::c10d::ReduceOp::MAX: return NNPCCL_MAX;
    case ::c10d::ReduceOp::AVG: return NNPCCL_AVG;
    default:
        TORCH_CHECK(false, "nnpccl backend does not support ReduceOp.", redopName(op.op_),
                    " (supported: SUM, PRODUCT, MIN, MAX, AVG)");
    }
}

// Every tensor handed to nnpccl: host memory the library may address as one
// block of elements of a supported type.
nnpccl_datatype_t checkTensor(const at::Tensor &t, const char *what) {
    TORCH_CHECK(t.defined(), "nnpccl backend: ", what, " is an undefined tensor");
    TORCH_CHECK(t.device().is_cpu(), "nnpccl backend: ", what, " is on device ", t.device().str(),
                "; only CPU tensors are supported");
    TORCH_CHECK(t.layout() == at::kStrided, "nnpccl backend: ", what,
                " is not a dense (strided) tensor; sparse tensors are not supported");
    nnpccl_datatype_t dtype = toNnpccl(t.scalar_type());
    TORCH_CHECK(t.is_contiguous(), "nnpccl backend: ", what,
                " is not contiguous; pass tensor.contiguous()");
    return dtype;
}

const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op) {
    TORCH_CHECK(tensors.size() == 1, "nnpccl backend: ", op,
                " takes one tensor per process (one device per process), got ", tensors.size());
    return tensors[0];
}

void checkSameKind(const at::Tensor &t, const at::Tensor &ref, const char *what) {
    TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "nnpccl backend: ", what, " has dtype ",
                dtypeName(t.scalar_type()), " but the input has ", dtypeName(ref.scalar_type()));
}

// A list of per-rank tensors, each numel elements of ref's dtype.
void checkList(const std::vector<at::Tensor> &list, size_t expected, const at::Tensor &ref,
               int64_t numel, const char *what) {
    TORCH_CHECK(list.size() == expected, "nnpccl backend: ", what, " must hold ", expected,
                " tensors (one per rank), got ", list.size());
    for (const at::Tensor &t : list) {
        checkTensor(t, what);
        checkSameKind(t, ref, what);
        TORCH_CHECK(t.numel() == numel, "nnpccl backend: every tensor of ", what, " must have ",
                    numel, " elements like the input, one has ", t.numel());
    }
}

// The blocks of a per-rank list, one after another in a new buffer.
at::Tensor flatten(const std::vector<at::Tensor> &list) {
    std::vector<at::Tensor> flat;
    flat.reserve(list.size());
    for (const at::Tensor &t : list)
        flat.push_back(t.reshape({-1}));
    return at::cat(flat);
}

// Copies block i of flat (numel elements each) into list[i].
void unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &list) {
    int64_t offset = 0;
    for (const at::Tensor &t : list) {
        t.view({-1}).copy_(flat.narrow(0, offset, t.numel()));
        offset += t.numel();
    }
}

size_t count(const at::Tensor &t) { return static_cast<size_t>(t.numel()); }

char *bytes(const at::Tensor &t) { return static_cast<char *>(t.data_ptr()); }

void checkTag(int tag) {
    TORCH_CHECK(tag == 0, "nnpccl backend: send/recv tag ", tag,
                " is not supported; nnpccl pairs the n-th send from a rank with the n-th recv "
                "from it, so only tag 0 is accepted");
}

} // namespace

WorkNnpccl::WorkNnpccl(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

std::vector<at::Tensor> WorkNnpccl::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkNnpccl::getFuture() { return future_; }

void WorkNnpccl::complete(std::exception_ptr error) {
    if (!error && copyOut_) {
        try {
            copyOut_();
        } catch (...) {
            error = std::current_exception();
        }
    }
    keepAlive_.clear();
    copyOut_ = nullptr;
    // The future first, as ProcessGroupGloo does: once wait() returns, the
    // future's callbacks (DDP's) have run too.
    try {
        if (error)
            future_->setError(error);
        else
            future_->markCompleted(c10::IValue(outputs_));
    } catch (const std::exception &e) {
        // A callback's exception (callbacks run inline here) must not end
        // the thread that completes every later Work of the group.
        TORCH_WARN("nnpccl backend: a callback of a collective's future raised: ", e.what());
    }
    finish(error);
}

ProcessGroupNnpccl::ProcessGroupNnpccl(const c10::intrusive_ptr<::c10d::Store> &store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : NNPCCL_TORCH_BASE(rank, size) {
    // A group's store prefix comes back when its group name is used again
    // on a store that outlived the earlier group (a store passed to
    // init_process_group, a launcher's store). Every rank counts its inits
    // in the store, so the k-th init of the group reads the id of the k-th,
    // never a stale one.
    int64_t ticket = store->add("nnpccl_init_count", 1);
    std::string key = "nnpccl_unique_id_" + std::to_string((ticket - 1) / size);
    nnpccl_unique_id_t id;
    if (rank == 0) {
        nnpccl_result_t r = nnpccl_get_unique_id(&id);
        TORCH_CHECK(r == NNPCCL_SUCCESS, "nnpccl_get_unique_id failed (",
                    nnpccl_get_error_string(r), "): ", nnpccl_get_last_error(nullptr));
        const auto *raw = reinterpret_cast<const uint8_t *>(id.internal);
        store->set(key, std::vector<uint8_t>(raw, raw + sizeof(id.internal)));
    } else {
        std::vector<uint8_t> raw = store->get(key);
        TORCH_CHECK(raw.size() == sizeof(id.internal), "nnpccl backend: the unique id in the store has ",
                    raw.size(), " bytes, expected ", sizeof(id.internal));
        std::copy(raw.begin(), raw.end(), reinterpret_cast<uint8_t *>(id.internal));
    }
    nnpccl_config_t config = NNPCCL_CONFIG_INIT;
    // Whole seconds, rounded up: nnpccl's deadline must not be shorter than
    // the one the user asked torch for.
    auto ms = timeout.count();
    config.timeout_sec = ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>((ms + 999) / 1000, INT32_MAX));
    nnpccl_result_t r = nnpccl_comm_init_rank(&comm_, size, id, rank, &config);
    TORCH_CHECK(r == NNPCCL_SUCCESS, "nnpccl_comm_init_rank failed on rank ", rank, " of ", size, " (",
                nnpccl_get_error_string(r), "): ", nnpccl_get_last_error(nullptr));
    shared_ = std::make_shared<Shared>();
    shared_->comm = comm_;
    shared_->rank = rank;
    std::shared_ptr<Shared> shared = shared_;
    completer_ = std::thread([shared] { completionLoop(shared); });
}

ProcessGroupNnpccl::~ProcessGroupNnpccl() {
    {
        std::lock_guard<std::mutex> lock(shared_->queueMutex);
        shared_->stopping = true;
    }
    shared_->queueCv.notify_all();
    // On the completion thread itself (a future callback dropped the last
    // reference), the thread finishes the queue and then lets go of the
    // communicator on its own.
    if (completer_.get_id() == std::this_thread::get_id())
        completer_.detach();
    else
        completer_.join();
}

ProcessGroupNnpccl::Shared::~Shared() {
    // Every request has been waited for, so destroy waits for nothing and
    // does not need the peers.
    nnpccl_comm_destroy(comm);
}

std::string ProcessGroupNnpccl::Shared::errorMessage(nnpccl_result_t result) {
    std::string detail = nnpccl_get_last_error(comm);
    // Errors that name no communicator (a bad request handle) are this
    // thread's.
    if (detail.empty())
        detail = nnpccl_get_last_error(nullptr);
    std::string msg = std::string("nnpccl error on rank ") + std::to_string(rank) + " (" +
                      nnpccl_get_error_string(result) + ")";
    return detail.empty() ? msg : msg + ": " + detail;
}

void ProcessGroupNnpccl::post(WorkNnpccl &work, nnpccl_result_t result, const nnpccl_request_t &request) {
    if (result != NNPCCL_SUCCESS)
        throw std::runtime_error(shared_->errorMessage(result));
    work.requests_.push_back(request);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::submit(const c10::intrusive_ptr<WorkNnpccl> &work,
                                                            const std::function<void()> &body) {
    std::string error;
    {
        std::lock_guard<std::mutex> lock(shared_->issueMutex);
        try {
            body();
        } catch (const std::runtime_error &e) {
            error = e.what();
        }
    }
    if (!error.empty() && work->requests_.empty())
        throw std::runtime_error(error);
    if (!error.empty())
        work->issueError_ = error;
    {
        std::lock_guard<std::mutex> lock(shared_->queueMutex);
        shared_->queue.push_back(work);
    }
    shared_->queueCv.notify_one();
    if (!error.empty())
        throw std::runtime_error(error);
    return work;
}

void ProcessGroupNnpccl::completionLoop(const std::shared_ptr<Shared> &shared) {
    for (;;) {
        c10::intrusive_ptr<WorkNnpccl> work;
        {
            std::unique_lock<std::mutex> lock(shared->queueMutex);
            shared->queueCv.wait(lock, [&] { return shared->stopping || !shared->queue.empty(); });
            if (shared->queue.empty())
                return;
            work = shared->queue.front();
            shared->queue.pop_front();
        }
        std::string error = work->issueError_;
        for (nnpccl_request_t request : work->requests_) {
            nnpccl_result_t r = nnpccl_wait(request);
            if (r != NNPCCL_SUCCESS && error.empty()) {
                // The message lives until the next call on the communicator,
                // which another thread may be issuing.
                std::lock_guard<std::mutex> lock(shared->issueMutex);
                error = shared->errorMessage(r);
            }
        }
        work->requests_.clear();
        work->complete(error.empty() ? nullptr : std::make_exception_ptr(std::runtime_error(error)));
    }
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::broadcast(std::vector<at::Tensor> &tensors,
                                                               const ::c10d::BroadcastOptions &opts) {
    const at::Tensor &t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, "nnpccl backend: broadcast's root tensor must be 0 (one tensor per process)");
    nnpccl_datatype_t dtype = checkTensor(t, "the broadcast tensor");
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::BROADCAST, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ibroadcast(t.data_ptr(), t.data_ptr(), count(t), dtype,
                                      static_cast<int>(opts.rootRank), comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::allreduce(std::vector<at::Tensor> &tensors,
                                                               const ::c10d::AllreduceOptions &opts) {
    const at::Tensor &t = single(tensors, "allreduce");
    nnpccl_datatype_t dtype = checkTensor(t, "the allreduce tensor");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::ALLREDUCE, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallreduce(t.data_ptr(), t.data_ptr(), count(t), dtype, op, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupNnpccl::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                        const ::c10d::AllreduceCoalescedOptions &opts) {
    TORCH_CHECK(!tensors.empty(), "nnpccl backend: allreduce_coalesced needs at least one tensor");
    nnpccl_datatype_t dtype = checkTensor(tensors[0], "an allreduce_coalesced tensor");
    for (const at::Tensor &t : tensors) {
        checkTensor(t, "an allreduce_coalesced tensor");
        checkSameKind(t, tensors[0], "an allreduce_coalesced tensor");
    }
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::ALLREDUCE_COALESCED, tensors);
    // One call over all of them: many small tensors are what coalescing is for.
    at::Tensor flat = flatten(tensors);
    work->keepAlive_.push_back(flat);
    work->copyOut_ = [flat, tensors] { unflatten(flat, tensors); };
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallreduce(flat.data_ptr(), flat.data_ptr(), count(flat), dtype, op, comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::reduce(std::vector<at::Tensor> &tensors,
                                                            const ::c10d::ReduceOptions &opts) {
    const at::Tensor &t = single(tensors, "reduce");
    TORCH_CHECK(opts.rootTensor == 0, "nnpccl backend: reduce's root tensor must be 0 (one tensor per process)");
    nnpccl_datatype_t dtype = checkTensor(t, "the reduce tensor");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::REDUCE, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ireduce(t.data_ptr(), t.data_ptr(), count(t), dtype, op,
                                   static_cast<int>(opts.rootRank), comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                                               std::vector<at::Tensor> &inputs,
                                                               const ::c10d::AllgatherOptions &) {
    const at::Tensor &in = single(inputs, "allgather");
    nnpccl_datatype_t dtype = checkTensor(in, "the allgather input");
    TORCH_CHECK(outputs.size() == 1, "nnpccl backend: allgather takes one output list per process, got ",
                outputs.size());
    const std::vector<at::Tensor> &list = outputs[0];
    checkList(list, static_cast<size_t>(size_), in, in.numel(), "the allgather output list");
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::ALLGATHER, list);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    work->keepAlive_ = {flat, in};
    work->copyOut_ = [flat, list] { unflatten(flat, list); };
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallgather(in.data_ptr(), flat.data_ptr(), count(in), dtype, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::_allgather_base(at::Tensor &output, at::Tensor &input,
                                                                     const ::c10d::AllgatherOptions &) {
    nnpccl_datatype_t dtype = checkTensor(input, "the allgather input");
    checkTensor(output, "the allgather output");
    checkSameKind(output, input, "the allgather output");
    TORCH_CHECK(output.numel() == input.numel() * size_, "nnpccl backend: the allgather output has ",
                output.numel(), " elements, expected ", size_, " x ", input.numel());
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::_ALLGATHER_BASE,
                                                std::vector<at::Tensor>{output});
    work->keepAlive_ = {input};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallgather(input.data_ptr(), output.data_ptr(), count(input), dtype, comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                                            std::vector<at::Tensor> &inputs,
                                                            const ::c10d::GatherOptions &opts) {
    const at::Tensor &in = single(inputs, "gather");
    nnpccl_datatype_t dtype = checkTensor(in, "the gather input");
    int root = static_cast<int>(opts.rootRank);
    std::vector<at::Tensor> list;
    at::Tensor flat;
    if (rank_ == root) {
        TORCH_CHECK(outputs.size() == 1, "nnpccl backend: gather's root takes one output list, got ",
                    outputs.size());
        list = outputs[0];
        checkList(list, static_cast<size_t>(size_), in, in.numel(), "the gather output list");
        flat = at::empty({in.numel() * size_}, in.options());
    } else {
        TORCH_CHECK(outputs.empty(), "nnpccl backend: gather takes no output list off the root (rank ",
                    root, ")");
    }
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::GATHER, list);
    work->keepAlive_ = {in};
    if (flat.defined()) {
        work->keepAlive_.push_back(flat);
        work->copyOut_ = [flat, list] { unflatten(flat, list); };
    }
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_igather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count(in), dtype, root,
                            comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::scatter(std::vector<at::Tensor> &outputs,
                                                             std::vector<std::vector<at::Tensor>> &inputs,
                                                             const ::c10d::ScatterOptions &opts) {
    const at::Tensor &out = single(outputs, "scatter");
    nnpccl_datatype_t dtype = checkTensor(out, "the scatter output");
    int root = static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (rank_ == root) {
        TORCH_CHECK(inputs.size() == 1, "nnpccl backend: scatter's root takes one input list, got ",
                    inputs.size());
        checkList(inputs[0], static_cast<size_t>(size_), out, out.numel(), "the scatter input list");
        flat = flatten(inputs[0]);
    } else {
        TORCH_CHECK(inputs.empty(), "nnpccl backend: scatter takes no input list off the root (rank ", root,
                    ")");
    }
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::SCATTER, outputs);
    if (flat.defined())
        work->keepAlive_ = {flat};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_iscatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out), dtype, root,
                             comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupNnpccl::reduce_scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                                   const ::c10d::ReduceScatterOptions &opts) {
    const at::Tensor &out = single(outputs, "reduce_scatter");
    nnpccl_datatype_t dtype = checkTensor(out, "the reduce_scatter output");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    TORCH_CHECK(inputs.size() == 1, "nnpccl backend: reduce_scatter takes one input list per process, got ",
                inputs.size());
    checkList(inputs[0], static_cast<size_t>(size_), out, out.numel(), "the reduce_scatter input list");
    at::Tensor flat = flatten(inputs[0]);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::REDUCE_SCATTER, outputs);
    work->keepAlive_ = {flat};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ireduce_scatter(flat.data_ptr(), out.data_ptr(), count(out), dtype, op, comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupNnpccl::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                         const ::c10d::ReduceScatterOptions &opts) {
    nnpccl_datatype_t dtype = checkTensor(input, "the reduce_scatter input");
    checkTensor(output, "the reduce_scatter output");
    checkSameKind(output, input, "the reduce_scatter output");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    TORCH_CHECK(input.numel() == output.numel() * size_, "nnpccl backend: the reduce_scatter input has ",
                input.numel(), " elements, expected ", size_, " x ", output.numel());
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::_REDUCE_SCATTER_BASE,
                                                std::vector<at::Tensor>{output});
    work->keepAlive_ = {input};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_ireduce_scatter(input.data_ptr(), output.data_ptr(), count(output), dtype, op, comm_, &req),
             req);
    });
}

void ProcessGroupNnpccl::postAlltoallP2P(WorkNnpccl &work, const std::vector<const char *> &sendPtrs,
                                         const std::vector<char *> &recvPtrs,
                                         const std::vector<size_t> &sendCounts,
                                         const std::vector<size_t> &recvCounts, nnpccl_datatype_t dtype) {
    // Every rank posts all its sends and receives before waiting: nnpccl
    // progresses pending sends and receives together, so no order of peers
    // can deadlock.
    for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_)
            continue;
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
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::ALLTOALL_BASE,
                                                std::vector<at::Tensor>{output});
    work->keepAlive_ = {input};
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
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::ALLTOALL, outputs);
    if (equal) {
        at::Tensor in = flatten(inputs);
        at::Tensor out = at::empty_like(in);
        work->keepAlive_ = {in, out};
        std::vector<at::Tensor> list = outputs;
        work->copyOut_ = [out, list] { unflatten(out, list); };
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
    work->keepAlive_ = inputs;
    return submit(work, [&] { postAlltoallP2P(*work, sendPtrs, recvPtrs, sendCounts, recvCounts, dtype); });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::send(std::vector<at::Tensor> &tensors, int dstRank, int tag) {
    const at::Tensor &t = single(tensors, "send");
    nnpccl_datatype_t dtype = checkTensor(t, "the sent tensor");
    checkTag(tag);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::SEND, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_isend(t.data_ptr(), count(t), dtype, dstRank, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::recv(std::vector<at::Tensor> &tensors, int srcRank, int tag) {
    const at::Tensor &t = single(tensors, "recv");
    nnpccl_datatype_t dtype = checkTensor(t, "the received tensor");
    checkTag(tag);
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::RECV, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_irecv(t.data_ptr(), count(t), dtype, srcRank, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::barrier(const ::c10d::BarrierOptions &) {
    auto work = c10::make_intrusive<WorkNnpccl>(rank_, ::c10d::OpType::BARRIER, std::vector<at::Tensor>{});
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ibarrier(comm_, &req), req);
    });
}

} // namespace nnpccl_torch
