// Settings: each layer's options read by that layer, gathered by
// resolve_settings(), with every variable's error message as the README's
// users see it.
#include <catch2/catch.hpp>

#include <string>

#include "config.hpp"
#include "emulated/link_emulation.hpp"
#include "ofi/ofi_options.hpp"
#include "planning_options.hpp"
#include "scoped_env.hpp"
#include "settings.hpp"
#include "shm/shm_options.hpp"
#include "socket/socket_options.hpp"

using namespace nnpccl;

TEST_CASE("settings come from the config struct, then the environment, then defaults", "[config]") {
    Settings s;
    REQUIRE(resolve_settings(nullptr, &s).is_ok());
    CHECK(s.timeout_sec == 300);
    {
        ScopedEnv t("NNPCCL_TIMEOUT", "7");
        ScopedEnv c("NNPCCL_CHUNK_SIZE", "64K");
        REQUIRE(resolve_settings(nullptr, &s).is_ok());
        CHECK(s.timeout_sec == 7);
        CHECK(s.planning.chunk_bytes == 64 * 1024);
        nnpccl_config_t cfg = NNPCCL_CONFIG_INIT;
        cfg.timeout_sec = 9;
        REQUIRE(resolve_settings(&cfg, &s).is_ok());
        CHECK(s.timeout_sec == 9);
    }
    {
        ScopedEnv t("NNPCCL_TIMEOUT", "soon");
        Status st = resolve_settings(nullptr, &s);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::Contains("NNPCCL_TIMEOUT"));
    }
    {
        ScopedEnv c("NNPCCL_CHUNK_SIZE", "1");
        CHECK(resolve_settings(nullptr, &s).code() == NNPCCL_ERR_INVALID_ARGUMENT);
    }
    {
        Settings fresh;
        REQUIRE(resolve_settings(nullptr, &fresh).is_ok());
        CHECK(fresh.ofi.send_in_place);
        ScopedEnv off("NNPCCL_OFI_SEND_IN_PLACE", "0");
        REQUIRE(resolve_settings(nullptr, &fresh).is_ok());
        CHECK_FALSE(fresh.ofi.send_in_place);
    }
    {
        ScopedEnv junk("NNPCCL_OFI_SEND_IN_PLACE", "yes");
        Status bad_flag = resolve_settings(nullptr, &s);
        CHECK(bad_flag.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(bad_flag.message(), Catch::Contains("NNPCCL_OFI_SEND_IN_PLACE=yes"));
    }
    nnpccl_config_t bad = NNPCCL_CONFIG_INIT;
    bad.struct_size = 3;
    Status st = resolve_settings(&bad, &s);
    CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(st.message(), Catch::Contains("struct_size"));
}

TEST_CASE("NNPCCL_NET gives the network between hosts, its latency optional", "[config]") {
    Settings s;
    REQUIRE(resolve_settings(nullptr, &s).is_ok());
    CHECK(s.planning.network_gbps == 0); // the default (presets.hpp) or what libfabric reports
    {
        ScopedEnv n("NNPCCL_NET", "12.5");
        REQUIRE(resolve_settings(nullptr, &s).is_ok());
        CHECK(s.planning.network_gbps == 12.5);
        CHECK(s.planning.network_latency_us == -1);
    }
    {
        ScopedEnv n("NNPCCL_NET", "0.0625,300");
        REQUIRE(resolve_settings(nullptr, &s).is_ok());
        CHECK(s.planning.network_gbps == 0.0625);
        CHECK(s.planning.network_latency_us == 300);
    }
    for (const char *junk : {"fast", "0", "-1", "1.25,", "1.25,x", "1.25,20,3", "1e9", "1.25;20"}) {
        ScopedEnv n("NNPCCL_NET", junk);
        Status st = resolve_settings(nullptr, &s);
        INFO(junk);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::Contains(std::string("NNPCCL_NET=") + junk));
    }
}

TEST_CASE("a malformed variable or config field is an error naming it, its value and what it takes", "[config]") {
    struct Case {
        const char *name, *value, *message;
    };
    const Case cases[] = {
        {"NNPCCL_TIMEOUT", "soon", "NNPCCL_TIMEOUT=soon is not a whole number from 1 to 31536000"},
        {"NNPCCL_SHM_SLOTS", "1", "NNPCCL_SHM_SLOTS=1 is not a whole number from 2 to 64"},
        {"NNPCCL_SHM_BYTES", "512K",
         "NNPCCL_SHM_BYTES=512K is not a size from 1M to 1024G (the shared memory each rank's queues may hold; "
         "e.g. 64M)"},
        {"NNPCCL_SPIN_US", "-1", "NNPCCL_SPIN_US=-1 is not a whole number from 0 to 1000000"},
        {"NNPCCL_OFI_SEND_IN_PLACE", "2", "NNPCCL_OFI_SEND_IN_PLACE=2 is not a whole number from 0 to 1"},
        {"NNPCCL_TRANSPORT", "tcp", "NNPCCL_TRANSPORT=tcp is not auto, shm, ofi or socket"},
        {"NNPCCL_NET_TRANSPORT", "ib",
         "NNPCCL_NET_TRANSPORT=ib is not auto, socket or ofi (what reaches ranks on other hosts)"},
        {"NNPCCL_NET", "fast",
         "NNPCCL_NET=fast is not GBPS or GBPS,LATENCY_US (the network between hosts: GB/s per direction from 0.001 "
         "to 10000, µs from 0 to 1e6; e.g. 1.25,20)"},
        {"NNPCCL_EMULATE_LINKS", "yes", "NNPCCL_EMULATE_LINKS=yes is not a whole number from 0 to 1"},
        {"NNPCCL_TUNE", "on", "NNPCCL_TUNE=on is not a whole number from 0 to 1"},
        {"NNPCCL_EMULATE_SCALE", "0", "NNPCCL_EMULATE_SCALE=0 is not a number from 0.001 to 1e6"},
        {"NNPCCL_EMULATE_SCALE", "2x", "NNPCCL_EMULATE_SCALE=2x is not a number from 0.001 to 1e6"},
        {"NNPCCL_CHUNK_SIZE", "1", "NNPCCL_CHUNK_SIZE=1 is not a size from 4K to 64M"},
        {"NNPCCL_CHUNK_SIZE", "128M", "NNPCCL_CHUNK_SIZE=128M is not a size from 4K to 64M"},
    };
    for (const Case &c : cases) {
        INFO(c.name << "=" << c.value);
        ScopedEnv bad(c.name, c.value);
        Settings s;
        Status st = resolve_settings(nullptr, &s);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK(st.message() == c.message);
    }
    nnpccl_config_t config = NNPCCL_CONFIG_INIT;
    Settings s;
    config.timeout_sec = -1;
    CHECK(resolve_settings(&config, &s).message() == "config->timeout_sec=-1 is negative");
    config = NNPCCL_CONFIG_INIT;
    config.chunk_bytes = 100;
    CHECK(resolve_settings(&config, &s).message() == "config->chunk_bytes=100 is not from 4096 to 64M");
    config = NNPCCL_CONFIG_INIT;
    config.blocking = 2;
    CHECK(resolve_settings(&config, &s).message() ==
          "config->blocking=2 is not 0 (init returns at once) or 1 (init returns when the communicator is ready)");
}

TEST_CASE("each layer reads its own variables and none of another's", "[config]") {
    ScopedEnv slots("NNPCCL_SHM_SLOTS", "4"), bytes("NNPCCL_SHM_BYTES", "64M"),
        in_place("NNPCCL_OFI_SEND_IN_PLACE", "0");
    ScopedEnv topo("NNPCCL_TOPO", "nnpt-ring8"), net("NNPCCL_NET", "2,30"), chunk("NNPCCL_CHUNK_SIZE", "100000");
    ScopedEnv tune("NNPCCL_TUNE", "1"), links("NNPCCL_EMULATE_LINKS", "1"), scale("NNPCCL_EMULATE_SCALE", "4");
    // A malformed variable of the runtime's own is no concern of the layers below it.
    ScopedEnv timeout("NNPCCL_TIMEOUT", "soon");
    ShmOptions shm;
    REQUIRE(resolve_shm_options(&shm).is_ok());
    CHECK(shm.slots == 4);
    CHECK(shm.bytes == size_t{64} << 20);
    CHECK(shm.bytes_set);
    SocketOptions socket;
    REQUIRE(resolve_socket_options(&socket).is_ok());
    CHECK(socket.slots == 4);
    OfiOptions ofi;
    REQUIRE(resolve_ofi_options(&ofi).is_ok());
    CHECK(ofi.slots == 4);
    CHECK_FALSE(ofi.send_in_place);
    PlanningOptions planning;
    REQUIRE(resolve_planning_options(nullptr, &planning).is_ok());
    CHECK(planning.topology == "nnpt-ring8");
    CHECK(planning.network_gbps == 2);
    CHECK(planning.network_latency_us == 30);
    CHECK(planning.chunk_bytes == 100000 / 64 * 64); // whole cache lines
    TuningOptions tuning;
    REQUIRE(resolve_tuning_options(&tuning).is_ok());
    CHECK(tuning.enabled);
    LinkEmulation emulation;
    REQUIRE(resolve_link_emulation(&emulation).is_ok());
    CHECK(emulation.links);
    CHECK(emulation.scale == 4);
    // The config's planning fields are the planner's, over the environment's.
    nnpccl_config_t config = NNPCCL_CONFIG_INIT;
    config.chunk_bytes = 8192;
    config.algorithms = "allreduce:ring";
    REQUIRE(resolve_planning_options(&config, &planning).is_ok());
    CHECK(planning.chunk_bytes == 8192);
    CHECK(planning.chunk_source == "config->chunk_bytes");
    CHECK(planning.algorithms == "allreduce:ring");
    CHECK(planning.algorithms_source == "config->algorithms");
    // The runtime gathers them and fails on its own.
    Settings s;
    CHECK_THAT(resolve_settings(nullptr, &s).message(), Catch::StartsWith("NNPCCL_TIMEOUT=soon"));
}

TEST_CASE("unset variables leave each layer's defaults", "[config]") {
    Settings s;
    REQUIRE(resolve_settings(nullptr, &s).is_ok());
    CHECK(s.transport == TransportMode::Auto);
    CHECK(s.net_transport == NetTransport::Auto);
    CHECK(s.spin_us == -1);
    CHECK(s.blocking);
    CHECK(s.shm.slots == 8);
    CHECK(s.shm.bytes == size_t{120} << 20);
    CHECK_FALSE(s.shm.bytes_set);
    CHECK(s.socket.slots == 8);
    CHECK(s.ofi.slots == 8);
    CHECK(s.planning.chunk_bytes == 512 * 1024);
    CHECK(s.planning.topology.empty());
    CHECK_FALSE(s.tuning.enabled);
    CHECK_FALSE(s.emulation.links);
    CHECK(s.emulation.scale == 1.0);
}
