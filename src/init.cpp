// Init: from a unique id to a communicator that can run calls
// (docs/design.md, "Life of a call"). Each step below is collective: every
// rank runs them in the same order, and a step that fails on one rank ends
// the others' through the bootstrap.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "affinity.hpp"
#include "comm.hpp"
#include "emulated/emulated_transport.hpp"
#include "init_wire.hpp"
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
// collective init step, and the pace of every step), under their
// variables' names, in a fixed order.
std::vector<NamedSetting> shared_settings(const Settings &settings) {
    const PlanningOptions &planning = settings.planning;
    std::string net;
    if (planning.network_gbps > 0) net = format("%g", planning.network_gbps);
    if (planning.network_latency_us >= 0) net += format(",%g", planning.network_latency_us);
    std::vector<NamedSetting> shared = {
        {"NNPCCL_TOPO", planning.topology.empty() ? std::string("flat") : planning.topology},
        {"NNPCCL_NET", net},
        {"NNPCCL_CHUNK_SIZE", format("%zu", planning.chunk_bytes)},
        {"NNPCCL_ALGO", planning.algorithms},
        {"NNPCCL_EMULATE_LINKS", settings.emulation.links ? "1" : "0"}};
    if (settings.emulation.links) shared.push_back({"NNPCCL_EMULATE_SCALE", format("%g", settings.emulation.scale)});
    return shared;
}

// The first setting in which two ranks' shared_settings() differ, as
// "NAME=value" on each side.
std::pair<std::string, std::string> first_difference(const std::vector<NamedSetting> &a,
                                                     const std::vector<NamedSetting> &b) {
    auto line = [](const std::vector<NamedSetting> &all, size_t i, const std::string &other_name) {
        return i < all.size() ? all[i].name + "=" + all[i].value : other_name + " unset";
    };
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
        if (i >= a.size() || i >= b.size() || !(a[i] == b[i]))
            return {line(a, i, i < b.size() ? b[i].name : ""), line(b, i, i < a.size() ? a[i].name : "")};
    return {};
}

// Rank 0's NNPCCL_TUNING_FILE, as the last part of the agreement below:
// none, its path and text, or why it cannot be read.
TuningFileEntry tuning_file_entry(const std::string &path) {
    TuningFileEntry entry;
    if (path.empty()) return entry;
    entry.kind = TuningFileEntry::Kind::Unreadable;
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        entry.text = format("NNPCCL_TUNING_FILE=%s: cannot open it: %s", path.c_str(), std::strerror(errno));
        return entry;
    }
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
    if (failed) {
        entry.text = format("NNPCCL_TUNING_FILE=%s: cannot read it", path.c_str());
    } else if (text.size() > kMaxTuningFileBytes) {
        entry.text = format("NNPCCL_TUNING_FILE=%s: larger than %zu bytes, which no tuning file is", path.c_str(),
                            kMaxTuningFileBytes);
    } else {
        entry.kind = TuningFileEntry::Kind::File;
        entry.path = path;
        entry.text = std::move(text);
    }
    return entry;
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

} // namespace

namespace nnpccl {

// The collective steps of nnpccl_comm::connect(), in order (docs/design.md,
// "Init"), over the communicator they build: a friend of it, since
// building it is writing its state. One Init builds one communicator once.
class Init {
public:
    Init(nnpccl_comm &comm, const Deadline &deadline) : comm_(comm), deadline_(deadline) {}
    // Everything connect() does but the clean-up of a failure.
    Status build(const UniqueId &id, const StopSignal *stop);

private:
    Status learn_hosts();
    Status settings_mismatch(int r, const std::vector<NamedSetting> &mine,
                             const std::vector<NamedSetting> &theirs) const;
    Status place_rank(double *ranks_per_core);
    Status agree_on_planning_inputs(double my_ranks_per_core, TuningFileEntry *root_tuning_file);
    Status agreed_planning_facts(const TuningFileEntry &root_tuning_file, PlanningFacts *out) const;
    Status load_machine();
    Status agree_on_network(LinkParams *network);
    Status make_selector(const TuningFileEntry &root_tuning_file);
    Status open_transports();
    Status emulate_links();
    Status share_link_table(size_t links, const EmulationOptions &options);
    void start_engine();

    nnpccl_comm &comm_;
    const Deadline deadline_;
    JobHosts hosts_; // learn_hosts()'s
};

// A mismatch of the shared settings between this rank and rank r, named
// under the settings' variables; this rank knows where its own value came
// from.
Status Init::settings_mismatch(int r, const std::vector<NamedSetting> &mine,
                               const std::vector<NamedSetting> &theirs) const {
    const auto [line, line_r] = first_difference(mine, theirs);
    const PlanningOptions &planning = comm_.settings_.planning;
    std::string from;
    if (line.rfind("NNPCCL_CHUNK_SIZE=", 0) == 0 && planning.chunk_source != "NNPCCL_CHUNK_SIZE")
        from = " (from " + planning.chunk_source + ")";
    if (line.rfind("NNPCCL_ALGO=", 0) == 0 && planning.algorithms_source != "NNPCCL_ALGO")
        from = " (from " + planning.algorithms_source + ")";
    return invalid_usage("rank %d has %s%s but rank %d has %s; every rank needs the same (ranks must plan "
                         "and pace alike)",
                         comm_.rank_, line.c_str(), from.c_str(), r, line_r.c_str());
}

// Every rank says where it runs, which transport mode it was given and the
// settings that decide its machine model; ranks must agree on those, since
// transports are set up collectively and every rank must plan alike.
Status Init::learn_hosts() {
    HostRecord mine;
    mine.transport = transport_mode_name(comm_.settings_.transport);
    mine.process_hosts_root = comm_.bootstrap_->process_hosts_root();
    mine.host = host_identity();
    mine.shared_settings = shared_settings(comm_.settings_);
    std::vector<std::string> said;
    NNPCCL_TRY(comm_.bootstrap_->allgather(encode_host_record(mine), deadline_, &said));
    int root_host = -1;
    for (int r = 0; r < comm_.nranks_; ++r) {
        HostRecord theirs;
        if (Status decoded = decode_host_record(said[static_cast<size_t>(r)], &theirs); !decoded)
            return Status(decoded.code(), format("rank %d's %s", r, decoded.message().c_str()));
        if (theirs.transport != mine.transport)
            return invalid_usage("rank %d has NNPCCL_TRANSPORT=%s but rank %d has %s; every rank needs the same",
                                 comm_.rank_, mine.transport.c_str(), r, theirs.transport.c_str());
        if (theirs.shared_settings != mine.shared_settings)
            return settings_mismatch(r, mine.shared_settings, theirs.shared_settings);
        if (theirs.process_hosts_root && root_host < 0) root_host = r;
        hosts_.host.push_back(std::move(theirs.host));
    }
    comm_.bootstrap_->set_root_host(root_host);
    const std::string &host = hosts_.host[static_cast<size_t>(comm_.rank_)];
    for (int r = 0; r < comm_.nranks_; ++r) {
        const std::string &host_r = hosts_.host[static_cast<size_t>(r)];
        if (host_r == host) {
            if (r == comm_.rank_) hosts_.local_index = static_cast<int>(hosts_.local.size());
            hosts_.local.push_back(r);
        }
        hosts_.any_remote = hosts_.any_remote || host_r != hosts_.host[0];
        for (int q = 0; q < r && !hosts_.any_host_shared; ++q)
            hosts_.any_host_shared = hosts_.host[static_cast<size_t>(q)] == host_r;
    }
    if (comm_.settings_.transport == TransportMode::Shm && hosts_.any_remote)
        return invalid_usage("NNPCCL_TRANSPORT=shm, but the ranks run on more than one host (rank %d on %s, rank 0 on "
                             "%s)",
                             comm_.rank_, host.c_str(), hosts_.host[0].c_str());
    return Status::ok();
}

// Pins this rank to its core (NNPCCL_PIN) and notes what follows from
// where it runs: its NUMA node and nearest NIC, and ranks per core.
Status Init::place_rank(double *ranks_per_core) {
    RankPlacement placement;
    const int local_ranks = static_cast<int>(hosts_.local.size());
    NNPCCL_TRY(place_local_rank(comm_.settings_.pin, hosts_.local_index, local_ranks, &placement));
    if (placement.numa_nodes > 1) comm_.facts_.numa_node = placement.numa_node;
    comm_.facts_.nic_hint = placement.nic;
    comm_.facts_.local_ranks = local_ranks;
    *ranks_per_core = placement.cores > 0 ? static_cast<double>(local_ranks) / placement.cores : 1.0;
    return Status::ok();
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
// results"). `root_tuning_file` is rank 0's tuning file, for
// make_selector() once the machine is loaded.
Status Init::agree_on_planning_inputs(double my_ranks_per_core, TuningFileEntry *root_tuning_file) {
    PlanningRecord mine;
    mine.ranks_per_core = my_ranks_per_core;
    mine.host_over_network = network_only(comm_.settings_.transport);
    if (comm_.rank_ == 0) {
        mine.has_root_part = true;
        mine.tune = comm_.settings_.tuning.enabled;
        static_assert(sizeof CostInputs::host_reduce_us_per_byte == sizeof mine.reduce_us_per_byte);
        if (mine.tune) {
            const HostReduceSpeed &speed = host_reduce_speed();
            std::copy(std::begin(speed.us_per_byte), std::end(speed.us_per_byte), mine.reduce_us_per_byte.begin());
        }
        mine.tuning_file = tuning_file_entry(comm_.settings_.planning.tuning_file);
    }
    std::vector<std::string> all;
    NNPCCL_TRY(comm_.bootstrap_->allgather(encode_planning_record(mine), deadline_, &all));
    CostInputs &costs = comm_.facts_.costs;
    costs.host_ranks_per_core = 1;
    costs.host_over_network = false;
    PlanningRecord root;
    for (int r = 0; r < comm_.nranks_; ++r) {
        PlanningRecord theirs;
        if (Status decoded = decode_planning_record(all[static_cast<size_t>(r)], &theirs); !decoded)
            return Status(decoded.code(), format("rank %d's %s", r, decoded.message().c_str()));
        if (theirs.has_root_part != (r == 0))
            return internal_error("rank %d's planning record %s rank 0's part", r, r == 0 ? "lacks" : "carries");
        costs.host_ranks_per_core = std::max(costs.host_ranks_per_core, theirs.ranks_per_core);
        costs.host_over_network = costs.host_over_network || theirs.host_over_network;
        if (r == 0) root = std::move(theirs);
    }
    comm_.settings_.tuning.enabled = root.tune;
    if (root.tune)
        std::copy(root.reduce_us_per_byte.begin(), root.reduce_us_per_byte.end(), costs.host_reduce_us_per_byte);
    *root_tuning_file = std::move(root.tuning_file);
    return Status::ok();
}

// The facts every rank agreed on, rank 0's tuning file among them.
Status Init::agreed_planning_facts(const TuningFileEntry &root_tuning_file, PlanningFacts *out) const {
    *out = PlanningFacts{};
    out->costs = comm_.facts_.costs;
    out->tune = comm_.settings_.tuning.enabled;
    switch (root_tuning_file.kind) {
    case TuningFileEntry::Kind::None: return Status::ok();
    case TuningFileEntry::Kind::Unreadable: return invalid_argument("%s", root_tuning_file.text.c_str());
    case TuningFileEntry::Kind::File: break;
    }
    out->has_tuning_file = true;
    out->tuning_file_source = "NNPCCL_TUNING_FILE=" + root_tuning_file.path + " (rank 0's)";
    out->tuning_file_text = root_tuning_file.text;
    return Status::ok();
}

// The selector, on the machine and with the planning inputs every rank
// agreed on; a tuning file measured for another job size or topology is
// left to the model, with a warning.
Status Init::make_selector(const TuningFileEntry &root_tuning_file) {
    PlanningFacts facts;
    NNPCCL_TRY(agreed_planning_facts(root_tuning_file, &facts));
    PlanningInputs inputs;
    std::string ignored_tuning_file;
    NNPCCL_TRY(build_planning_inputs(comm_.settings_.planning, facts, comm_.topology_, &inputs, &ignored_tuning_file));
    if (!ignored_tuning_file.empty() && comm_.rank_ == 0) LOG_WARN("%s", ignored_tuning_file.c_str());
    inputs.forced = comm_.configured_algorithms_;
    comm_.selector_ = std::make_unique<Selector>(comm_.topology_, comm_.rank_, std::move(inputs));
    return Status::ok();
}

// The network's bandwidth between the hosts: NNPCCL_NET's, else the
// slowest link speed libfabric reports on any rank, else the default.
// Collective: every rank takes part, so that all plan on the same figure.
Status Init::agree_on_network(LinkParams *network) {
    const PlanningOptions &planning = comm_.settings_.planning;
    const double reported = planning.network_gbps > 0 ? 0 : OfiTransport::reported_link_gbps(comm_.facts_.nic_hint);
    std::vector<std::string> all;
    NNPCCL_TRY(comm_.bootstrap_->allgather(encode_link_speed_record({reported}), deadline_, &all));
    double slowest = 0;
    for (int r = 0; r < comm_.nranks_; ++r) {
        LinkSpeedRecord theirs;
        if (Status decoded = decode_link_speed_record(all[static_cast<size_t>(r)], &theirs); !decoded)
            return Status(decoded.code(), format("rank %d's %s", r, decoded.message().c_str()));
        const double gbps = theirs.reported_gbps;
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
    if (comm_.rank_ == 0)
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
Status Init::load_machine() {
    const PlanningOptions &planning = comm_.settings_.planning;
    TopologyOptions options = topology_options(planning, comm_.facts_.costs.host_over_network);
    if ((planning.topology.empty() || planning.topology == "flat") && hosts_.any_remote) {
        NNPCCL_TRY(agree_on_network(&options.network));
        const std::vector<std::string> names = host_names(hosts_);
        return Topology::create(hosts_machine(hosts_spec(names), names, options.host, options.network), {},
                                comm_.nranks_, &comm_.topology_);
    }
    if (Status loaded = load_topology(planning.topology, comm_.nranks_, options, &comm_.topology_); !loaded)
        return invalid_argument("NNPCCL_TOPO=%s: %s", planning.topology.c_str(), loaded.message().c_str());
    return Status::ok();
}

// The transports and the routes over them (transport_choice.cpp), with
// as many streams per peer as the algorithm with the most channels needs.
Status Init::open_transports() {
    const TransportSetup setup{*comm_.bootstrap_,
                               comm_.settings_,
                               hosts_,
                               comm_.rank_,
                               comm_.nranks_,
                               comm_.facts_.numa_node,
                               comm_.facts_.nic_hint,
                               comm_.message_bytes_,
                               max_schedule_channels(comm_.topology_),
                               deadline_};
    return nnpccl::open_transports(setup, &comm_.links_);
}

// Wraps every transport in a decorator that paces each peer's traffic to the
// simulated links between the two ranks' chips.
// The ranks of a host share one table of each simulated link's busy
// intervals (LinkTimeline::table_bytes for `options`), so transfers of
// different ranks over one link share its bandwidth (as they would on the
// machine): the host's lowest rank makes it, the others map it. Ranks on
// other hosts have tables of their own, so links that ranks of two hosts
// both cross are not shared between them.
Status Init::share_link_table(size_t links, const EmulationOptions &options) {
    const size_t bytes = LinkTimeline::table_bytes(links, options.intervals_per_link);
    const int maker = hosts_.local.front();
    if (comm_.rank_ == maker) NNPCCL_TRY(SharedRegion::create(bytes, "nnpccl-links", &comm_.links_.link_table()));
    std::vector<std::string> all;
    NNPCCL_TRY(comm_.bootstrap_->allgather(encode_link_table_record({comm_.links_.link_table().announcement()}),
                                           deadline_, &all));
    LinkTableRecord made;
    if (Status decoded = decode_link_table_record(all[static_cast<size_t>(maker)], &made); !decoded)
        return Status(decoded.code(), format("rank %d's %s", maker, decoded.message().c_str()));
    if (comm_.rank_ != maker)
        NNPCCL_TRY(SharedRegion::map(made.region, bytes, format("rank %d's table of emulated links", maker),
                                     &comm_.links_.link_table()));
    // Once every rank has mapped it, the mappings keep it.
    Status mapped = comm_.bootstrap_->barrier(deadline_);
    comm_.links_.link_table().close_descriptor();
    return mapped;
}

Status Init::emulate_links() {
    EmulationModel model;
    for (const Link &link : comm_.topology_.machine().links()) model.links.push_back({link.gbps, link.latency_us});
    model.path.assign(static_cast<size_t>(comm_.nranks_), {});
    for (int a = 0; a < comm_.nranks_; ++a) {
        model.path[static_cast<size_t>(a)].assign(static_cast<size_t>(comm_.nranks_), {});
        for (int b = 0; b < comm_.nranks_; ++b)
            if (a != b) model.path[static_cast<size_t>(a)][static_cast<size_t>(b)] = comm_.topology_.route(a, b).links;
    }
    model.scale = comm_.settings_.emulation.scale;
    NNPCCL_TRY(validate_emulation_model(model, comm_.nranks_));
    // Every rank of a host must lay the table out alike: all use the defaults.
    EmulationOptions options;
    NNPCCL_TRY(share_link_table(model.links.size(), options));
    options.shared_link_table = comm_.links_.link_table().data();
    comm_.links_.decorate([&](Transport *inner) -> std::unique_ptr<Transport> {
        return std::make_unique<EmulatedTransport>(inner, comm_.rank_, model, options);
    });
    LOG_INFO("emulating the links of %s, %zu links, time scaled by %g, their state shared by the %zu ranks of this "
             "host",
             comm_.topology_.name().c_str(), model.links.size(), model.scale, hosts_.local.size());
    return Status::ok();
}

// The progress engine over the transports the executor sends through, told
// how to hear of and report deaths elsewhere in the job.
void Init::start_engine() {
    comm_.reduce_scratch_.assign(comm_.settings_.planning.chunk_bytes, 0);
    comm_.engine_ = std::make_unique<Engine>(comm_.links_.active(), comm_.settings_.timeout_sec,
                                             comm_.settings_.spin_us, comm_.facts_.local_ranks);
    Bootstrap *bootstrap = comm_.bootstrap_.get();
    comm_.engine_->set_job_check([bootstrap](bool between_calls) { return bootstrap->check_job(between_calls); });
    comm_.engine_->set_failure_hook([bootstrap](const Status &why) { bootstrap->report_failure(why); });
    comm_.engine_->set_abort_reason(
        remote_error("rank %d aborted the communicator (nnpccl_comm_abort, from a signal handler)", comm_.rank_));
}

// Everything connect() does but the clean-up of a failure.
Status Init::build(const UniqueId &id, const StopSignal *stop) {
    NNPCCL_TRY(Bootstrap::join(id, comm_.rank_, comm_.nranks_, deadline_, &comm_.bootstrap_, stop));
    NNPCCL_TRY(learn_hosts());
    // The job's timeline starts afresh on each host, before the next
    // collective step: no rank writes to it before init has ended everywhere.
    if (comm_.trace_ != nullptr && comm_.rank_ == hosts_.local.front()) NNPCCL_TRY(comm_.trace_->start_file());
    double ranks_per_core = 1;
    NNPCCL_TRY(place_rank(&ranks_per_core));
    TuningFileEntry root_tuning_file;
    NNPCCL_TRY(agree_on_planning_inputs(ranks_per_core, &root_tuning_file));
    NNPCCL_TRY(load_machine());
    NNPCCL_TRY(make_selector(root_tuning_file));
    NNPCCL_TRY(open_transports());
    if (comm_.settings_.emulation.links) NNPCCL_TRY(emulate_links());
    start_engine();
    LOG_INFO("communicator ready: rank %d of %d, %d on this host, topology %s", comm_.rank_, comm_.nranks_,
             comm_.facts_.local_ranks, comm_.topology_.name().c_str());
    return Status::ok();
}

} // namespace nnpccl

Status nnpccl_comm::prepare(int nranks, int rank, const nnpccl_config_t *config, std::unique_ptr<nnpccl_comm> *out) {
    auto comm = std::make_unique<nnpccl_comm>();
    comm->rank_ = rank;
    comm->nranks_ = nranks;
    NNPCCL_TRY(resolve_settings(config, &comm->settings_));
    // A message carries a whole chunk of data and, first to each peer in an
    // operation, the operation's descriptor.
    comm->message_bytes_ = comm->settings_.planning.chunk_bytes + kDescriptorBytes;
    NNPCCL_TRY(parse_forced_algorithms(comm->settings_.planning, &comm->configured_algorithms_));
    if (!comm->settings_.trace.empty()) NNPCCL_TRY(TraceRecorder::open(comm->settings_.trace, rank, &comm->trace_));
    comm->creator_pid_ = getpid();
    set_log_rank(rank);
    *out = std::move(comm);
    return Status::ok();
}

Status nnpccl_comm::connect(const UniqueId &id, const StopSignal *stop) {
    Status st = Init(*this, Deadline::after_seconds(settings_.timeout_sec)).build(id, stop);
    if (st) return st;
    if (stop != nullptr && stop->raised()) {
        st = remote_error("rank %d aborted the communicator during init (nnpccl_comm_abort or nnpccl_comm_destroy "
                          "before init had finished)",
                          rank_);
        // Peers would hear "died or aborted" from the root anyway; this says which.
        if (bootstrap_ != nullptr) bootstrap_->report_failure(st);
    } else if (bootstrap_ != nullptr && st.code() != NNPCCL_ERR_REMOTE && st.code() != NNPCCL_ERR_TIMEOUT) {
        // A failure of this rank's own (a setting, a resource): the others
        // hear why, not only that it left. Timeouts and peers' failures
        // are the root's to tell.
        bootstrap_->report_failure(remote_error("its init failed: %s", st.message().c_str()));
    }
    // Released now, not at destroy: peers see this rank leave at once. What
    // depends on something goes before it.
    engine_.reset();
    links_.clear();
    selector_.reset();
    bootstrap_.reset();
    return st;
}
