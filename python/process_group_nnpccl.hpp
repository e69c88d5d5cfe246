// ProcessGroupNnpccl: torch.distributed's collectives over nnpccl's public C
// API. Only include/nnpccl.h is used, so the backend sees the library exactly
// as any other program does.
#pragma once

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

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nnpccl_torch {

class ProcessGroupNnpccl;

// One torch call: the nnpccl requests it issued and the tensors they read and
// write. The process group's completion thread waits for the requests, runs
// the copy-out step, and completes both the Work and its Future, so that
// DDP's future callbacks run without anyone calling wait().
class WorkNnpccl : public ::c10d::Work {
  public:
    WorkNnpccl(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs);

    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  private:
    friend class ProcessGroupNnpccl;

    void complete(std::exception_ptr error);

    std::vector<nnpccl_request_t> requests_;
    // Staging buffers and inputs the requests still read or write.
    std::vector<at::Tensor> keepAlive_;
    // Runs once the requests succeeded: copies staging buffers into the
    // caller's tensors.
    std::function<void()> copyOut_;
    // Set when issuing failed after some requests had been issued: they are
    // still waited for, and the Work then fails with this.
    std::string issueError_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

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
    c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions &opts) override;

  private:
    // Issues a call's nnpccl operations (body) under issueMutex, then hands
    // the Work to the completion thread.
    c10::intrusive_ptr<::c10d::Work> submit(const c10::intrusive_ptr<WorkNnpccl> &work,
                                            const std::function<void()> &body);
    // Records one issued request of work, or throws with nnpccl's message
    // when the call failed. Called with issueMutex held. request is taken
    // by reference because it is the issuing call's output, and argument
    // evaluation order would otherwise allow reading it before the call.
    void post(WorkNnpccl &work, nnpccl_result_t result, const nnpccl_request_t &request);
    // The send/recv form of an alltoall whose blocks differ in size.
    void postAlltoallP2P(WorkNnpccl &work, const std::vector<const char *> &sendPtrs,
                         const std::vector<char *> &recvPtrs, const std::vector<size_t> &sendCounts,
                         const std::vector<size_t> &recvCounts, nnpccl_datatype_t dtype);

    // What the completion thread shares with the group. The thread can
    // outlive the group object (a future callback that drops the group's
    // last reference runs on it), and the communicator must outlive both:
    // the last of them to let go destroys it.
    struct Shared {
        nnpccl_comm_t comm = nullptr;
        int rank = 0;
        // nnpccl accepts calls on a communicator from one thread at a
        // time; torch may call from several (autograd hooks, the caller).
        std::mutex issueMutex;
        std::mutex queueMutex;
        std::condition_variable queueCv;
        std::deque<c10::intrusive_ptr<WorkNnpccl>> queue;
        bool stopping = false;

        Shared() = default;
        Shared(const Shared &) = delete;
        Shared &operator=(const Shared &) = delete;
        ~Shared();
        std::string errorMessage(nnpccl_result_t result); // issueMutex held
    };
    static void completionLoop(const std::shared_ptr<Shared> &shared);

    std::shared_ptr<Shared> shared_;
    nnpccl_comm_t comm_ = nullptr; // shared_->comm, for the calls' brevity
    std::thread completer_;
};

} // namespace nnpccl_torch
