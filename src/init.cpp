// Init: from a unique id to a communicator that can run calls
// (docs/design.md, "Life of a call"). Each step below is collective: every
// rank runs them in the same order, and a step that fails on one rank ends
// the others' through the bootstrap.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

#include "affinity.hpp"
#include "comm.hpp"
#include "emulated/emulated_transport.hpp"
#include "job_hosts.hpp"
#include "log.hpp"
#include "ofi/ofi_transport.hpp"
#include "planning.hpp"
#include "reduce.hpp"
#include "transport_choice.hpp"

using namespace nnpccl;

namespace {

std::string host_identity() {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string boot_id;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
    return std::string(host) + "/" + boot_id;
}

const char *transport_mode_name(TransportMode mode) {
    switch (mode) {
    case TransportMode::Shm: return "shm";
    case TransportMode::Ofi: return "ofi";
    case TransportMode::Socket: return "socket";
    case TransportMode::Auto: break;
    }
    return "auto";
}

// The settings every rank must share: those that decide plans (the
// machine all plan on, and so which collective init steps run; the chunks
// every message carries; the algorithms forced) and link emulation (a
// collective init step, and the pace of every step). As "NAME=value"
// lines, in a fixed order.
std::string shared_settings(const Settings &settings) {
    const PlanningOptions &planning = settings.planning;
    std::string net;
    if (planning.network_gbps > 0) net = format("%g", planning.network_gbps);
    if (planning.network_latency_us >= 0) net += format(",%g", planning.network_latency_us);
    std::string emulation = settings.emulation.links ? "1" : "0";
    if (settings.emulation.links) emulation += format("\nNNPCCL_EMULATE_SCALE=%g", settings.emulation.scale);
    return "NNPCCL_TOPO=" + (planning.topology.empty() ? std::string("flat") : planning.topology) +
           "\nNNPCCL_NET=" + net + format("\nNNPCCL_CHUNK_SIZE=%zu", planning.chunk_bytes) +
           "\nNNPCCL_ALGO=" + planning.algorithms + "\nNNPCCL_EMULATE_LINKS=" + emulation;
}

// The first line in which two shared_settings() differ.
std::pair<std::string, std::string> first_difference(const std::string &a, const std::string &b) {
    size_t at_a = 0, at_b = 0;
    while (true) {
        const size_t end_a = std::min(a.find('\n', at_a), a.size()), end_b = std::min(b.find('\n', at_b), b.size());
        std::string line_a = a.substr(at_a, end_a - at_a), line_b = b.substr(at_b, end_b - at_b);
        if (line_a != line_b || end_a == a.size() || end_b == b.size()) return {line_a, line_b};
        at_a = end_a + 1;
        at_b = end_b + 1;
    }
}

// Every rank says where it runs, which transport mode it was given and the
// settings that decide its machine model; ranks must agree on those, since
// transports are set up collectively and every rank must plan alike.
Status learn_hosts(nnpccl_comm &comm, const Deadline &deadline, JobHosts *out) {
    const std::string mode = transport_mode_name(comm.settings.transport);
    const std::string machine = shared_settings(comm.settings);
    // "MODE R|- HOST\nSETTINGS": R where this rank's process hosts the rendezvous root.
    const std::string mine_said =
        mode + (comm.bootstrap->process_hosts_root() ? " R " : " - ") + host_identity() + "\n" + machine;
    std::vector<std::string> said;
    NNPCCL_TRY(comm.bootstrap->allgather(mine_said, deadline, &said));
    int root_host = -1;
    for (int r = 0; r < comm.nranks; ++r) {
        const std::string &entry = said[static_cast<size_t>(r)];
        const size_t space = entry.find(' '), newline = entry.find('\n');
        const std::string mode_r = entry.substr(0, space);
        if (mode_r != mode)
            return invalid_usage("rank %d has NNPCCL_TRANSPORT=%s but rank %d has %s; every rank needs the same",
                                 comm.rank, mode.c_str(), r, mode_r.c_str());
        if (space == std::string::npos || newline == std::string::npos || newline < space + 3)
            return internal_error("rank %d's host entry '%s' is malformed", r, entry.c_str());
        const std::string machine_r = entry.substr(newline + 1);
        if (machine_r != machine) {
            const auto [line, line_r] = first_difference(machine, machine_r);
            // The settings are compared under their variables' names; this
            // rank knows where its own value came from.
            const PlanningOptions &planning = comm.settings.planning;
            std::string from;
            if (line.rfind("NNPCCL_CHUNK_SIZE=", 0) == 0 && planning.chunk_source != "NNPCCL_CHUNK_SIZE")
                from = " (from " + planning.chunk_source + ")";
            if (line.rfind("NNPCCL_ALGO=", 0) == 0 && planning.algorithms_source != "NNPCCL_ALGO")
                from = " (from " + planning.algorithms_source + ")";
            return invalid_usage("rank %d has %s%s but rank %d has %s; every rank needs the same (ranks must plan "
                                 "and pace alike)",
                                 comm.rank, line.c_str(), from.c_str(), r, line_r.c_str());
        }
        if (entry[space + 1] == 'R' && root_host < 0) root_host = r;
        out->host.push_back(entry.substr(space + 3, newline - space - 3));
    }
    comm.bootstrap->set_root_host(root_host);
    const std::string &mine = out->host[static_cast<size_t>(comm.rank)];
    for (int r = 0; r < comm.nranks; ++r) {
        const std::string &host_r = out->host[static_cast<size_t>(r)];
        if (host_r == mine) {
            if (r == comm.rank) out->local_index = static_cast<int>(out->local.size());
            out->local.push_back(r);
        }
        out->any_remote = out->any_remote || host_r != out->host[0];
        for (int q = 0; q < r && !out->any_host_shared; ++q)
            out->any_host_shared = out->host[static_cast<size_t>(q)] == host_r;
    }
    if (comm.settings.transport == TransportMode::Shm && out->any_remote)
        return invalid_usage("NNPCCL_TRANSPORT=shm, but the ranks run on more than one host (rank %d on %s, rank 0 on "
                             "%s)",
                             comm.rank, mine.c_str(), out->host[0].c_str());
    return Status::ok();
}

// Pins this rank to its core (NNPCCL_PIN) and notes what follows from
// where it runs: its NUMA node and nearest NIC, and ranks per core.
Status place_rank(nnpccl_comm &comm, const JobHosts &hosts, double *ranks_per_core) {
    RankPlacement placement;
    const int local_ranks = static_cast<int>(hosts.local.size());
    NNPCCL_TRY(place_local_rank(comm.settings.pin, hosts.local_index, local_ranks, &placement));
    if (placement.numa_nodes > 1) comm.facts.numa_node = placement.numa_node;
    comm.facts.nic_hint = placement.nic;
    comm.facts.local_ranks = local_ranks;
    *ranks_per_core = placement.cores > 0 ? static_cast<double>(local_ranks) / placement.cores : 1.0;
    return Status::ok();
}

// Rank 0's NNPCCL_TUNING_FILE, as the last part of the agreement below:
// "N" for none, "F", its path, a newline and its text, or "E" and why it
// cannot be read.
std::string tuning_file_entry(const std::string &path) {
    if (path.empty()) return "N";
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return format("ENNPCCL_TUNING_FILE=%s: cannot open it: %s", path.c_str(), std::strerror(errno));
    std::string text;
    char buf[4096];
    size_t n;
    // A tuning file holds a line per collective; the bound keeps it within
    // one bootstrap message (kMaxRankPayload) and a wrong path (a large
    // file) from being sent to every rank.
    constexpr size_t kMaxTuningFileBytes = 32 * 1024;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() <= kMaxTuningFileBytes) text.append(buf, n);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) return format("ENNPCCL_TUNING_FILE=%s: cannot read it", path.c_str());
    if (text.size() > kMaxTuningFileBytes)
        return format("ENNPCCL_TUNING_FILE=%s: larger than %zu bytes, which no tuning file is", path.c_str(),
                      kMaxTuningFileBytes);
    return "F" + path + "\n" + text;
}

// What the planner needs from the hosts, the same on every rank: the most
// crowded host's ranks per core, whether any rank reaches the ranks of its
// own host over the network (NNPCCL_TRANSPORT), rank 0's NNPCCL_TUNE and,
// only where that is 1, γ as rank 0 measures it (how fast its host
// reduces, a few ms once per process); and rank 0's tuning file. Ranks
// that used figures or files of their own could choose apart near a
// crossover and then run different schedules. Without NNPCCL_TUNE=1 γ is the model's fixed default
// (CostInputs), not a measurement: a measured figure moves from run to run,
// and a choice that moved with it would change the order of a sum, so the
// same job would give different bits (docs/design.md, "Reproducible
// results"). `root_tuning_entry` is rank 0's tuning file, for
// make_selector() once the machine is loaded.
Status agree_on_planning_inputs(nnpccl_comm &comm, double my_ranks_per_core, const Deadline &deadline,
                                std::string *root_tuning_entry) {
    // Hex floats: exact.
    std::string mine = format("%a %d ", my_ranks_per_core, network_only(comm.settings.transport) ? 1 : 0);
    if (comm.rank == 0) {
        mine += comm.settings.tuning.enabled ? "1 " : "0 ";
        if (comm.settings.tuning.enabled)
            for (double v : host_reduce_speed().us_per_byte) mine += format("%a ", v);
        mine += "\n" + tuning_file_entry(comm.settings.planning.tuning_file);
    }
    std::vector<std::string> all;
    NNPCCL_TRY(comm.bootstrap->allgather(mine, deadline, &all));
    CostInputs &costs = comm.facts.costs;
    costs.host_ranks_per_core = 1;
    costs.host_over_network = false;
    for (const std::string &entry : all) {
        char *after = nullptr;
        costs.host_ranks_per_core = std::max(costs.host_ranks_per_core, std::strtod(entry.c_str(), &after));
        costs.host_over_network = costs.host_over_network || std::strtol(after, nullptr, 10) == 1;
    }
    const std::string &root = all[0];
    const size_t newline = root.find('\n');
    if (newline == std::string::npos) return internal_error("rank 0's planning inputs have no tuning-file line");
    const std::string numbers = root.substr(0, newline);
    char *end = nullptr;
    std::strtod(numbers.c_str(), &end); // rank 0's ranks per core and transport, taken above
    std::strtol(end, &end, 10);
    const char *text = end;
    comm.settings.tuning.enabled = std::strtol(text, &end, 10) == 1;
    text = end;
    if (comm.settings.tuning.enabled)
        for (double &v : costs.host_reduce_us_per_byte) {
            v = std::strtod(text, &end);
            if (end == text || !(v >= 0))
                return internal_error("rank 0's reduction speeds '%s' do not parse", numbers.c_str());
            text = end;
        }
    *root_tuning_entry = root.substr(newline + 1);
    return Status::ok();
}

// The facts every rank agreed on, rank 0's tuning file among them
// (tuning_file_entry()'s "N", "E..." or "F...").
Status agreed_planning_facts(const nnpccl_comm &comm, std::string_view root_tuning_entry, PlanningFacts *out) {
    *out = PlanningFacts{};
    out->costs = comm.facts.costs;
    out->tune = comm.settings.tuning.enabled;
    if (root_tuning_entry.empty() || root_tuning_entry[0] == 'N') return Status::ok();
    if (root_tuning_entry[0] == 'E')
        return invalid_argument("%.*s", static_cast<int>(root_tuning_entry.size() - 1), root_tuning_entry.data() + 1);
    const size_t newline = root_tuning_entry.find('\n');
    if (newline == std::string_view::npos) return internal_error("rank 0's tuning file entry has no path");
    out->has_tuning_file = true;
    out->tuning_file_source =
        "NNPCCL_TUNING_FILE=" + std::string(root_tuning_entry.substr(1, newline - 1)) + " (rank 0's)";
    out->tuning_file_text = std::string(root_tuning_entry.substr(newline + 1));
    return Status::ok();
}

// The selector, on the machine and with the planning inputs every rank
// agreed on; a tuning file measured for another job size or topology is
// left to the model, with a warning.
Status make_selector(nnpccl_comm &comm, const std::string &root_tuning_entry) {
    PlanningFacts facts;
    NNPCCL_TRY(agreed_planning_facts(comm, root_tuning_entry, &facts));
    PlanningInputs inputs;
    std::string ignored_tuning_file;
    NNPCCL_TRY(build_planning_inputs(comm.settings.planning, facts, comm.topology, &inputs, &ignored_tuning_file));
    if (!ignored_tuning_file.empty() && comm.rank == 0) LOG_WARN("%s", ignored_tuning_file.c_str());
    inputs.forced = comm.configured_algorithms;
    comm.selector = std::make_unique<Selector>(comm.topology, comm.rank, std::move(inputs));
    return Status::ok();
}

// The name a host goes by in the machine model: its host name, or its
// whole identity where two hosts share a name.
std::vector<std::string> host_names(const JobHosts &hosts) {
    std::vector<std::string> names;
    for (const std::string &id : hosts.host) names.push_back(id.substr(0, id.find('/')));
    for (size_t a = 0; a < names.size(); ++a)
        for (size_t b = 0; b < names.size(); ++b)
            if (names[a] == names[b] && hosts.host[a] != hosts.host[b]) return hosts.host;
    return names;
}

// "hosts:HxL" when every host has L ranks, else "hosts:A,B,...": the
// preset of the same machine when the ranks are dealt host by host in rank
// order. Otherwise ":" and each rank's host (by first appearance) follow,
// "hosts:2x2:0,1,0,1", so that no tuning file or --explain taken for the
// preset is mistaken for this machine.
std::string hosts_spec(const std::vector<std::string> &host_of_rank) {
    std::vector<std::string> order;
    std::vector<int> counts, index_of_rank;
    bool dealt_in_order = true;
    for (const std::string &h : host_of_rank) {
        auto it = std::find(order.begin(), order.end(), h);
        const auto index = static_cast<int>(it - order.begin());
        if (it == order.end()) {
            order.push_back(h);
            counts.push_back(1);
        } else {
            ++counts[static_cast<size_t>(index)];
            dealt_in_order = dealt_in_order && index == static_cast<int>(order.size()) - 1;
        }
        index_of_rank.push_back(index);
    }
    std::string spec;
    if (std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts[0]; })) {
        spec = format("hosts:%zux%d", counts.size(), counts[0]);
    } else {
        spec = "hosts:";
        for (size_t i = 0; i < counts.size(); ++i) spec += (i > 0 ? "," : "") + std::to_string(counts[i]);
    }
    if (!dealt_in_order)
        for (size_t r = 0; r < index_of_rank.size(); ++r)
            spec += (r == 0 ? ":" : ",") + std::to_string(index_of_rank[r]);
    return spec;
}

// The network's bandwidth between the hosts: NNPCCL_NET's, else the
// slowest link speed libfabric reports on any rank, else the default.
// Collective: every rank takes part, so that all plan on the same figure.
Status agree_on_network(nnpccl_comm &comm, const Deadline &deadline, LinkParams *network) {
    const PlanningOptions &planning = comm.settings.planning;
    const double reported = planning.network_gbps > 0 ? 0 : OfiTransport::reported_link_gbps(comm.facts.nic_hint);
    std::vector<std::string> all;
    NNPCCL_TRY(comm.bootstrap->allgather(format("%a", reported), deadline, &all));
    double slowest = 0;
    for (const std::string &entry : all) {
        const double gbps = std::strtod(entry.c_str(), nullptr);
        if (!(gbps > 0)) {
            slowest = 0; // a rank whose NIC says nothing: no figure holds for all
            break;
        }
        slowest = slowest > 0 ? std::min(slowest, gbps) : gbps;
    }
    const char *source = "NNPCCL_NET";
    if (planning.network_gbps > 0) {
        network->gbps = planning.network_gbps;
    } else if (slowest > 0) {
        network->gbps = slowest;
        source = "the slowest link speed libfabric reports";
    } else {
        source = "the default: libfabric reports no link speed here; NNPCCL_NET sets it";
    }
    if (planning.network_latency_us >= 0) network->latency_us = planning.network_latency_us;
    if (comm.rank == 0)
        LOG_INFO("planning on a network of %g GB/s and %g us between hosts (%s)", network->gbps, network->latency_us,
                 source);
    return Status::ok();
}

// The machine model every plan is made on: NNPCCL_TOPO's, or for a job on
// several hosts with none given the two-level host machine (the host
// model within each host, the network between them; docs/design.md, "Jobs
// on several hosts"). Where the ranks of a host reach each other over a
// network transport, as agreed, the host link's α is a TCP message's
// (kHostOverNetworkLatencyUs).
Status load_machine(nnpccl_comm &comm, const JobHosts &hosts, const Deadline &deadline) {
    const PlanningOptions &planning = comm.settings.planning;
    TopologyOptions options = topology_options(planning, comm.facts.costs.host_over_network);
    if ((planning.topology.empty() || planning.topology == "flat") && hosts.any_remote) {
        NNPCCL_TRY(agree_on_network(comm, deadline, &options.network));
        const std::vector<std::string> names = host_names(hosts);
        return Topology::create(hosts_machine(hosts_spec(names), names, options.host, options.network), {}, comm.nranks,
                                &comm.topology);
    }
    if (Status loaded = load_topology(planning.topology, comm.nranks, options, &comm.topology); !loaded)
        return invalid_argument("NNPCCL_TOPO=%s: %s", planning.topology.c_str(), loaded.message().c_str());
    return Status::ok();
}

// Wraps every transport in a decorator that paces each peer's traffic to the
// simulated links between the two ranks' chips.
// The ranks of a host share one table of each simulated link's busy
// intervals (LinkTimeline::table_bytes for `options`), so transfers of
// different ranks over one link share its bandwidth (as they would on the
// machine): the host's lowest rank makes it, the others map it. Ranks on
// other hosts have tables of their own, so links that ranks of two hosts
// both cross are not shared between them.
Status share_link_table(nnpccl_comm &comm, const JobHosts &hosts, size_t links, const EmulationOptions &options,
                        const Deadline &deadline) {
    const size_t bytes = LinkTimeline::table_bytes(links, options.intervals_per_link);
    const int maker = hosts.local.front();
    if (comm.rank == maker) NNPCCL_TRY(SharedRegion::create(bytes, "nnpccl-links", &comm.link_table));
    std::vector<std::string> all;
    NNPCCL_TRY(comm.bootstrap->allgather(comm.link_table.announcement(), deadline, &all));
    if (comm.rank != maker)
        NNPCCL_TRY(SharedRegion::map(all[static_cast<size_t>(maker)], bytes,
                                     format("rank %d's table of emulated links", maker), &comm.link_table));
    // Once every rank has mapped it, the mappings keep it.
    Status mapped = comm.bootstrap->barrier(deadline);
    comm.link_table.close_descriptor();
    return mapped;
}

Status emulate_links(nnpccl_comm &comm, const JobHosts &hosts, const Deadline &deadline) {
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
    // Every rank of a host must lay the table out alike: all use the defaults.
    EmulationOptions options;
    NNPCCL_TRY(share_link_table(comm, hosts, model.links.size(), options, deadline));
    options.shared_link_table = comm.link_table.data();
    for (auto &inner : comm.transports) {
        comm.emulated.push_back(std::make_unique<EmulatedTransport>(inner.get(), comm.rank, model, options));
        for (Transport *&hop : comm.route)
            if (hop == inner.get()) hop = comm.emulated.back().get();
    }
    LOG_INFO("emulating the links of %s, %zu links, time scaled by %g, their state shared by the %zu ranks of this "
             "host",
             comm.topology.name().c_str(), model.links.size(), model.scale, hosts.local.size());
    return Status::ok();
}

// The progress engine over the transports the executor sends through, told
// how to hear of and report deaths elsewhere in the job.
void start_engine(nnpccl_comm &comm) {
    comm.reduce_scratch.assign(comm.settings.planning.chunk_bytes, 0);
    comm.engine = std::make_unique<Engine>(comm.active_transports(), comm.settings.timeout_sec, comm.settings.spin_us,
                                           comm.facts.local_ranks);
    Bootstrap *bootstrap = comm.bootstrap.get();
    comm.engine->set_job_check([bootstrap](bool between_calls) { return bootstrap->check_job(between_calls); });
    comm.engine->set_failure_hook([bootstrap](const Status &why) { bootstrap->report_failure(why); });
    comm.engine->set_abort_reason(
        remote_error("rank %d aborted the communicator (nnpccl_comm_abort, from a signal handler)", comm.rank));
}

// Everything connect() does but the clean-up of a failure.
Status build(nnpccl_comm &comm, const UniqueId &id, const StopSignal *stop) {
    const Deadline deadline = Deadline::after_seconds(comm.settings.timeout_sec);
    NNPCCL_TRY(Bootstrap::join(id, comm.rank, comm.nranks, deadline, &comm.bootstrap, stop));
    JobHosts hosts;
    NNPCCL_TRY(learn_hosts(comm, deadline, &hosts));
    // The job's timeline starts afresh on each host, before the next
    // collective step: no rank writes to it before init has ended everywhere.
    if (comm.trace != nullptr && comm.rank == hosts.local.front()) NNPCCL_TRY(comm.trace->start_file());
    double ranks_per_core = 1;
    NNPCCL_TRY(place_rank(comm, hosts, &ranks_per_core));
    std::string root_tuning_entry;
    NNPCCL_TRY(agree_on_planning_inputs(comm, ranks_per_core, deadline, &root_tuning_entry));
    NNPCCL_TRY(load_machine(comm, hosts, deadline));
    NNPCCL_TRY(make_selector(comm, root_tuning_entry));
    NNPCCL_TRY(open_transports(comm, hosts, deadline));
    if (comm.settings.emulation.links) NNPCCL_TRY(emulate_links(comm, hosts, deadline));
    start_engine(comm);
    LOG_INFO("communicator ready: rank %d of %d, %d on this host, topology %s", comm.rank, comm.nranks,
             comm.facts.local_ranks, comm.topology.name().c_str());
    return Status::ok();
}

} // namespace

Status nnpccl_comm::prepare(int nranks, int rank, const nnpccl_config_t *config, std::unique_ptr<nnpccl_comm> *out) {
    auto comm = std::make_unique<nnpccl_comm>();
    comm->rank = rank;
    comm->nranks = nranks;
    NNPCCL_TRY(resolve_settings(config, &comm->settings));
    // A message carries a whole chunk of data and, first to each peer in an
    // operation, the operation's descriptor.
    comm->message_bytes = comm->settings.planning.chunk_bytes + kDescriptorBytes;
    NNPCCL_TRY(parse_forced_algorithms(comm->settings.planning, &comm->configured_algorithms));
    if (!comm->settings.trace.empty()) NNPCCL_TRY(TraceRecorder::open(comm->settings.trace, rank, &comm->trace));
    comm->creator_pid = getpid();
    set_log_rank(rank);
    *out = std::move(comm);
    return Status::ok();
}

Status nnpccl_comm::connect(const UniqueId &id, const StopSignal *stop) {
    Status st = build(*this, id, stop);
    if (st) return st;
    if (stop != nullptr && stop->raised()) {
        st = remote_error("rank %d aborted the communicator during init (nnpccl_comm_abort or nnpccl_comm_destroy "
                          "before init had finished)",
                          rank);
        // Peers would hear "died or aborted" from the root anyway; this says which.
        if (bootstrap != nullptr) bootstrap->report_failure(st);
    } else if (bootstrap != nullptr && st.code() != NNPCCL_ERR_REMOTE && st.code() != NNPCCL_ERR_TIMEOUT) {
        // A failure of this rank's own (a setting, a resource): the others
        // hear why, not only that it left. Timeouts and peers' failures
        // are the root's to tell.
        bootstrap->report_failure(remote_error("its init failed: %s", st.message().c_str()));
    }
    // Released now, not at destroy: peers see this rank leave at once. What
    // depends on something goes before it.
    engine.reset();
    emulated.clear();
    link_table = SharedRegion();
    transports.clear();
    route.clear();
    selector.reset();
    bootstrap.reset();
    return st;
}
