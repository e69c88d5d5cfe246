#include "settings.hpp"

#include "config.hpp"

namespace nnpccl {

namespace {

// The runtime's own variables.
Status resolve_runtime_env(Settings *s) {
    NNPCCL_TRY(env_int("NNPCCL_TIMEOUT", 1, 86400 * 365, &s->timeout_sec));
    NNPCCL_TRY(env_int("NNPCCL_SPIN_US", 0, 1000000, &s->spin_us));
    std::string transport = env_string("NNPCCL_TRANSPORT");
    if (transport == "shm")
        s->transport = TransportMode::Shm;
    else if (transport == "ofi")
        s->transport = TransportMode::Ofi;
    else if (transport == "socket")
        s->transport = TransportMode::Socket;
    else if (!transport.empty() && transport != "auto")
        return invalid_argument("NNPCCL_TRANSPORT=%s is not auto, shm, ofi or socket", transport.c_str());
    std::string net_transport = env_string("NNPCCL_NET_TRANSPORT");
    if (net_transport == "socket")
        s->net_transport = NetTransport::Socket;
    else if (net_transport == "ofi")
        s->net_transport = NetTransport::Ofi;
    else if (!net_transport.empty() && net_transport != "auto")
        return invalid_argument(
            "NNPCCL_NET_TRANSPORT=%s is not auto, socket or ofi (what reaches ranks on other hosts)",
            net_transport.c_str());
    s->pin = env_string("NNPCCL_PIN");
    s->trace = env_string("NNPCCL_TRACE"); // whether it can be written is init's check (nnpccl_comm::prepare)
    return Status::ok();
}

// The runtime's own fields of the config (the planner reads its own).
Status apply_config(const nnpccl_config_t &config, Settings *s) {
    NNPCCL_TRY(check_config_size(&config));
    if (config.timeout_sec < 0) return invalid_argument("config->timeout_sec=%d is negative", config.timeout_sec);
    if (config.timeout_sec > 0) s->timeout_sec = config.timeout_sec;
    if (config.blocking != 0 && config.blocking != 1)
        return invalid_argument("config->blocking=%d is not 0 (init returns at once) or 1 (init returns when "
                                "the communicator is ready)",
                                config.blocking);
    s->blocking = config.blocking == 1;
    return Status::ok();
}

} // namespace

Status resolve_settings(const nnpccl_config_t *config, Settings *out) {
    Settings s;
    NNPCCL_TRY(resolve_runtime_env(&s));
    NNPCCL_TRY(resolve_shm_options(&s.shm));
    NNPCCL_TRY(resolve_socket_options(&s.socket));
    NNPCCL_TRY(resolve_ofi_options(&s.ofi));
    NNPCCL_TRY(resolve_planning_options(config, &s.planning));
    NNPCCL_TRY(resolve_tuning_options(&s.tuning));
    NNPCCL_TRY(resolve_link_emulation(&s.emulation));
    if (config != nullptr) NNPCCL_TRY(apply_config(*config, &s));
    *out = s;
    return Status::ok();
}

} // namespace nnpccl
