#include "comm.hpp"

#include <unistd.h>

#include <fstream>

#include "builders.hpp"
#include "dtype.hpp"
#include "log.hpp"
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

} // namespace

Status nnpccl_comm::create(const UniqueId &id, int nranks, int rank, const nnpccl_config_t *config,
                           std::unique_ptr<nnpccl_comm> *out) {
    auto comm = std::make_unique<nnpccl_comm>();
    comm->rank = rank;
    comm->nranks = nranks;
    NNPCCL_TRY(resolve_settings(config, &comm->settings));
    set_log_rank(rank);
    Deadline deadline = Deadline::after_seconds(comm->settings.timeout_sec);
    NNPCCL_TRY(Bootstrap::join(id, rank, nranks, deadline, &comm->bootstrap));

    std::vector<std::string> hosts;
    NNPCCL_TRY(comm->bootstrap->allgather(host_identity(), deadline, &hosts));
    std::vector<int> local;
    for (int r = 0; r < nranks; ++r)
        if (hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(rank)]) local.push_back(r);
    for (int r = 0; r < nranks; ++r)
        if (hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>(rank)])
            return invalid_usage("rank %d runs on host %s, rank %d on %s: ranks on different hosts need the ofi "
                                 "transport, which this build does not have yet",
                                 rank, hosts[static_cast<size_t>(rank)].c_str(), r, hosts[static_cast<size_t>(r)].c_str());

    comm->topology = Topology::flat(nranks);
    comm->route.assign(static_cast<size_t>(nranks), nullptr);
    if (nranks > 1) {
        std::unique_ptr<ShmTransport> shm;
        int channels = static_cast<int>(comm->topology.rings().size());
        NNPCCL_TRY(ShmTransport::create(*comm->bootstrap, local, channels, comm->settings, deadline, &shm));
        for (int r : local) comm->route[static_cast<size_t>(r)] = shm.get();
        comm->transports.push_back(std::move(shm));
    }
    std::vector<Transport *> transports;
    for (auto &t : comm->transports) transports.push_back(t.get());
    comm->reduce_scratch.assign(comm->settings.chunk_bytes, 0);
    comm->engine = std::make_unique<Engine>(transports, comm->settings, static_cast<int>(local.size()));
    LOG_INFO("communicator ready: rank %d of %d, %zu on this host, topology %s", rank, nranks, local.size(),
             comm->topology.name().c_str());
    *out = std::move(comm);
    return Status::ok();
}

void nnpccl_comm::set_last_error(const std::string &message) {
    std::lock_guard<std::mutex> lock(error_mutex);
    last_error = message;
}

Status nnpccl_comm::start(const CollectiveCall &call, bool background, std::shared_ptr<Operation> *out) {
    const size_t elem = datatype_size(call.datatype);
    bool in_place = false;
    switch (call.collective) {
    case Collective::Allreduce:
    case Collective::Broadcast:
    case Collective::Reduce: in_place = call.send == call.recv; break;
    case Collective::ReduceScatter:
        in_place = call.recv == static_cast<const char *>(call.send) + static_cast<size_t>(rank) * call.count * elem;
        break;
    case Collective::Allgather:
        in_place = call.send == static_cast<const char *>(call.recv) + static_cast<size_t>(rank) * call.count * elem;
        break;
    case Collective::Barrier: break;
    }
    const size_t chunk_elems = std::max<size_t>(1, settings.chunk_bytes / std::max<size_t>(1, elem));
    CacheKey key{static_cast<int>(call.collective), call.count, elem, call.root, in_place};
    auto cached = schedule_cache.find(key);
    std::shared_ptr<const Schedule> schedule;
    if (cached != schedule_cache.end()) {
        schedule = cached->second;
    } else {
        CollectiveArgs args;
        args.collective = call.collective;
        args.count = call.count;
        args.root = call.root;
        args.in_place = in_place;
        args.rank = rank;
        args.nranks = nranks;
        args.chunk_elems = chunk_elems;
        schedule = plan_schedule(args, topology);
        schedule_cache.emplace(key, schedule);
    }
    auto op = std::make_shared<Operation>();
    OperationBuffers buffers;
    buffers.send = call.send;
    buffers.recv = call.recv;
    buffers.datatype = call.datatype;
    buffers.op = call.op;
    buffers.nranks = static_cast<uint32_t>(nranks);
    op->description = format("%s #%llu (%zu x %s, %s%s)", collective_name(call.collective),
                             static_cast<unsigned long long>(next_sequence++), call.count,
                             datatype_name(call.datatype), redop_name(call.op), in_place ? ", in place" : "");
    op->run = std::make_unique<ScheduleRun>(schedule, buffers, route, reduce_scratch.data());
    engine->submit(op, background);
    *out = op;
    return Status::ok();
}
