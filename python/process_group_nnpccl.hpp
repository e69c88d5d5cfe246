// ProcessGroupNnpccl: torch.distributed's collectives over nnpccl's public C
// API. Only include/nnpccl.h is used, so the backend sees the library exactly
// as any other program does.
//
// The code is in four files: process_group_nnpccl.cpp (set-up, issuing,
// barriers, sequence numbers), collectives_nnpccl.cpp, p2p_nnpccl.cpp
// (send/recv and alltoall), and work_nnpccl.cpp (the Works and the threads
// that complete them); tensor_checks.cpp checks what torch hands in.
#pragma once

#include "work_nnpccl.hpp"

#include <nnpccl.h>

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

// torch 2.x split c10d::ProcessGroup into a dispatching front and
// c10d::Backend, which is what third-party backends derive from there.
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define NNPCCL_TORCH_BASE ::c10d::Backend
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define NNPCCL_TORCH_BASE ::c10d::ProcessGroup
#endif

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace nnpccl_torch {

class ProcessGroupNnpccl : public NNPCCL_TORCH_BASE {
  public:
    // Collective over the group's ranks: rank 0 makes the nnpccl unique id and
    // publishes it in store (torch's per-group PrefixStore), the others read
    // it there. timeout becomes the communicator's deadline for every wait.
    ProcessGroupNnpccl(const c10::intrusive_ptr<::c10d::Store> &store, int rank, int size,
                       std::chrono::milliseconds timeout);
    ~ProcessGroupNnpccl() override;

    ProcessGroupNnpccl(const ProcessGroupNnpccl &) = delete;
    ProcessGroupNnpccl &operator=(const ProcessGroupNnpccl &) = delete;

    const std::string getBackendName() const override { return "nnpccl"; }

    c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                               const ::c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                               const ::c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const ::c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                            const ::c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                               std::vector<at::Tensor> &inputs,
                                               const ::c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                     const ::c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                                         std::vector<at::Tensor> &inputs,
                                                         const ::c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const ::c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                             std::vector<std::vector<at::Tensor>> &inputs,
                                             const ::c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                    std::vector<std::vector<at::Tensor>> &inputs,
                                                    const ::c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const ::c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                   std::vector<int64_t> &outputSplits,
                                                   std::vector<int64_t> &inputSplits,
                                                   const ::c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                              std::vector<at::Tensor> &inputs,
                                              const ::c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                          int tag) override;
    c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                          int tag) override;
    c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
    c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions &opts) override;
    void monitoredBarrier(const ::c10d::BarrierOptions &opts, bool waitAllRanks) override;
    void setSequenceNumberForGroup() override;
    uint64_t getSequenceNumberForGroup() override;

private:
    c10::intrusive_ptr<WorkNnpccl> makeWork(::c10d::OpType type, const char *profilingTitle,
                                            std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs);
    // Issues a call's nnpccl operations (body) under the issue mutex, then
    // hands the Work to the completion thread.
    c10::intrusive_ptr<::c10d::Work> submit(const c10::intrusive_ptr<WorkNnpccl> &work,
                                            const std::function<void()> &body);
    // Records one issued request of work, or throws with nnpccl's message
    // when the call failed. Called with the issue mutex held. request is
    // taken by reference because it is the issuing call's output, and
    // argument evaluation order would otherwise allow reading it before the
    // call.
    void post(WorkNnpccl &work, nnpccl_result_t result, const nnpccl_request_t &request);
    // Throws nnpccl's message unless result is success (issue mutex held).
    void check(nnpccl_result_t result);

    c10::intrusive_ptr<::c10d::Work> sparseAllreduce(at::Tensor &tensor, const ::c10d::AllreduceOptions &opts);
    // The send/recv form of an alltoall whose blocks differ in size.
    void postAlltoallP2P(WorkNnpccl &work, const std::vector<const char *> &sendPtrs,
                         const std::vector<char *> &recvPtrs, const std::vector<size_t> &sendCounts,
                         const std::vector<size_t> &recvCounts, nnpccl_datatype_t dtype);
    // A tagged receive from src (issue mutex held); see p2p_nnpccl.cpp.
    void postRecv(const c10::intrusive_ptr<WorkNnpccl> &work, const at::Tensor &t, int src, int tag);
    // The sender whose next message to this rank is tagged tag, from the
    // notices senders leave in the store; waits for one up to the timeout.
    int findAnySource(int tag);
    std::string noticeKey(int src, int dst, uint64_t seq) const;

    c10::intrusive_ptr<::c10d::Store> store_;
    std::chrono::milliseconds timeout_;
    std::string keyPrefix_;
    std::shared_ptr<Progress> progress_;
    nnpccl_comm_t comm_ = nullptr; // progress_->comm, for the calls' brevity
    // Whether sends leave a notice in the store, which a receive from any
    // source needs (NNPCCL_TORCH_ANY_SOURCE=0 turns them off).
    bool notices_ = true;
    // Messages sent to and received from each peer (issue mutex held).
    std::vector<uint64_t> sentTo_, receivedFrom_;
    uint64_t monitoredBarriers_ = 0;
    std::atomic<uint64_t> sequence_{0};
};

} // namespace nnpccl_torch
