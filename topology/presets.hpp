// Named machines. The names are part of the interface (docs/design.md,
// "Adding a topology preset"): `ring:N`, `fc:N`, `hcm8`, `torus:XxY`, `torus:XxYxZ`, the NNP-T presets
// `nnpt-ring8`, `nnpt-hcm8`, `nnpt-pod32`, `nnpt-pod1024`, `flat`, and the
// two-level host machines `hosts:HxL` and `hosts:A,B,...` (ranks dealt host
// by host), or either followed by `:H0,H1,...`, each rank's host.
#pragma once

#include <string>
#include <vector>

#include "status.hpp"

#include "machine.hpp"
#include "machine_options.hpp"

namespace nnpccl {

// Figures a caller may override: the ICL port (NNP-T: 56 GB/s per direction;
// its latency is not published, 1 µs by default) and the host link `flat`
// uses (10 GB/s and 1.5 µs unless the caller says otherwise). The host's α
// is read off ccl-bench's latency-bound rows (8 B): the time of a hop in a
// broadcast chain and of a ring allreduce step, taken from the upper half
// of what they measured, where the model ranks the ring and
// halving-doubling at 32 KiB as they ran (docs/performance.md,
// "Selection").
//
// `network` is what joins hosts in a job that spans them (NNPCCL_NET, else
// this default: a 10 Gbit/s Ethernet port and a TCP round's latency through
// libfabric's tcp provider; docs/design.md, "Jobs on several hosts").
struct TopologyOptions {
    LinkParams icl{kIclPortGbps, 1.0};
    LinkParams host{10.0, 1.5};
    LinkParams network{1.25, 20.0};
};

// α of the host link where the ranks of a host reach each other over a
// network transport (NNPCCL_TRANSPORT=socket or ofi): a step of a 2-rank
// ring allreduce of 8 B over nnpccl's sockets on loopback, each rank with
// a core of its own (docs/performance.md, "Selection over TCP within a
// host"). It is a system call's work on each side and the kernel's
// wake-up of the receiver, where shared memory's is a flag in a cache line.
constexpr double kHostOverNetworkLatencyUs = 8.0;

// The options as the user gives them: the network between hosts from
// NNPCCL_NET where set, the host link's α over a network transport when
// `host_over_network` (CostInputs::host_over_network, the same on every
// rank), the rest the defaults.
TopologyOptions topology_options(const MachineOptions &machine, bool host_over_network);

// Chips 0..n-1 on a bidirectional ring (n >= 2; n = 2 is one cable).
Machine ring_machine(int n, LinkParams icl);
// Every pair of the n chips cabled. Up to 5 chips each link is a whole ICL
// port; beyond that a chip's 16 SerDes quads are split evenly over its n-1
// links (n <= 17), so each link is narrower and the chip has n-1 ports.
Machine fully_connected_machine(int n, LinkParams icl);
// The 8-way hybrid cube mesh: chips 0-3 and 4-7 are two fully connected
// quads and chip i is cabled to its twin i+4. 4 ports per chip, 16 cables.
Machine hybrid_cube_mesh_machine(LinkParams icl);
// An x × y 2D torus with wrap-around in both dimensions; chip x + y*X at
// (x, y). A dimension of 2 has one cable between its two chips, of 1 none.
Machine torus_machine(int x, int y, LinkParams icl);
// An x × y × z 3D torus, likewise; chip x + y*X + z*X*Y at (x, y, z), each
// cabled to six neighbours (a chip of more than four ports). z = 1 is the
// 2D torus.
Machine torus_machine(int x, int y, int z, LinkParams icl);
// The host model: n ranks' chips, every pair linked at the host figures.
// A chip's injection bandwidth is the host link's, not the sum over its
// links: all of them share one memory system.
Machine flat_machine(int n, LinkParams host);
// The host model of a job on several hosts, two levels: rank r's chip is
// chip r, on host host_of_rank[r]; ranks of one host are linked pairwise
// at the `host` figures (as `flat`); each host has a NIC, two nodes (out
// and in) past the ranks' chips, joined to one switch by a link each way
// at the `network` figures (half its latency on either side of the
// switch), so every rank of a host shares the host's link. Shape::Flat:
// the ranks reduce on their host's cores. Named `name`.
Machine hosts_machine(const std::string &name, const std::vector<std::string> &host_of_rank, LinkParams host,
                      LinkParams network);

// Whether `spec` is spelled like a preset (it may still be invalid, e.g. `ring:0`).
bool is_preset_spec(const std::string &spec);
// Builds the preset `spec`. `nranks` is only read by `flat` (its size);
// `hosts:...` must be given its own rank count, or 0.
Status build_preset(const std::string &spec, int nranks, const TopologyOptions &options, Machine *out);
// The preset spellings, one per line with a description, for --help texts.
std::string describe_presets();

} // namespace nnpccl
