// Host discovery and the pinning helpers.
#include <catch2/catch.hpp>

#include "host.hpp"
#include "succeeded.hpp"

using namespace nnpccl;

TEST_CASE("discovers this host", "[host]") {
    HostInfo host;
    std::string error;
    REQUIRE(succeeded(discover_host(&host), &error));
    CHECK(host.packages >= 1);
    CHECK(host.numa_nodes >= 1);
    CHECK(host.cores >= 1);
    CHECK(host.pus >= host.cores);
    CHECK(host.core_cpus.size() == static_cast<size_t>(host.cores));
    CHECK(host.core_numa_node.size() == static_cast<size_t>(host.cores));
    for (int c = 0; c < host.cores; ++c) {
        CHECK(!host.core_cpus[static_cast<size_t>(c)].empty());
        CHECK(numa_node_of_core(host, c) >= 0);
        CHECK(numa_node_of_core(host, c) < host.numa_nodes);
        CHECK(numa_node_of_cpu(host, host.core_cpus[static_cast<size_t>(c)][0]) == numa_node_of_core(host, c));
    }
    for (const NetworkInterface &nic : host.nics) CHECK(nic.name != "lo");
    CHECK(describe_host(host).find(std::to_string(host.cores) + " core") != std::string::npos);
}

TEST_CASE("pinning: one core per local rank, or round robin when ranks outnumber cores", "[host]") {
    HostInfo host;
    host.cores = 4;
    host.core_cpus = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    host.core_numa_node = {0, 0, 1, 1};
    host.numa_nodes = 2;
    CHECK(core_for_local_rank(host, 0, 2) == 0);
    CHECK(core_for_local_rank(host, 1, 2) == 2); // spread over NUMA nodes
    CHECK(cpus_for_local_rank(host, 1, 2) == std::vector<int>{2, 6});
    for (int r = 0; r < 4; ++r) CHECK(core_for_local_rank(host, r, 4) == r);
    // Fewer cores than ranks: neighbours on different cores.
    for (int r = 0; r < 6; ++r) CHECK(core_for_local_rank(host, r, 6) == r % 4);
    CHECK(cpus_for_local_rank(host, 5, 6) == std::vector<int>{1, 5});
    CHECK(core_for_local_rank(host, 6, 6) == -1);
    CHECK(numa_node_of_cpu(host, 6) == 1);
    CHECK(numa_node_of_cpu(host, 9) == -1);

    host.nics = {{"eth0", "ethernet", 0}, {"ib0", "infiniband", 1}, {"veth", "virtual", -1}};
    CHECK(nearest_nic(host, 1) == 1);
    CHECK(nearest_nic(host, 0) == 0);
    CHECK(nearest_nic(host, 7) == 0);
    host.nics = {{"veth", "virtual", -1}};
    CHECK(nearest_nic(host, 0) == 0);
    host.nics.clear();
    CHECK(nearest_nic(host, 0) == -1);
}

TEST_CASE("CPU lists as in NNPCCL_PIN", "[host]") {
    std::vector<int> cpus;
    std::string error;
    REQUIRE(succeeded(parse_cpu_list("0-3,8,10-11", &cpus), &error));
    CHECK(cpus == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
    for (const char *bad : {"", "a", "3-1", "1,,2", "1-", "-1", "1;2"}) {
        INFO(bad);
        CHECK_FALSE(succeeded(parse_cpu_list(bad, &cpus), &error));
        CHECK(error.find("CPU list") == 0);
    }
}
