// Enqueue: one validated call becomes a numbered operation with the
// selector's schedule, queued on the progress engine (docs/design.md,
// "Life of a call").
#include "comm.hpp"

#include <algorithm>

#include "dtype.hpp"
#include "log.hpp"

using namespace nnpccl;

void nnpccl_comm::number(const Call &call, Announcement *announcement, OperationName *name) {
    const bool p2p = is_point_to_point(call.collective);
    uint64_t sequence = 0;
    if (p2p) {
        if (sends_to_.empty()) {
            sends_to_.assign(static_cast<size_t>(nranks_), 0);
            recvs_from_.assign(static_cast<size_t>(nranks_), 0);
        }
        sequence = (call.collective == Collective::Send ? sends_to_ : recvs_from_)[static_cast<size_t>(call.root)]++;
    } else {
        sequence = next_sequence_++;
    }
    OperationDescriptor &d = announcement->descriptor;
    d = OperationDescriptor{};
    d.collective = static_cast<uint32_t>(call.collective);
    d.sequence = sequence;
    d.count = call.count;
    d.datatype = call.collective == Collective::Barrier ? -1 : static_cast<int32_t>(call.datatype);
    d.op = reduces(call.collective) ? static_cast<int32_t>(call.op) : -1;
    // The peer of a send or recv rides in the root field.
    d.root = has_root(call.collective) || p2p ? call.root : -1;
    announcement->expected = d;
    if (call.collective == Collective::Recv) {
        // What the matching send announces: a send, numbered by its sender's
        // count of sends to us, whose peer is this rank.
        announcement->expected.collective = static_cast<uint32_t>(Collective::Send);
        announcement->expected.root = rank_;
    }
    *name = OperationName::of(call, sequence);
}

std::shared_ptr<Operation> nnpccl_comm::new_operation(const Call &call, Announcement *announcement) {
    auto op = std::make_shared<Operation>();
    number(call, announcement, &op->name);
    if (is_point_to_point(call.collective)) {
        const bool sends = call.collective == Collective::Send;
        op->p2p.active = true;
        op->p2p.peer = call.root;
        op->p2p.sends = sends;
        op->p2p.begin = sends ? static_cast<const char *>(call.send) : static_cast<const char *>(call.recv);
        op->p2p.end = op->p2p.begin == nullptr ? nullptr : op->p2p.begin + call.count * call.elem_size;
    }
    return op;
}

void nnpccl_comm::attach_run(Operation &op, std::shared_ptr<const Schedule> schedule, const Call &call,
                             const Announcement &announcement) {
    op.scratch = scratch_pool_->acquire(schedule->scratch_elems * call.elem_size);
    op.run = std::make_unique<ScheduleRun>(std::move(schedule), call, op.scratch.get(), announcement, links_.routes(),
                                           reduce_scratch_.data(), trace_);
}

Status nnpccl_comm::start(const Call &call, bool background, std::shared_ptr<Operation> *out) {
    Plan plan;
    NNPCCL_TRY(selector_->choose(call, next_sequence_, &plan));
    return start_planned(call, std::move(plan), background, out);
}

Status nnpccl_comm::start_and_wait(const Call &call, Plan plan) {
    std::shared_ptr<Operation> op;
    NNPCCL_TRY(start_planned(call, std::move(plan), false, &op));
    return engine_->wait(*op);
}

Status nnpccl_comm::run_blocking(const Call &call) {
    Engine::ShortDrive driving;
    // Sends and receives queue, since their order against other pending
    // ones is the queue's business.
    if (is_point_to_point(call.collective) || !engine_->try_drive_alone(&driving)) {
        Plan plan;
        NNPCCL_TRY(selector_->choose(call, next_sequence_, &plan));
        return start_and_wait(call, std::move(plan));
    }
    // Driving alone: the blocking run and its shape are this thread's.
    const PlannedShape shape{ScheduleCache::key_for(call, nullptr), selector_->generation()};
    std::shared_ptr<const Schedule> replanned;
    if (blocking_run_ == nullptr || blocking_shape_ != shape) {
        Plan plan;
        NNPCCL_TRY(selector_->choose(call, next_sequence_, &plan));
        // So do the tuner's trials and agreements.
        if (plan.schedule == nullptr || plan.trial >= 0 || plan.sync_before || plan.agree_after) {
            driving.release();
            return start_and_wait(call, std::move(plan));
        }
        replanned = std::move(plan.schedule);
        blocking_shape_ = selector_->settled(call) ? std::optional<PlannedShape>(shape) : std::nullopt;
    }
    const Schedule &schedule = replanned != nullptr ? *replanned : blocking_run_->schedule();
    ScratchPool::Lease scratch = scratch_pool_->acquire(schedule.scratch_elems * call.elem_size);
    if (replanned == nullptr && call.datatype == blocking_run_->call().datatype &&
        call.op == blocking_run_->call().op) {
        // The last call's shape, datatype and op: its announcement but for
        // the number.
        const uint64_t sequence = next_sequence_++;
        blocking_run_->again(call, scratch.get(), sequence);
        return engine_->run_alone(*blocking_run_, OperationName::of(call, sequence));
    }
    Announcement announcement;
    OperationName name;
    number(call, &announcement, &name);
    if (blocking_run_ == nullptr)
        blocking_run_ = std::make_unique<ScheduleRun>(std::move(replanned), call, scratch.get(), announcement,
                                                      links_.routes(), reduce_scratch_.data(), trace_);
    else if (replanned != nullptr)
        blocking_run_->restart(std::move(replanned), call, scratch.get(), announcement);
    else
        blocking_run_->again(call, scratch.get(), announcement);
    return engine_->run_alone(*blocking_run_, name);
}

Status nnpccl_comm::start_planned(const Call &call, Plan plan, bool background, std::shared_ptr<Operation> *out) {
    if (plan.sync_before) {
        Call barrier;
        barrier.collective = Collective::Barrier;
        barrier.datatype = NNPCCL_UINT8;
        complete(&barrier);
        std::shared_ptr<Operation> sync;
        NNPCCL_TRY(start(barrier, background, &sync));
    }
    Announcement announcement;
    std::shared_ptr<Operation> op = new_operation(call, &announcement);
    if (plan.schedule != nullptr) {
        attach_run(*op, std::move(plan.schedule), call, announcement);
    } else {
        // The agreement ahead of this call in the queue will have decided
        // when the engine gets here: collectives run one at a time, in order.
        op->prepare = [this, call, announcement, tuning = plan.tuning](Operation &self) {
            const AlgorithmInfo *decided = tuning->decided();
            if (decided == nullptr)
                return internal_error("the tuner had not decided on an algorithm for %s when it was due to run",
                                      self.description().c_str());
            std::shared_ptr<const Schedule> planned;
            NNPCCL_TRY(selector_->schedule_with(*decided, call, &planned));
            attach_run(self, std::move(planned), call, announcement);
            return Status::ok();
        };
    }
    if (plan.trial >= 0)
        op->on_success = [tuning = plan.tuning, trial = plan.trial](double us) { tuning->record(trial, us); };
    engine_->submit(op, background);
    if (plan.agree_after) agree(plan.tuning, call, background);
    *out = op;
    return Status::ok();
}

namespace {

void log_decision(const CollectiveArgs &args, const TuningEntry &entry, const std::vector<double> &agreed) {
    std::string measured;
    for (size_t k = 0; k < entry.candidates().size() && k < agreed.size(); ++k)
        measured += (measured.empty() ? "" : ", ") + format("%s %.1f us", entry.candidates()[k]->name, agreed[k]);
    LOG_INFO("%s of %zu bytes: %s; measured (per call, the fastest round, the mean over ranks): %s",
             collective_name(args.collective), call_bytes(args), entry.decided()->name, measured.c_str());
}

} // namespace

void nnpccl_comm::agree(const std::shared_ptr<TuningEntry> &tuning, const CollectiveArgs &tuned, bool background) {
    // An allreduce (sum) of every candidate's figure and of whether this
    // rank timed it: every rank then holds the same numbers, so every rank
    // decides alike, on the mean over the ranks of their time per call (as
    // ccl-bench reports time; for a broadcast or reduce, where the root is
    // done long before the last rank, the slowest rank alone would rank
    // the algorithms by the last rank's wait). Every allreduce schedule
    // gives every rank the same bits. Its buffers: this rank's figures and
    // flags, then the sums.
    const size_t n = tuning->candidates().size();
    auto numbers = std::make_shared<std::vector<double>>(4 * n, 0.0);
    Call call;
    call.collective = Collective::Allreduce;
    call.send = numbers->data();
    call.recv = numbers->data() + 2 * n;
    call.count = 2 * n;
    call.datatype = NNPCCL_FLOAT64;
    call.op = NNPCCL_SUM;
    complete(&call);
    Announcement announcement;
    std::shared_ptr<Operation> op = new_operation(call, &announcement);
    op->name.context = "the tuner's agreement on " + std::string(collective_name(tuned.collective)) + " of " +
                       std::to_string(call_bytes(tuned)) + " bytes";
    // Prepared when it runs, after the trials ahead of it have finished and
    // been timed; planned by the model alone, whatever is forced.
    op->prepare = [this, call, announcement, numbers, tuning](Operation &self) {
        const std::vector<double> mine = tuning->figures();
        for (size_t k = 0; k < mine.size(); ++k) {
            (*numbers)[k] = mine[k];
            (*numbers)[mine.size() + k] = mine[k] > 0 ? 1 : 0;
        }
        const AlgorithmInfo *algorithm = nullptr;
        NNPCCL_TRY(selector_->model_choice(call, &algorithm));
        std::shared_ptr<const Schedule> planned;
        NNPCCL_TRY(selector_->schedule_with(*algorithm, call, &planned));
        attach_run(self, std::move(planned), call, announcement);
        return Status::ok();
    };
    op->on_success = [this, numbers, tuning, tuned](double) {
        // A candidate some rank did not time (0) cannot win.
        const size_t n = tuning->candidates().size();
        std::vector<double> means(n, 0);
        for (size_t k = 0; k < n; ++k)
            if ((*numbers)[3 * n + k] == nranks_) means[k] = (*numbers)[2 * n + k] / nranks_;
        tuning->decide(means);
        if (rank_ == 0 && log_level() >= LogLevel::Info) log_decision(tuned, *tuning, means);
    };
    engine_->submit(op, background);
}
