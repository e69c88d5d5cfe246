#include "comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "affinity.hpp"
#include "dtype.hpp"
#include "log.hpp"
#include "planner.hpp"
#include "reduce.hpp"
#include "emulated/emulated_transport.hpp"
#include "ofi/ofi_transport.hpp"
#include "shm/shm_transport.hpp"

using namespace nnpccl;

namespace {

// Ranks with the same host name and boot id share memory.
std::string host_identity() {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string boot_id;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
    return std::string(host) + "/" + boot_id;
}

// Wraps every transport in a decorator that paces each peer's traffic to the
// simulated links between the two ranks' chips.
Status emulate_links(nnpccl_comm &comm) {
    EmulationModel model;
    for (const Link &link : comm.topology.machine().links()) model.links.push_back({link.gbps, link.latency_us});
    model.path.assign(static_cast<size_t>(comm.nranks), {});
    for (int a = 0; a < comm.nranks; ++a) {
        model.path[static_cast<size_t>(a)].assign(static_cast<size_t>(comm.nranks), {});
        for (int b = 0; b < comm.nranks; ++b)
            if (a != b) model.path[static_cast<size_t>(a)][static_cast<size_t>(b)] = comm.topology.route(a, b).links;
    }
    model.scale = comm.settings.emulation.scale;
    NNPCCL_TRY(validate_emulation_model(model, comm.nranks));
    for (auto &inner : comm.transports) {
        comm.emulated.push_back(std::make_unique<EmulatedTransport>(inner.get(), comm.rank, model));
        for (Transport *&hop : comm.route)
            if (hop == inner.get()) hop = comm.emulated.back().get();
    }
    LOG_INFO("emulating the links of %s, %zu links, time scaled by %g", comm.topology.name().c_str(),
             model.links.size(), model.scale);
    return Status::ok();
}

// What the planner needs from the hosts, the same on every rank: γ, which
// rank 0 measures (how fast its host reduces, a few ms once per process)
// and the others take, the most crowded host's ranks per core, and rank 0's
// NNPCCL_TUNE. Ranks that used figures of their own could choose apart near
// a crossover and then run different schedules.
Status agree_on_host_costs(Bootstrap &bootstrap, int rank, double my_ranks_per_core, const Deadline &deadline,
                           HostFacts *facts, TuningOptions *tuning) {
    std::string mine = format("%a ", my_ranks_per_core); // hex floats: exact
    if (rank == 0) {
        for (double v : host_reduce_speed().us_per_byte) mine += format("%a ", v);
        mine += tuning->enabled ? "1" : "0";
    }
    std::vector<std::string> all;
    NNPCCL_TRY(bootstrap.allgather(mine, deadline, &all));
    facts->ranks_per_core = 1;
    const char *text = nullptr; // rank 0's reduction speeds, after its ranks per core
    for (const std::string &entry : all) {
        char *end = nullptr;
        facts->ranks_per_core = std::max(facts->ranks_per_core, std::strtod(entry.c_str(), &end));
        if (text == nullptr) text = end;
    }
    for (double &v : facts->reduce_us_per_byte) {
        char *end = nullptr;
        v = std::strtod(text, &end);
        if (end == text || !(v >= 0)) return internal_error("rank 0's reduction speeds '%s' do not parse", all[0].c_str());
        text = end;
    }
    tuning->enabled = std::strtol(text, nullptr, 10) == 1;
    return Status::ok();
}

// INFO: which algorithm a call got and what the others would have taken.
void log_plan(const CollectiveArgs &args, const Schedule &chosen, const std::vector<Prediction> &considered) {
    std::string candidates;
    for (const Prediction &p : considered) {
        candidates += candidates.empty() ? "" : ", ";
        candidates += p.applies ? format("%s %.1f us", p.algorithm->name, p.time_us)
                                : format("%s n/a (%s)", p.algorithm->name, p.why_not.c_str());
    }
    LOG_INFO("%s of %zu bytes: %s%s%s", collective_name(args.collective), call_bytes(args), chosen.algorithm.c_str(),
             considered.empty() ? " (forced by NNPCCL_ALGO)" : "; predicted: ", candidates.c_str());
}

} // namespace

Status nnpccl::parse_forced_algorithms(const PlanningOptions &planning, std::shared_ptr<const AlgoOverride> *out) {
    out->reset();
    if (planning.algorithms.empty()) return Status::ok();
    auto rules = std::make_shared<AlgoOverride>();
    std::string error;
    if (!rules->parse(planning.algorithms, &error, planning.algorithms_source)) return invalid_argument("%s", error.c_str());
    *out = std::move(rules);
    return Status::ok();
}

std::vector<Transport *> nnpccl_comm::active_transports() const {
    std::vector<Transport *> out;
    for (const auto &t : emulated.empty() ? transports : emulated) out.push_back(t.get());
    return out;
}

Status nnpccl_comm::prepare(int nranks, int rank, const nnpccl_config_t *config, std::unique_ptr<nnpccl_comm> *out) {
    auto comm = std::make_unique<nnpccl_comm>();
    comm->rank = rank;
    comm->nranks = nranks;
    NNPCCL_TRY(resolve_settings(config, &comm->settings));
    // A message carries a whole chunk of data and, first to each peer in an
    // operation, the operation's descriptor.
    comm->message_bytes = comm->settings.planning.chunk_bytes + kDescriptorBytes;
    NNPCCL_TRY(parse_forced_algorithms(comm->settings.planning, &comm->forced));
    set_log_rank(rank);
    *out = std::move(comm);
    return Status::ok();
}

namespace {

// Everything connect() does but the clean-up of a failure.
Status build(nnpccl_comm *comm, const UniqueId &id, const StopSignal *stop) {
    const int rank = comm->rank;
    const int nranks = comm->nranks;
    Deadline deadline = Deadline::after_seconds(comm->settings.timeout_sec);
    NNPCCL_TRY(Bootstrap::join(id, rank, nranks, deadline, &comm->bootstrap, stop));

    // Every rank says where it runs and which transport mode it was given;
    // ranks must agree on the mode, since transports are set up collectively.
    const char *mode_names[] = {"auto", "shm", "ofi"};
    const std::string mode = mode_names[static_cast<int>(comm->settings.transport)];
    std::vector<std::string> ids;
    NNPCCL_TRY(comm->bootstrap->allgather(mode + " " + host_identity(), deadline, &ids));
    std::vector<std::string> hosts;
    for (int r = 0; r < nranks; ++r) {
        const std::string &id_r = ids[static_cast<size_t>(r)];
        std::string mode_r = id_r.substr(0, id_r.find(' '));
        if (mode_r != mode)
            return invalid_usage("rank %d has NNPCCL_TRANSPORT=%s but rank %d has %s; every rank needs the same",
                                 rank, mode.c_str(), r, mode_r.c_str());
        hosts.push_back(id_r.substr(id_r.find(' ') + 1));
    }
    const std::string &my_host = hosts[static_cast<size_t>(rank)];
    std::vector<int> local;
    bool any_remote = false, any_host_shared = false;
    for (int r = 0; r < nranks; ++r) {
        if (hosts[static_cast<size_t>(r)] == my_host) local.push_back(r);
        any_remote = any_remote || hosts[static_cast<size_t>(r)] != hosts[0];
        for (int q = 0; q < r && !any_host_shared; ++q)
            any_host_shared = hosts[static_cast<size_t>(q)] == hosts[static_cast<size_t>(r)];
    }
    RankPlacement placement;
    int local_index = 0;
    for (size_t i = 0; i < local.size(); ++i)
        if (local[i] == rank) local_index = static_cast<int>(i);
    NNPCCL_TRY(place_local_rank(comm->settings.pin, local_index, static_cast<int>(local.size()), &placement));
    if (placement.numa_nodes > 1) comm->facts.numa_node = placement.numa_node;
    comm->facts.nic_hint = placement.nic;
    const TransportMode tm = comm->settings.transport;
    if (tm == TransportMode::Shm && any_remote)
        return invalid_usage("NNPCCL_TRANSPORT=shm, but the ranks run on more than one host (rank %d on %s, rank 0 on "
                             "%s)",
                             rank, my_host.c_str(), hosts[0].c_str());

    std::string topo_error;
    if (!load_topology(comm->settings.planning.topology, nranks, &comm->topology, &topo_error))
        return invalid_argument("NNPCCL_TOPO=%s: %s", comm->settings.planning.topology.c_str(), topo_error.c_str());
    const double ranks_per_core =
        placement.cores > 0 ? static_cast<double>(local.size()) / placement.cores : 1.0;
    NNPCCL_TRY(agree_on_host_costs(*comm->bootstrap, rank, ranks_per_core, deadline, &comm->facts,
                                   &comm->settings.tuning));
    comm->route.assign(static_cast<size_t>(nranks), nullptr);
    // Streams per peer: as many as the algorithm with the most channels needs.
    const int channels = max_schedule_channels(comm->topology);
    // Both set-ups are collective: every rank takes part when any rank needs one.
    Transport *shm_transport = nullptr;
    Transport *ofi_transport = nullptr;
    if (tm != TransportMode::Ofi && any_host_shared) {
        std::unique_ptr<ShmTransport> shm;
        NNPCCL_TRY(ShmTransport::create(*comm->bootstrap, local, channels, comm->settings.shm, comm->message_bytes,
                                        comm->facts.numa_node, deadline, &shm));
        shm_transport = shm.get();
        comm->transports.push_back(std::move(shm));
    }
    if (tm == TransportMode::Ofi || any_remote) {
        std::unique_ptr<OfiTransport> ofi;
        NNPCCL_TRY(OfiTransport::create(*comm->bootstrap, channels, comm->settings.ofi, comm->message_bytes,
                                        comm->facts.nic_hint, deadline, &ofi));
        ofi_transport = ofi.get();
        comm->transports.push_back(std::move(ofi));
    }
    std::string over_shm, over_ofi;
    for (int r = 0; r < nranks; ++r) {
        if (r == rank) continue;
        bool same_host = hosts[static_cast<size_t>(r)] == my_host;
        Transport *t = (same_host && tm != TransportMode::Ofi) ? shm_transport : ofi_transport;
        comm->route[static_cast<size_t>(r)] = t;
        std::string &list = t == shm_transport ? over_shm : over_ofi;
        list += (list.empty() ? "" : ",") + std::to_string(r);
    }
    if (!over_shm.empty()) LOG_INFO("rank %d reaches rank(s) %s over shm", rank, over_shm.c_str());
    if (!over_ofi.empty())
        LOG_INFO("rank %d reaches rank(s) %s over ofi (%s)", rank, over_ofi.c_str(),
                 static_cast<OfiTransport *>(ofi_transport)->description().c_str());
    if (comm->settings.emulation.links) NNPCCL_TRY(emulate_links(*comm));
    std::vector<Transport *> transports = comm->active_transports();
    comm->reduce_scratch.assign(comm->settings.planning.chunk_bytes, 0);
    comm->engine = std::make_unique<Engine>(transports, comm->settings.timeout_sec, comm->settings.spin_us,
                                            static_cast<int>(local.size()));
    Bootstrap *bootstrap = comm->bootstrap.get();
    comm->engine->set_job_check([bootstrap] { return bootstrap->check_job(); });
    comm->engine->set_failure_hook([bootstrap](const Status &why) { bootstrap->report_failure(why); });
    LOG_INFO("communicator ready: rank %d of %d, %zu on this host, topology %s", rank, nranks, local.size(),
             comm->topology.name().c_str());
    return Status::ok();
}

} // namespace

Status nnpccl_comm::connect(const UniqueId &id, const StopSignal *stop) {
    Status st = build(this, id, stop);
    if (st) return st;
    if (stop != nullptr && stop->raised()) {
        st = remote_error("rank %d aborted the communicator during init (nnpccl_comm_abort or nnpccl_comm_destroy "
                          "before init had finished)",
                          rank);
        // Peers would hear "died or aborted" from the root anyway; this says which.
        if (bootstrap != nullptr) bootstrap->report_failure(st);
    }
    // Released now, not at destroy: peers see this rank leave at once. What
    // depends on something goes before it.
    engine.reset();
    emulated.clear();
    transports.clear();
    route.clear();
    bootstrap.reset();
    return st;
}

void nnpccl_comm::set_last_error(const std::string &message) {
    std::lock_guard<std::mutex> lock(error_mutex);
    last_error = message;
}

namespace {

// Whether the call works in place, as ccl-bench and NCCL lay it out: the
// rank's part of the output is its input.
bool is_in_place(const CollectiveCall &call, int rank) {
    const size_t elem = datatype_size(call.datatype);
    switch (call.collective) {
    case Collective::Allreduce:
    case Collective::Broadcast:
    case Collective::Reduce: return call.send == call.recv;
    case Collective::ReduceScatter:
        return call.recv == static_cast<const char *>(call.send) + static_cast<size_t>(rank) * call.count * elem;
    case Collective::Allgather:
        return call.send == static_cast<const char *>(call.recv) + static_cast<size_t>(rank) * call.count * elem;
    // Only the root's buffers count (the others' recv, or send, may be NULL).
    case Collective::Gather:
        return rank == call.root &&
               call.send == static_cast<const char *>(call.recv) + static_cast<size_t>(rank) * call.count * elem;
    case Collective::Scatter:
        return rank == call.root &&
               call.recv == static_cast<const char *>(call.send) + static_cast<size_t>(rank) * call.count * elem;
    case Collective::Alltoall: return call.send == call.recv;
    case Collective::Send:
    case Collective::Recv:
    case Collective::Barrier: break;
    }
    return false;
}

} // namespace

CollectiveArgs nnpccl_comm::args_for(const CollectiveCall &call) const {
    const size_t elem = datatype_size(call.datatype);
    CollectiveArgs args;
    args.collective = call.collective;
    args.count = call.count;
    args.root = call.root;
    args.in_place = is_in_place(call, rank);
    args.rank = rank;
    args.nranks = nranks;
    args.chunk_elems = std::max<size_t>(1, settings.planning.chunk_bytes / std::max<size_t>(1, elem));
    args.elem_size = elem;
    return args;
}

namespace {

PlanOptions plan_options(const nnpccl_comm &comm) {
    PlanOptions options;
    if (comm.forced != nullptr) options.algo_override = *comm.forced;
    std::copy(comm.facts.reduce_us_per_byte.begin(), comm.facts.reduce_us_per_byte.end(),
              options.costs.host_reduce_us_per_byte);
    options.costs.host_ranks_per_core = comm.facts.ranks_per_core;
    return options;
}

ScheduleCache::Key cache_key(const CollectiveArgs &args, const AlgorithmInfo *algorithm) {
    return {static_cast<int>(args.collective), args.count, args.elem_size, args.root, args.in_place, algorithm};
}

} // namespace

Status nnpccl_comm::schedule_for(const CollectiveArgs &args, std::shared_ptr<const Schedule> *out) {
    // A forced algorithm's plan is cached under its name, so that a
    // communicator whose forced algorithms change (ccl-bench --compare)
    // never runs another's plan.
    const std::string *forced_name = forced != nullptr ? forced->pick(args.collective, call_bytes(args)) : nullptr;
    std::lock_guard<std::mutex> lock(plan_mutex);
    const ScheduleCache::Key key = cache_key(args, forced_name != nullptr ? find_algorithm(*forced_name) : nullptr);
    std::shared_ptr<const Schedule> schedule = schedule_cache.find(key);
    if (schedule == nullptr) {
        // Rank 0 logs each collective's choice once per power-of-two size.
        const bool log = rank == 0 && log_level() >= LogLevel::Info &&
                         logged_plans.insert({static_cast<int>(args.collective), size_class(call_bytes(args))}).second;
        std::vector<Prediction> considered;
        std::string error;
        if (!plan_schedule(args, topology, plan_options(*this), &schedule, &error, log ? &considered : nullptr))
            return invalid_usage("%s", error.c_str());
        if (log) log_plan(args, *schedule, considered);
        schedule_cache.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

Status nnpccl_comm::schedule_with(const AlgorithmInfo &algorithm, const CollectiveArgs &args,
                                  std::shared_ptr<const Schedule> *out) {
    std::lock_guard<std::mutex> lock(plan_mutex);
    const ScheduleCache::Key key = cache_key(args, &algorithm);
    std::shared_ptr<const Schedule> schedule = schedule_cache.find(key);
    if (schedule == nullptr) {
        std::string why_not;
        if (!algorithm.applies(args, topology, &why_not))
            return internal_error("%s was chosen for %s but does not apply: %s", algorithm.name,
                                  collective_name(args.collective), why_not.c_str());
        schedule = std::make_shared<const Schedule>(algorithm.build(args, topology));
        schedule_cache.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

namespace {

// How a call is planned: by the model (or NNPCCL_ALGO) through the
// schedule cache, or by the tuner: a trial's algorithm, its decision, or
// (algorithm null) the decision it will have made by the time the call runs.
struct Choice {
    bool tuned = false;
    const AlgorithmInfo *algorithm = nullptr;
    std::shared_ptr<TuningEntry> tuning;
    int trial = -1;
    bool sync_before = false;
    bool agree_after = false;
};

// Whether the tuner may measure calls like `args` on this communicator:
// tuning is on, the call is a collective with a choice, the topology is the
// host itself (not a simulated machine), and NNPCCL_ALGO forces nothing.
bool may_tune(const nnpccl_comm &comm, const CollectiveArgs &args) {
    if (!comm.settings.tuning.enabled || comm.nranks <= 1 || is_point_to_point(args.collective) || args.collective == Collective::Barrier ||
        comm.topology.machine().shape() != Shape::Flat)
        return false;
    return comm.forced == nullptr || comm.forced->pick(args.collective, call_bytes(args)) == nullptr;
}

// INFO: which algorithms the tuner measures for a size class, and the model's figures.
void log_tuning(const CollectiveArgs &args, const TuningEntry &entry, const std::vector<Prediction> &predictions) {
    std::string measured, predicted;
    for (const AlgorithmInfo *a : entry.candidates()) measured += (measured.empty() ? "" : ", ") + std::string(a->name);
    for (const Prediction &p : predictions)
        if (p.applies)
            predicted += (predicted.empty() ? "" : ", ") + format("%s %.1f us", p.algorithm->name, p.time_us);
    LOG_INFO("%s of %zu bytes: measuring %s, %d rounds of %d calls each; predicted: %s",
             collective_name(args.collective), call_bytes(args), measured.c_str(), kTuningRounds, entry.batch(),
             predicted.c_str());
}

void log_decision(const CollectiveArgs &args, const TuningEntry &entry, const std::vector<double> &agreed) {
    std::string measured;
    for (size_t k = 0; k < entry.candidates().size() && k < agreed.size(); ++k)
        measured += (measured.empty() ? "" : ", ") + format("%s %.1f us", entry.candidates()[k]->name, agreed[k]);
    LOG_INFO("%s of %zu bytes: %s; measured (per call, the fastest round, the mean over ranks): %s",
             collective_name(args.collective), call_bytes(args), entry.decided()->name, measured.c_str());
}

// The tuning entry of the call's size class, made on first sight; null
// where the model (or NNPCCL_ALGO) decides: the tuner may not measure the
// call, the communicator is still in its first calls, or the model sees
// only one algorithm close to its fastest.
std::shared_ptr<TuningEntry> tuning_entry(nnpccl_comm &comm, const CollectiveArgs &args) {
    if (!may_tune(comm, args) || comm.next_sequence < kTuningAfterCalls) return nullptr;
    const Tuner::Key key = Tuner::key_for(args);
    std::shared_ptr<TuningEntry> entry = comm.tuner.find(key);
    if (entry == nullptr && !comm.tuner.model_decides(key)) {
        const std::vector<Prediction> predictions = predict_all(args, comm.topology, plan_options(comm).costs);
        entry = comm.tuner.add(key, predictions);
        if (entry != nullptr && comm.rank == 0 && log_level() >= LogLevel::Info) log_tuning(args, *entry, predictions);
    }
    return entry;
}

// The tuner's part of planning a call: out->tuned stays false where it has none.
void choose_plan(nnpccl_comm &comm, const CollectiveArgs &args, Choice *out) {
    *out = Choice{};
    std::shared_ptr<TuningEntry> entry = tuning_entry(comm, args);
    if (entry == nullptr) return;
    out->tuned = true;
    out->tuning = entry;
    out->algorithm = entry->next(&out->trial, &out->sync_before, &out->agree_after);
}

} // namespace

std::shared_ptr<Operation> nnpccl_comm::new_operation(const CollectiveCall &call, OperationBuffers *buffers) {
    const size_t elem = datatype_size(call.datatype);
    const bool p2p = is_point_to_point(call.collective);
    uint64_t sequence = 0;
    if (p2p) {
        if (sends_to.empty()) {
            sends_to.assign(static_cast<size_t>(nranks), 0);
            recvs_from.assign(static_cast<size_t>(nranks), 0);
        }
        sequence = (call.collective == Collective::Send ? sends_to : recvs_from)[static_cast<size_t>(call.root)]++;
    } else {
        sequence = next_sequence++;
    }
    auto op = std::make_shared<Operation>();
    *buffers = OperationBuffers{};
    buffers->send = call.send;
    buffers->recv = call.recv;
    buffers->datatype = call.datatype;
    buffers->op = call.op;
    buffers->nranks = static_cast<uint32_t>(nranks);
    buffers->descriptor.collective = static_cast<uint32_t>(call.collective);
    buffers->descriptor.sequence = sequence;
    buffers->descriptor.count = call.count;
    // The peer of a send or recv rides in the root field.
    const bool rooted = has_root(call.collective) || p2p;
    buffers->descriptor.datatype = call.collective == Collective::Barrier ? -1 : static_cast<int32_t>(call.datatype);
    buffers->descriptor.op = reduces(call.collective) ? static_cast<int32_t>(call.op) : -1;
    buffers->descriptor.root = rooted ? call.root : -1;
    buffers->expected = buffers->descriptor;
    if (call.collective == Collective::Recv) {
        // What the matching send announces: a send, numbered by its sender's
        // count of sends to us, whose peer is this rank.
        buffers->expected.collective = static_cast<uint32_t>(Collective::Send);
        buffers->expected.root = rank;
    }
    if (p2p) {
        const size_t bytes = call.count * elem;
        const bool sends = call.collective == Collective::Send;
        op->p2p.active = true;
        op->p2p.peer = call.root;
        op->p2p.sends = sends;
        op->p2p.begin = sends ? static_cast<const char *>(call.send) : static_cast<const char *>(call.recv);
        op->p2p.end = op->p2p.begin == nullptr ? nullptr : op->p2p.begin + bytes;
        op->description = format("%s #%llu %s rank %d (%zu x %s)", collective_name(call.collective),
                                 static_cast<unsigned long long>(sequence), sends ? "to" : "from", call.root,
                                 call.count, datatype_name(call.datatype));
    } else {
        op->description = format("%s #%llu (%zu x %s, %s%s)", collective_name(call.collective),
                                 static_cast<unsigned long long>(sequence), call.count, datatype_name(call.datatype),
                                 redop_name(call.op), is_in_place(call, rank) ? ", in place" : "");
    }
    return op;
}

void nnpccl_comm::attach_run(Operation &op, std::shared_ptr<const Schedule> schedule, OperationBuffers buffers) {
    op.scratch = scratch_pool->acquire(schedule->scratch_elems * datatype_size(buffers.datatype));
    buffers.scratch = op.scratch.get();
    op.run = std::make_unique<ScheduleRun>(std::move(schedule), buffers, route, reduce_scratch.data());
}

Status nnpccl_comm::start(const CollectiveCall &call, bool background, std::shared_ptr<Operation> *out) {
    const CollectiveArgs args = args_for(call);
    Choice choice;
    choose_plan(*this, args, &choice);
    std::shared_ptr<const Schedule> schedule;
    if (!choice.tuned) NNPCCL_TRY(schedule_for(args, &schedule));
    else if (choice.algorithm != nullptr) NNPCCL_TRY(schedule_with(*choice.algorithm, args, &schedule));
    if (choice.sync_before) {
        CollectiveCall barrier;
        barrier.collective = Collective::Barrier;
        std::shared_ptr<Operation> sync;
        NNPCCL_TRY(start(barrier, background, &sync));
    }
    OperationBuffers buffers;
    std::shared_ptr<Operation> op = new_operation(call, &buffers);
    if (schedule != nullptr) {
        attach_run(*op, std::move(schedule), buffers);
    } else {
        // The agreement ahead of this call in the queue will have decided
        // when the engine gets here: collectives run one at a time, in order.
        op->prepare = [this, args, buffers, tuning = choice.tuning](Operation &self) {
            const AlgorithmInfo *decided = tuning->decided();
            if (decided == nullptr)
                return internal_error("the tuner had not decided on an algorithm for %s when it was due to run",
                                      self.description.c_str());
            std::shared_ptr<const Schedule> planned;
            NNPCCL_TRY(schedule_with(*decided, args, &planned));
            attach_run(self, std::move(planned), buffers);
            return Status::ok();
        };
    }
    if (choice.trial >= 0)
        op->on_success = [tuning = choice.tuning, trial = choice.trial](double us) { tuning->record(trial, us); };
    engine->submit(op, background);
    if (choice.agree_after) agree(choice.tuning, args, background);
    *out = op;
    return Status::ok();
}

void nnpccl_comm::agree(const std::shared_ptr<TuningEntry> &tuning, const CollectiveArgs &tuned, bool background) {
    // An allreduce (sum) of every candidate's figure and of whether this
    // rank timed it: every rank then holds the same numbers, so every rank
    // decides alike, on the mean over the ranks of their time per call (as
    // ccl-bench reports time; for a broadcast or reduce, where the root is
    // done long before the last rank, the slowest rank alone ranked the
    // chain below the tree at 1-4 MiB, where ccl-bench timed it 1.2x
    // faster). Every allreduce schedule gives every rank the same bits.
    // Its buffers: this rank's figures and flags, then the sums.
    const size_t n = tuning->candidates().size();
    auto numbers = std::make_shared<std::vector<double>>(4 * n, 0.0);
    CollectiveCall call;
    call.collective = Collective::Allreduce;
    call.send = numbers->data();
    call.recv = numbers->data() + 2 * n;
    call.count = 2 * n;
    call.datatype = NNPCCL_FLOAT64;
    call.op = NNPCCL_SUM;
    const CollectiveArgs args = args_for(call);
    OperationBuffers buffers;
    std::shared_ptr<Operation> op = new_operation(call, &buffers);
    op->description = "the tuner's agreement on " + std::string(collective_name(tuned.collective)) + " of " +
                      std::to_string(call_bytes(tuned)) + " bytes (" + op->description + ")";
    // Prepared when it runs, after the trials ahead of it have finished and
    // been timed; planned by the model alone, whatever NNPCCL_ALGO forces
    // (and read here, on the issuing thread, which may change those).
    PlanOptions options;
    options.costs = plan_options(*this).costs;
    op->prepare = [this, args, buffers, numbers, tuning, options](Operation &self) {
        const std::vector<double> mine = tuning->figures();
        for (size_t k = 0; k < mine.size(); ++k) {
            (*numbers)[k] = mine[k];
            (*numbers)[mine.size() + k] = mine[k] > 0 ? 1 : 0;
        }
        std::string error;
        const AlgorithmInfo *algorithm = choose_algorithm(args, topology, options, &error);
        if (algorithm == nullptr) return internal_error("planning the tuner's agreement: %s", error.c_str());
        std::shared_ptr<const Schedule> planned;
        NNPCCL_TRY(schedule_with(*algorithm, args, &planned));
        attach_run(self, std::move(planned), buffers);
        return Status::ok();
    };
    op->on_success = [this, numbers, tuning, tuned](double) {
        // A candidate some rank did not time (0) cannot win.
        const size_t n = tuning->candidates().size();
        std::vector<double> means(n, 0);
        for (size_t k = 0; k < n; ++k)
            if ((*numbers)[3 * n + k] == nranks) means[k] = (*numbers)[2 * n + k] / nranks;
        tuning->decide(means);
        if (rank == 0 && log_level() >= LogLevel::Info) log_decision(tuned, *tuning, means);
    };
    engine->submit(op, background);
}

Status nnpccl_comm::algorithm_for(const CollectiveCall &call, std::string *name) {
    const CollectiveArgs args = args_for(call);
    if (may_tune(*this, args)) {
        if (std::shared_ptr<TuningEntry> tuning = tuner.find(Tuner::key_for(args))) {
            const AlgorithmInfo *decided = tuning->decided();
            *name = decided != nullptr ? decided->name : "";
            return Status::ok();
        }
    }
    std::shared_ptr<const Schedule> schedule;
    NNPCCL_TRY(schedule_for(args, &schedule));
    *name = schedule->algorithm;
    return Status::ok();
}

size_t nnpccl_comm::tuning_calls_left(const CollectiveCall &call) {
    const CollectiveArgs args = args_for(call);
    if (std::shared_ptr<TuningEntry> entry = tuning_entry(*this, args)) return entry->trials_left();
    // Still in the first calls, where an entry may yet be made: one more.
    return may_tune(*this, args) && next_sequence < kTuningAfterCalls ? 1 : 0;
}
