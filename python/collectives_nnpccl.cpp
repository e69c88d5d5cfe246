// The collectives of ProcessGroupNnpccl: each checks torch's tensors, stages
// lists of tensors through one buffer where nnpccl needs one block, and
// issues one nnpccl call.
#include "process_group_nnpccl.hpp"
#include "tensor_checks.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace nnpccl_torch {

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::broadcast(std::vector<at::Tensor> &tensors,
                                                               const ::c10d::BroadcastOptions &opts) {
    const at::Tensor &t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, "nnpccl backend: broadcast's root tensor must be 0 (one tensor per process)");
    nnpccl_datatype_t dtype = checkTensor(t, "the broadcast tensor");
    auto work = makeWork(::c10d::OpType::BROADCAST, "nnpccl:broadcast", tensors, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_ibroadcast(t.data_ptr(), t.data_ptr(), count(t), dtype, static_cast<int>(opts.rootRank), comm_,
                               &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::allreduce(std::vector<at::Tensor> &tensors,
                                                               const ::c10d::AllreduceOptions &opts) {
    const at::Tensor &t = single(tensors, "allreduce");
    if (t.defined() && t.is_sparse()) return sparseAllreduce(tensors[0], opts);
    nnpccl_datatype_t dtype = checkTensor(t, "the allreduce tensor");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    auto work = makeWork(::c10d::OpType::ALLREDUCE, "nnpccl:all_reduce", tensors, tensors);
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
    auto work = makeWork(::c10d::OpType::ALLREDUCE_COALESCED, "nnpccl:all_reduce_coalesced", tensors, tensors);
    // One call over all of them: many small tensors are what coalescing is for.
    at::Tensor flat = flatten(tensors);
    work->keepAlive.push_back(flat);
    work->copyOut = [flat, tensors] { unflatten(flat, tensors); };
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallreduce(flat.data_ptr(), flat.data_ptr(), count(flat), dtype, op, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::reduce(std::vector<at::Tensor> &tensors,
                                                            const ::c10d::ReduceOptions &opts) {
    const at::Tensor &t = single(tensors, "reduce");
    TORCH_CHECK(opts.rootTensor == 0, "nnpccl backend: reduce's root tensor must be 0 (one tensor per process)");
    nnpccl_datatype_t dtype = checkTensor(t, "the reduce tensor");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    auto work = makeWork(::c10d::OpType::REDUCE, "nnpccl:reduce", tensors, tensors);
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_ireduce(t.data_ptr(), t.data_ptr(), count(t), dtype, op, static_cast<int>(opts.rootRank), comm_,
                            &req),
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
    auto work = makeWork(::c10d::OpType::ALLGATHER, "nnpccl:all_gather", list, inputs);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    work->keepAlive = {flat, in};
    work->copyOut = [flat, list] { unflatten(flat, list); };
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
    TORCH_CHECK(output.numel() == input.numel() * size_, "nnpccl backend: the allgather output has ", output.numel(),
                " elements, expected ", size_, " x ", input.numel());
    auto work = makeWork(::c10d::OpType::_ALLGATHER_BASE, "nnpccl:_all_gather_base", {output}, {input});
    work->keepAlive = {input};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallgather(input.data_ptr(), output.data_ptr(), count(input), dtype, comm_, &req), req);
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
        TORCH_CHECK(outputs.size() == 1, "nnpccl backend: gather's root takes one output list, got ", outputs.size());
        list = outputs[0];
        checkList(list, static_cast<size_t>(size_), in, in.numel(), "the gather output list");
        flat = at::empty({in.numel() * size_}, in.options());
    } else {
        TORCH_CHECK(outputs.empty(), "nnpccl backend: gather takes no output list off the root (rank ", root, ")");
    }
    auto work = makeWork(::c10d::OpType::GATHER, "nnpccl:gather", list, inputs);
    work->keepAlive = {in};
    if (flat.defined()) {
        work->keepAlive.push_back(flat);
        work->copyOut = [flat, list] { unflatten(flat, list); };
    }
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_igather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count(in), dtype, root, comm_,
                            &req),
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
        TORCH_CHECK(inputs.size() == 1, "nnpccl backend: scatter's root takes one input list, got ", inputs.size());
        checkList(inputs[0], static_cast<size_t>(size_), out, out.numel(), "the scatter input list");
        flat = flatten(inputs[0]);
    } else {
        TORCH_CHECK(inputs.empty(), "nnpccl backend: scatter takes no input list off the root (rank ", root, ")");
    }
    auto work = makeWork(::c10d::OpType::SCATTER, "nnpccl:scatter", outputs,
                         inputs.empty() ? std::vector<at::Tensor>{} : inputs[0]);
    if (flat.defined()) work->keepAlive = {flat};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work,
             nnpccl_iscatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out), dtype, root, comm_,
                             &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::reduce_scatter(std::vector<at::Tensor> &outputs,
                                                                    std::vector<std::vector<at::Tensor>> &inputs,
                                                                    const ::c10d::ReduceScatterOptions &opts) {
    const at::Tensor &out = single(outputs, "reduce_scatter");
    nnpccl_datatype_t dtype = checkTensor(out, "the reduce_scatter output");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    TORCH_CHECK(inputs.size() == 1, "nnpccl backend: reduce_scatter takes one input list per process, got ",
                inputs.size());
    checkList(inputs[0], static_cast<size_t>(size_), out, out.numel(), "the reduce_scatter input list");
    at::Tensor flat = flatten(inputs[0]);
    auto work = makeWork(::c10d::OpType::REDUCE_SCATTER, "nnpccl:reduce_scatter", outputs, inputs[0]);
    work->keepAlive = {flat};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ireduce_scatter(flat.data_ptr(), out.data_ptr(), count(out), dtype, op, comm_, &req), req);
    });
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                                          const ::c10d::ReduceScatterOptions &opts) {
    nnpccl_datatype_t dtype = checkTensor(input, "the reduce_scatter input");
    checkTensor(output, "the reduce_scatter output");
    checkSameKind(output, input, "the reduce_scatter output");
    nnpccl_redop_t op = toNnpccl(opts.reduceOp);
    TORCH_CHECK(input.numel() == output.numel() * size_, "nnpccl backend: the reduce_scatter input has ", input.numel(),
                " elements, expected ", size_, " x ", output.numel());
    auto work = makeWork(::c10d::OpType::_REDUCE_SCATTER_BASE, "nnpccl:_reduce_scatter_base", {output}, {input});
    work->keepAlive = {input};
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ireduce_scatter(input.data_ptr(), output.data_ptr(), count(output), dtype, op, comm_, &req),
             req);
    });
}

c10::intrusive_ptr<::c10d::Work>
ProcessGroupNnpccl::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                        std::vector<at::Tensor> &inputs, const ::c10d::AllgatherOptions &) {
    TORCH_CHECK(!inputs.empty(), "nnpccl backend: allgather_coalesced needs at least one input tensor");
    nnpccl_datatype_t dtype = checkTensor(inputs[0], "an allgather_coalesced input");
    for (const at::Tensor &t : inputs) {
        checkTensor(t, "an allgather_coalesced input");
        checkSameKind(t, inputs[0], "an allgather_coalesced input");
    }
    TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "nnpccl backend: allgather_coalesced takes ",
                "one output list per rank (", size_, "), got ", outputLists.size());
    std::vector<at::Tensor> outputs;
    for (const std::vector<at::Tensor> &list : outputLists) {
        TORCH_CHECK(list.size() == inputs.size(), "nnpccl backend: each allgather_coalesced output list must ",
                    "hold one tensor per input (", inputs.size(), "), one holds ", list.size());
        for (size_t i = 0; i < list.size(); ++i) {
            checkTensor(list[i], "an allgather_coalesced output");
            checkSameKind(list[i], inputs[0], "an allgather_coalesced output");
            TORCH_CHECK(list[i].sizes() == inputs[i].sizes(), "nnpccl backend: allgather_coalesced output ", i,
                        " has shape ", list[i].sizes(), " but input ", i, " has ", inputs[i].sizes());
            outputs.push_back(list[i]);
        }
    }
    at::Tensor in = flatten(inputs);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    auto work = makeWork(::c10d::OpType::ALLGATHER_COALESCED, "nnpccl:all_gather_coalesced", outputs, inputs);
    work->keepAlive = {in, flat};
    // Rank r's block of flat holds its inputs one after another, which is
    // also the order of outputs from r * inputs.size() on.
    work->copyOut = [flat, outputs] { unflatten(flat, outputs); };
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_iallgather(in.data_ptr(), flat.data_ptr(), count(in), dtype, comm_, &req), req);
    });
}

namespace {

// What every rank learns of the others' sparse tensors first, so that the
// indices and values can be gathered as blocks of one size.
constexpr int64_t kSparseMetaFixed = 3; // nnz, sparse_dim, dense_dim
constexpr int64_t kSparseMetaDims = 64; // sizes, padded

at::Tensor sparseMetadata(const at::Tensor &t) {
    TORCH_CHECK(t.dim() <= kSparseMetaDims, "nnpccl backend: sparse all_reduce takes at most ", kSparseMetaDims,
                " dimensions, got ", t.dim());
    at::Tensor meta = at::full({kSparseMetaFixed + kSparseMetaDims}, -1, at::kLong);
    auto m = meta.accessor<int64_t, 1>();
    m[0] = t._nnz();
    m[1] = t.sparse_dim();
    m[2] = t.dense_dim();
    for (int64_t d = 0; d < t.dim(); ++d) m[kSparseMetaFixed + d] = t.size(d);
    return meta;
}

} // namespace

// As ProcessGroupGloo does it: every rank gathers every rank's indices and
// values (padded to the largest count of nonzeros) and adds the tensors up
// in rank order, so every rank holds the same sum. Blocks the caller: three
// gathers, each waited for before the next can be sized.
c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::sparseAllreduce(at::Tensor &tensor,
                                                                     const ::c10d::AllreduceOptions &opts) {
    TORCH_CHECK(opts.reduceOp == ::c10d::ReduceOp::SUM, "nnpccl backend: sparse all_reduce supports ReduceOp.SUM ",
                "only (as Gloo)");
    TORCH_CHECK(tensor.device().is_cpu(), "nnpccl backend: the sparse all_reduce tensor is on device ",
                tensor.device().str(), "; only CPU tensors are supported");
    at::Tensor input = tensor.coalesce();
    at::Tensor indices = input._indices().contiguous();
    at::Tensor values = input._values().contiguous();
    nnpccl_datatype_t dtype = toNnpccl(values.scalar_type());
    auto work = makeWork(::c10d::OpType::ALLREDUCE, "nnpccl:sparse_all_reduce", {tensor}, {tensor});
    at::Tensor meta = sparseMetadata(input);
    at::Tensor metas = at::empty({size_, meta.numel()}, meta.options());
    at::Tensor output;
    {
        std::lock_guard<std::mutex> lock(progress_->issueMutex);
        check(nnpccl_allgather(meta.data_ptr(), metas.data_ptr(), count(meta), NNPCCL_INT64, comm_));
        for (int r = 0; r < size_; ++r)
            TORCH_CHECK(metas[r].slice(0, 1).equal(meta.slice(0, 1)), "nnpccl backend: sparse all_reduce: rank ", r,
                        "'s tensor differs from this rank's in shape or sparse/dense dimensions");
        int64_t maxNnz = metas.select(1, 0).max().item<int64_t>();
        at::Tensor paddedIdx = at::zeros({indices.size(0), maxNnz}, indices.options());
        paddedIdx.narrow(1, 0, indices.size(1)).copy_(indices);
        std::vector<int64_t> valueShape = values.sizes().vec();
        valueShape[0] = maxNnz;
        at::Tensor paddedVal = at::zeros(valueShape, values.options());
        paddedVal.narrow(0, 0, values.size(0)).copy_(values);
        at::Tensor allIdx = at::empty({size_, paddedIdx.size(0), maxNnz}, indices.options());
        std::vector<int64_t> allValShape = {size_};
        allValShape.insert(allValShape.end(), valueShape.begin(), valueShape.end());
        at::Tensor allVal = at::empty(allValShape, values.options());
        check(nnpccl_allgather(paddedIdx.data_ptr(), allIdx.data_ptr(), count(paddedIdx), NNPCCL_INT64, comm_));
        check(nnpccl_allgather(paddedVal.data_ptr(), allVal.data_ptr(), count(paddedVal), dtype, comm_));
        for (int r = 0; r < size_; ++r) {
            int64_t nnz = metas[r][0].item<int64_t>();
            at::Tensor part = at::sparse_coo_tensor(allIdx[r].narrow(1, 0, nnz), allVal[r].narrow(0, 0, nnz),
                                                    input.sizes(), input.options());
            output = r == 0 ? part : output + part;
        }
    }
    output = output.coalesce();
    work->copyOut = [tensor, output]() mutable { tensor.copy_(output); };
    return submit(work, [] {});
}

} // namespace nnpccl_torch
