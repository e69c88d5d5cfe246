#include "process_group_nnpccl.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace nnpccl_torch {

namespace {

// Off only where every rank of the group sets it alike: a sender without
// notices leaves nothing a receive from any source could find.
bool sendsLeaveNotices() {
    const char *value = std::getenv("NNPCCL_TORCH_ANY_SOURCE");
    return value == nullptr || std::string(value) != "0";
}

} // namespace

ProcessGroupNnpccl::ProcessGroupNnpccl(const c10::intrusive_ptr<::c10d::Store> &store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : NNPCCL_TORCH_BASE(rank, size), store_(store), timeout_(timeout), notices_(sendsLeaveNotices()),
      sentTo_(static_cast<size_t>(size)), receivedFrom_(static_cast<size_t>(size)) {
    // A group's store prefix comes back when its group name is used again
    // on a store that outlived the earlier group (a store passed to
    // init_process_group, a launcher's store). Every rank counts its inits
    // in the store, so the k-th init of the group reads the id of the k-th,
    // never a stale one.
    int64_t ticket = store->add("nnpccl_init_count", 1);
    std::string generation = std::to_string((ticket - 1) / size);
    std::string key = "nnpccl_unique_id_" + generation;
    // The keys of this group's later agreements (monitored barriers, notices
    // of sends), apart from an earlier group's of the same name.
    keyPrefix_ = "nnpccl/" + generation + "/";
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
    progress_ = std::make_shared<Progress>(comm_, rank);
    progress_->start();
}

ProcessGroupNnpccl::~ProcessGroupNnpccl() { progress_->stop(); }

c10::intrusive_ptr<WorkNnpccl> ProcessGroupNnpccl::makeWork(::c10d::OpType type, const char *profilingTitle,
                                                            std::vector<at::Tensor> outputs,
                                                            const std::vector<at::Tensor> &inputs) {
    return c10::make_intrusive<WorkNnpccl>(rank_, type, profilingTitle, std::move(outputs), inputs);
}

void ProcessGroupNnpccl::check(nnpccl_result_t result) {
    if (result != NNPCCL_SUCCESS) throw std::runtime_error(progress_->errorMessage(result));
}

void ProcessGroupNnpccl::post(WorkNnpccl &work, nnpccl_result_t result, const nnpccl_request_t &request) {
    check(result);
    work.requests.push_back(request);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::submit(const c10::intrusive_ptr<WorkNnpccl> &work,
                                                            const std::function<void()> &body) {
    std::exception_ptr error;
    {
        std::lock_guard<std::mutex> lock(progress_->issueMutex);
        try {
            body();
        } catch (...) {
            error = std::current_exception();
        }
    }
    if (error && work->requests.empty()) std::rethrow_exception(error);
    if (error) {
        try {
            std::rethrow_exception(error);
        } catch (const std::exception &e) {
            work->failure = e.what();
        }
    }
    ::c10d::OpType type = work->retrieveOpType();
    // As Gloo counts them: the collectives every rank of the group calls.
    if (type != ::c10d::OpType::SEND && type != ::c10d::OpType::RECV && type != ::c10d::OpType::RECVANYSOURCE)
        ++sequence_;
    progress_->enqueue(work);
    if (error) std::rethrow_exception(error);
    return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupNnpccl::barrier(const ::c10d::BarrierOptions &) {
    auto work = makeWork(::c10d::OpType::BARRIER, "nnpccl:barrier", {}, {});
    return submit(work, [&] {
        nnpccl_request_t req = nullptr;
        post(*work, nnpccl_ibarrier(comm_, &req), req);
    });
}

// Through the store rather than the communicator, as a check of who is
// there should be: rank 0 waits for every other rank's arrival up to the
// timeout and names those that did not come; the others wait for rank 0's
// verdict. Nothing is left pending in nnpccl, so the group stays usable.
void ProcessGroupNnpccl::monitoredBarrier(const ::c10d::BarrierOptions &opts, bool waitAllRanks) {
    auto start = std::chrono::steady_clock::now();
    std::chrono::milliseconds timeout = opts.timeout == ::c10d::kUnsetTimeout ? timeout_ : opts.timeout;
    std::string prefix = keyPrefix_ + "monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
    std::string released = prefix + "released";
    if (rank_ != 0) {
        store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
        bool passed = false;
        try {
            store_->wait({released}, timeout);
            passed = store_->get(released) == std::vector<uint8_t>{1};
        } catch (const std::exception &) {
        }
        TORCH_CHECK(passed, "Rank ", rank_, " successfully reached monitoredBarrier, but received errors while ",
                    "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.");
        return;
    }
    std::vector<int> failed;
    std::string timedOut;
    for (int r = 1; r < size_ && (waitAllRanks || failed.empty()); ++r) {
        auto remaining =
            timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        if (remaining.count() <= 0) {
            timedOut = "Rank 0 timed out in monitoredBarrier after " + std::to_string(timeout.count()) + " ms.";
            break;
        }
        try {
            store_->wait({prefix + std::to_string(r)}, remaining);
        } catch (const std::exception &) {
            failed.push_back(r);
        }
    }
    bool passed = failed.empty() && timedOut.empty();
    store_->set(released, std::vector<uint8_t>{static_cast<uint8_t>(passed ? 1 : 0)});
    TORCH_CHECK(timedOut.empty(), timedOut);
    if (failed.size() == 1 || (!failed.empty() && !waitAllRanks))
        TORCH_CHECK(false, "Rank ", failed[0], " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    if (!failed.empty()) {
        std::string ranks;
        for (int r : failed) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
        TORCH_CHECK(false, "Ranks ", ranks, " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
}

void ProcessGroupNnpccl::setSequenceNumberForGroup() { sequence_ = 0; }

uint64_t ProcessGroupNnpccl::getSequenceNumberForGroup() { return sequence_; }

} // namespace nnpccl_torch
