#include "work_nnpccl.hpp"

#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace nnpccl_torch {

WorkNnpccl::WorkNnpccl(int rank, ::c10d::OpType type, const char *profilingTitle, std::vector<at::Tensor> outputs,
                       const std::vector<at::Tensor> &inputs)
    : ::c10d::Work(rank, type, profilingTitle, c10::optional<std::vector<at::Tensor>>(inputs)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

std::vector<at::Tensor> WorkNnpccl::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkNnpccl::getFuture() { return future_; }

int WorkNnpccl::sourceRank() const {
    TORCH_CHECK(source >= 0, "nnpccl backend: sourceRank() is known only for a completed receive from any source");
    return source;
}

void WorkNnpccl::complete() {
    std::exception_ptr error;
    if (!failure.empty()) error = std::make_exception_ptr(std::runtime_error(failure));
    if (!error && copyOut) {
        try {
            copyOut();
        } catch (...) {
            error = std::current_exception();
        }
    }
    keepAlive.clear();
    copyOut = nullptr;
    // The future first, as ProcessGroupGloo does: once wait() returns, the
    // future's callbacks (DDP's) have run too.
    try {
        if (error)
            future_->setError(error);
        else
            future_->markCompleted(c10::IValue(outputs_));
    } catch (const std::exception &e) {
        // A callback's exception (callbacks run inline here) must not end
        // the thread that completes later Works of the group.
        TORCH_WARN("nnpccl backend: a callback of a collective's future raised: ", e.what());
    }
    finish(error);
}

Progress::Progress(nnpccl_comm_t comm_, int rank_) : comm(comm_), rank(rank_) {}

Progress::~Progress() {
    // stop() has waited for every request, so destroy waits for nothing and
    // does not need the peers.
    nnpccl_comm_destroy(comm);
}

void Progress::start() {
    std::shared_ptr<Progress> self = shared_from_this();
    completer_ = std::thread([self] { self->completionLoop(); });
}

void Progress::enqueue(const c10::intrusive_ptr<WorkNnpccl> &work) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(work);
    }
    queueCv_.notify_one();
}

void Progress::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    queueCv_.notify_all();
    // On a callback thread (a callback dropped the group's last reference)
    // that thread cannot join itself: it ends on its own once the queue of
    // completed Works is empty.
    std::thread::id self = std::this_thread::get_id();
    if (completer_.joinable()) completer_.get_id() == self ? completer_.detach() : completer_.join();
    // The completion thread has ended, so no callback thread starts now.
    std::vector<std::thread> threads;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        callbacksStopping_ = true;
        threads.swap(callbackThreads_);
    }
    callbackCv_.notify_all();
    for (std::thread &t : threads) t.get_id() == self ? t.detach() : t.join();
}

std::string Progress::errorMessage(nnpccl_result_t result) {
    std::string detail = nnpccl_get_last_error(comm);
    // Errors that name no communicator (a bad request handle) are this
    // thread's.
    if (detail.empty()) detail = nnpccl_get_last_error(nullptr);
    std::string msg =
        std::string("nnpccl error on rank ") + std::to_string(rank) + " (" + nnpccl_get_error_string(result) + ")";
    // The words torch's own tests and users' scripts look for in a
    // backend's timeout (Gloo's "Timed out waiting ...").
    if (result == NNPCCL_ERR_TIMEOUT) msg += ": Timed out waiting for peers";
    return detail.empty() ? msg : msg + ": " + detail;
}

void Progress::completionLoop() {
    for (;;) {
        c10::intrusive_ptr<WorkNnpccl> work;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            work = queue_.front();
            queue_.pop_front();
        }
        for (nnpccl_request_t request : work->requests) {
            nnpccl_result_t r = nnpccl_wait(request);
            if (r != NNPCCL_SUCCESS && work->failure.empty()) {
                // The message lives until the next call on the communicator,
                // which another thread may be issuing.
                std::lock_guard<std::mutex> lock(issueMutex);
                work->failure = errorMessage(r);
            }
        }
        work->requests.clear();
        dispatch(std::move(work));
    }
}

void Progress::dispatch(c10::intrusive_ptr<WorkNnpccl> work) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        completed_.push_back(std::move(work));
        // Every idle thread may already have a Work of the queue coming to
        // it; one more Work than idle threads needs a thread of its own, or
        // it could wait behind a callback that waits for it. A new thread
        // counts as idle from here, so that a burst of completions starts
        // only the threads it needs.
        if (completed_.size() > static_cast<size_t>(idleCallbackThreads_)) {
            ++idleCallbackThreads_;
            std::shared_ptr<Progress> self = shared_from_this();
            callbackThreads_.emplace_back([self] { self->callbackLoop(); });
        }
    }
    callbackCv_.notify_one();
}

void Progress::callbackLoop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        callbackCv_.wait(lock, [&] { return callbacksStopping_ || !completed_.empty(); });
        if (completed_.empty()) break;
        c10::intrusive_ptr<WorkNnpccl> work = completed_.front();
        completed_.pop_front();
        --idleCallbackThreads_;
        lock.unlock();
        work->complete();
        // The Work's last reference goes before the lock is taken again: it
        // may hold the last reference to tensors, or to the group itself.
        work.reset();
        lock.lock();
        ++idleCallbackThreads_;
    }
    --idleCallbackThreads_;
}

} // namespace nnpccl_torch
