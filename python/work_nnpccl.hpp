// One torch call's Work, and the threads that complete it: a completion
// thread that waits for nnpccl's requests in the order they were issued, and
// callback threads that complete the Works' futures.
//
// Futures are never completed on the completion thread. A future's callbacks
// run where it is completed, and a callback may issue another collective of
// the same group and wait for it (DDP's PowerSGD hook does): on the thread
// that must complete that collective it would wait forever. A callback
// thread that is busy does not hold up the next completion: when none is
// idle, another is started, so the number of threads follows the depth of
// callbacks that wait on one another (one, most of the time).
#pragma once

#include <nnpccl.h>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nnpccl_torch {

// One torch call: the nnpccl requests it issued and the tensors they read and
// write. profilingTitle ("nnpccl:all_reduce", as Gloo names its own) opens a
// profiler span that ends when the Work finishes.
class WorkNnpccl : public ::c10d::Work {
public:
    WorkNnpccl(int rank, ::c10d::OpType type, const char *profilingTitle, std::vector<at::Tensor> outputs,
               const std::vector<at::Tensor> &inputs);

    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    int sourceRank() const override;

    std::vector<nnpccl_request_t> requests;
    // Staging buffers and inputs the requests still read or write.
    std::vector<at::Tensor> keepAlive;
    // Runs once the requests succeeded (copies staging buffers into the
    // caller's tensors, checks what was received); may throw to fail the
    // Work.
    std::function<void()> copyOut;
    // Set when issuing failed after some requests had been issued (they are
    // still waited for), or when a request failed: the Work then fails with
    // this.
    std::string failure;
    // The sender of a receive from any source, once known.
    int source = -1;

    // Runs copyOut (unless the Work failed), then completes the future
    // (running its callbacks) and the Work.
    void complete();

private:
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The communicator and the threads that progress a group's Works. The threads
// hold it too, so it outlives the group when a callback drops the group's
// last reference; the last holder destroys the communicator.
class Progress : public std::enable_shared_from_this<Progress> {
public:
    Progress(nnpccl_comm_t comm, int rank);
    ~Progress();
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;

    void start();
    void enqueue(const c10::intrusive_ptr<WorkNnpccl> &work);
    // Completes every queued Work, runs their callbacks, and ends the
    // threads (joined, or detached when stop runs on one of them).
    void stop();

    // nnpccl's message for a failed call. Called with issueMutex held.
    std::string errorMessage(nnpccl_result_t result);

    const nnpccl_comm_t comm;
    const int rank;
    // nnpccl accepts calls on a communicator from one thread at a time;
    // torch may call from several (autograd hooks, callbacks, the caller).
    std::mutex issueMutex;

private:
    void completionLoop();
    void callbackLoop();
    void dispatch(c10::intrusive_ptr<WorkNnpccl> work);

    std::mutex mutex_;
    std::condition_variable queueCv_;
    std::deque<c10::intrusive_ptr<WorkNnpccl>> queue_;
    bool stopping_ = false;
    std::thread completer_;

    std::condition_variable callbackCv_;
    std::deque<c10::intrusive_ptr<WorkNnpccl>> completed_;
    bool callbacksStopping_ = false;
    int idleCallbackThreads_ = 0;
    std::vector<std::thread> callbackThreads_;
};

} // namespace nnpccl_torch
