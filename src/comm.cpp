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
    model.scale = comm.settings.emulate_scale;
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
// and the others take, and the most crowded host's ranks per core. Ranks
// that used figures of their own could choose apart near a crossover and
// then run different schedules.
Status agree_on_host_costs(Bootstrap &bootstrap, int rank, double my_ranks_per_core, const Deadline &deadline,
                           Settings *settings) {
    std::string mine = format("%a ", my_ranks_per_core); // hex floats: exact
    if (rank == 0)
        for (double v : host_reduce_speed().us_per_byte) mine += format("%a ", v);
    std::vector<std::string> all;
    NNPCCL_TRY(bootstrap.allgather(mine, deadline, &all));
    settings->ranks_per_core = 1;
    const char *text = nullptr; // rank 0's reduction speeds, after its ranks per core
    for (const std::string &entry : all) {
        char *end = nullptr;
        settings->ranks_per_core = std::max(settings->ranks_per_core, std::strtod(entry.c_str(), &end));
        if (text == nullptr) text = end;
    }
    for (double &v : settings->reduce_us_per_byte) {
        char *end = nullptr;
        v = std::strtod(text, &end);
        if (end == text || !(v >= 0)) return internal_error("rank 0's reduction speeds '%s' do not parse", all[0].c_str());
        text = end;
    }
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
    comm->settings.message_bytes = comm->settings.chunk_bytes + kDescriptorBytes;
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
    if (placement.numa_nodes > 1) comm->settings.numa_node = placement.numa_node;
    comm->settings.nic_hint = placement.nic;
    const TransportMode tm = comm->settings.transport;
    if (tm == TransportMode::Shm && any_remote)
        return invalid_usage("NNPCCL_TRANSPORT=shm, but the ranks run on more than one host (rank %d on %s, rank 0 on "
                             "%s)",
                             rank, my_host.c_str(), hosts[0].c_str());

    std::string topo_error;
    if (!load_topology(comm->settings.topology, nranks, &comm->topology, &topo_error))
        return invalid_argument("NNPCCL_TOPO=%s: %s", comm->settings.topology.c_str(), topo_error.c_str());
    const double ranks_per_core =
        placement.cores > 0 ? static_cast<double>(local.size()) / placement.cores : 1.0;
    NNPCCL_TRY(agree_on_host_costs(*comm->bootstrap, rank, ranks_per_core, deadline, &comm->settings));
    comm->route.assign(static_cast<size_t>(nranks), nullptr);
    // Streams per peer: as many as the algorithm with the most channels needs.
    const int channels = max_schedule_channels(comm->topology);
    // Both set-ups are collective: every rank takes part when any rank needs one.
    Transport *shm_transport = nullptr;
    Transport *ofi_transport = nullptr;
    if (tm != TransportMode::Ofi && any_host_shared) {
        std::unique_ptr<ShmTransport> shm;
        NNPCCL_TRY(ShmTransport::create(*comm->bootstrap, local, channels, comm->settings, deadline, &shm));
        shm_transport = shm.get();
        comm->transports.push_back(std::move(shm));
    }
    if (tm == TransportMode::Ofi || any_remote) {
        std::unique_ptr<OfiTransport> ofi;
        NNPCCL_TRY(OfiTransport::create(*comm->bootstrap, channels, comm->settings, deadline, &ofi));
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
    if (comm->settings.emulate_links) NNPCCL_TRY(emulate_links(*comm));
    std::vector<Transport *> transports = comm->active_transports();
    comm->reduce_scratch.assign(comm->settings.chunk_bytes, 0);
    comm->engine = std::make_unique<Engine>(transports, comm->settings, static_cast<int>(local.size()));
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

Status nnpccl_comm::schedule_for(const CollectiveCall &call, std::shared_ptr<const Schedule> *out) {
    const size_t elem = datatype_size(call.datatype);
    const bool in_place = is_in_place(call, rank);
    const size_t chunk_elems = std::max<size_t>(1, settings.chunk_bytes / std::max<size_t>(1, elem));
    ScheduleCache::Key key{static_cast<int>(call.collective), call.count, elem, call.root, in_place};
    std::shared_ptr<const Schedule> schedule = schedule_cache.find(key);
    if (schedule == nullptr) {
        CollectiveArgs args;
        args.collective = call.collective;
        args.count = call.count;
        args.root = call.root;
        args.in_place = in_place;
        args.rank = rank;
        args.nranks = nranks;
        args.chunk_elems = chunk_elems;
        args.elem_size = elem;
        PlanOptions options;
        if (settings.algo_override != nullptr) options.algo_override = *settings.algo_override;
        std::copy(settings.reduce_us_per_byte.begin(), settings.reduce_us_per_byte.end(),
                  options.costs.host_reduce_us_per_byte);
        options.costs.host_ranks_per_core = settings.ranks_per_core;
        // Rank 0 logs each collective's choice once per power-of-two size.
        const size_t bytes = call_bytes(args);
        const int size_class = bytes == 0 ? -1 : 63 - __builtin_clzll(static_cast<unsigned long long>(bytes));
        const bool log = rank == 0 && log_level() >= LogLevel::Info &&
                         logged_plans.insert({static_cast<int>(call.collective), size_class}).second;
        std::vector<Prediction> considered;
        std::string error;
        if (!plan_schedule(args, topology, options, &schedule, &error, log ? &considered : nullptr))
            return invalid_usage("%s", error.c_str());
        if (log) log_plan(args, *schedule, considered);
        schedule_cache.insert(key, schedule);
    }
    *out = std::move(schedule);
    return Status::ok();
}

Status nnpccl_comm::start(const CollectiveCall &call, bool background, std::shared_ptr<Operation> *out) {
    std::shared_ptr<const Schedule> schedule;
    NNPCCL_TRY(schedule_for(call, &schedule));
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
    op->scratch = scratch_pool->acquire(schedule->scratch_elems * elem);
    OperationBuffers buffers;
    buffers.scratch = op->scratch.get();
    buffers.send = call.send;
    buffers.recv = call.recv;
    buffers.datatype = call.datatype;
    buffers.op = call.op;
    buffers.nranks = static_cast<uint32_t>(nranks);
    buffers.descriptor.collective = static_cast<uint32_t>(call.collective);
    buffers.descriptor.sequence = sequence;
    buffers.descriptor.count = call.count;
    // The peer of a send or recv rides in the root field.
    const bool rooted = has_root(call.collective) || p2p;
    buffers.descriptor.datatype = call.collective == Collective::Barrier ? -1 : static_cast<int32_t>(call.datatype);
    buffers.descriptor.op = reduces(call.collective) ? static_cast<int32_t>(call.op) : -1;
    buffers.descriptor.root = rooted ? call.root : -1;
    buffers.expected = buffers.descriptor;
    if (call.collective == Collective::Recv) {
        // What the matching send announces: a send, numbered by its sender's
        // count of sends to us, whose peer is this rank.
        buffers.expected.collective = static_cast<uint32_t>(Collective::Send);
        buffers.expected.root = rank;
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
    op->run = std::make_unique<ScheduleRun>(schedule, buffers, route, reduce_scratch.data());
    engine->submit(op, background);
    *out = op;
    return Status::ok();
}
