// Reads rank, size and the rendezvous address from the launchers users
// already have: torchrun and Kubeflow's PyTorchJob (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), a Kubernetes Indexed Job (JOB_COMPLETION_INDEX,
// with WORLD_SIZE and the root's address from the manifest), Open MPI's
// mpirun and Kubeflow's MPIJob (OMPI_COMM_WORLD_*), MPICH's hydra mpiexec
// (PMI_RANK, PMI_SIZE) and Slurm's srun (SLURM_PROCID, SLURM_NTASKS).
// docs/clusters.md shows each in a manifest.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "launch_env.hpp"

namespace nnpccl {

namespace {

struct LauncherVars {
    const char *name;
    const char *rank;
    const char *size;
    const char *local_size; // ranks on this host
};

const LauncherVars kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
    // After torchrun: torchrun started inside an Indexed Job's pod numbers
    // its own processes.
    {"Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"},
};

const char *const kJobIdVars[] = {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_KVSNAME", "SLURM_JOB_ID",
                                  "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};

bool parse_int(const std::string &text, int *out) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > kMaxRanks) return false;
    *out = static_cast<int>(v);
    return true;
}

// 128 bits from two differently seeded FNV-1a passes: keeps stray jobs with
// another job id out; it is not a defence against an attacker (set
// NNPCCL_JOB_SECRET for that).
JobSecret derive_secret(const std::string &material) {
    JobSecret secret{};
    for (int half = 0; half < 2; ++half) {
        uint64_t h = half == 0 ? 0xcbf29ce484222325ull : 0x84222325cbf29ce4ull;
        for (unsigned char c : material) h = (h ^ c) * 0x100000001b3ull;
        std::memcpy(secret.data() + half * 8, &h, 8);
    }
    return secret;
}

} // namespace

Status read_launch_env(LaunchEnv *out) {
    LaunchEnv env;
    // The first launcher whose rank is set is the one; a size without any
    // rank is a half-set environment, named as such.
    for (const LauncherVars &l : kLaunchers) {
        std::string rank = env_string(l.rank), size = env_string(l.size);
        if (rank.empty()) continue;
        if (!parse_int(rank, &env.rank) || !parse_int(size, &env.size) || env.size < 1 || env.rank >= env.size)
            return invalid_argument("%s=%s and %s=%s (%s) are not a rank below a size", l.rank, rank.c_str(), l.size,
                                    size.c_str(), l.name);
        env.launcher = l.name;
        break;
    }
    if (env.launcher.empty()) {
        for (const LauncherVars &l : kLaunchers)
            if (!env_string(l.size).empty())
                return invalid_argument(
                    "%s=%s is set but no rank is (%s for %s%s)", l.size, env_string(l.size).c_str(), l.rank, l.name,
                    std::strcmp(l.size, "WORLD_SIZE") == 0 ? ", or JOB_COMPLETION_INDEX in a Kubernetes Indexed Job"
                                                           : "");
        return invalid_argument("no launcher environment found: set RANK and WORLD_SIZE, or run under mpirun, "
                                "mpiexec, srun or a Kubernetes Indexed Job");
    }
    int local_size = -1;
    for (const LauncherVars &l : kLaunchers)
        if (env.launcher == l.name) parse_int(env_string(l.local_size), &local_size);
    env.root = env_string("NNPCCL_ROOT");
    if (env.root.empty()) {
        std::string addr = env_string("MASTER_ADDR"), port = env_string("MASTER_PORT");
        if (!addr.empty() && !port.empty())
            env.root = (addr.find(':') != std::string::npos ? "[" + addr + "]" : addr) + ":" + port;
    }
    if (env.root.empty() && local_size == env.size) {
        // Every rank is here: meet through a file only this user can read,
        // named after the launcher process that started us all and the job.
        std::string key = std::to_string(getppid());
        for (const char *var : kJobIdVars) key += "|" + env_string(var);
        JobSecret h = derive_secret(key);
        char name[128];
        std::snprintf(name, sizeof name, "/tmp/nnpccl-%u-%02x%02x%02x%02x%02x%02x%02x%02x.id",
                      static_cast<unsigned>(getuid()), h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
        env.rendezvous_file = name;
        *out = env;
        return Status::ok();
    }
    if (env.root.empty())
        return invalid_argument("no rendezvous address: set NNPCCL_ROOT=host:port (or MASTER_ADDR and MASTER_PORT) to "
                                "an address of rank 0's host and a free port (needed when ranks span hosts, or when "
                                "the launcher does not say how many ranks share a host)");
    std::string secret_hex = env_string("NNPCCL_JOB_SECRET");
    if (!secret_hex.empty()) {
        if (secret_hex.size() != 32) return invalid_argument("NNPCCL_JOB_SECRET must be 32 hex digits");
        for (size_t i = 0; i < 16; ++i) {
            char byte[3] = {secret_hex[2 * i], secret_hex[2 * i + 1], 0};
            char *end = nullptr;
            long v = std::strtol(byte, &end, 16);
            if (*end != '\0') return invalid_argument("NNPCCL_JOB_SECRET must be 32 hex digits");
            env.secret[i] = static_cast<uint8_t>(v);
        }
    } else {
        std::string material = env.root;
        for (const char *var : kJobIdVars) material += "|" + env_string(var);
        env.secret = derive_secret(material);
    }
    *out = env;
    return Status::ok();
}

// The file is named after the parent process (getppid) and the job ids
// launchers set (kJobIdVars): ranks started through a wrapper of their own
// each have a different parent and never meet.
const char *const kRendezvousFileHint =
    "; ranks of one host with no address meet through a file named after their parent process, so ranks that do "
    "not share one (each started through its own wrapper: timeout, bash -c, numactl) never find each other: set "
    "NNPCCL_ROOT=host:port, or MASTER_ADDR and MASTER_PORT";

namespace {

// What the rendezvous file holds: the unique id, and the pid of the rank 0
// that wrote it. A rank 0 killed during init leaves its file behind (its
// unlink never runs), and the next job started by the same launcher
// process has the same file name: its ranks must not take the dead one's
// root for their own.
struct RendezvousRecord {
    nnpccl_unique_id_t id;
    int32_t writer_pid;
};

// Best effort: a pid that a new process has taken, or an exited rank 0 not
// yet reaped, still counts as alive.
bool process_alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

} // namespace

Status publish_unique_id(const std::string &path, const nnpccl_unique_id_t &id) {
    std::string tmp = path + ".tmp" + std::to_string(getpid());
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno_error("creating the rendezvous file " + tmp);
    RendezvousRecord record{};
    record.id = id;
    record.writer_pid = static_cast<int32_t>(getpid());
    ssize_t n = write(fd, &record, sizeof record);
    close(fd);
    if (n != static_cast<ssize_t>(sizeof record) || rename(tmp.c_str(), path.c_str()) != 0) {
        Status st = errno_error("writing the rendezvous file " + path);
        unlink(tmp.c_str());
        return st;
    }
    return Status::ok();
}

Status read_unique_id(const std::string &path, const Deadline &deadline, nnpccl_unique_id_t *id,
                      const StopSignal *stop) {
    pid_t stale_writer = 0;
    while (true) {
        if (stop != nullptr && stop->raised()) return stopped_error();
        int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            struct stat info {};
            bool mine = fstat(fd, &info) == 0 && info.st_uid == getuid() && (info.st_mode & 077) == 0;
            RendezvousRecord record{};
            ssize_t n = mine ? read(fd, &record, sizeof record) : -1;
            close(fd);
            if (!mine) return invalid_usage("rendezvous file %s is not private to this user; remove it", path.c_str());
            if (n == static_cast<ssize_t>(sizeof record)) {
                // A file whose writer has died is a dead job's: wait for
                // this job's rank 0 to replace it.
                if (process_alive(record.writer_pid)) {
                    *id = record.id;
                    return Status::ok();
                }
                stale_writer = record.writer_pid;
            }
        }
        if (deadline.passed())
            return timeout_error("rank 0 did not publish %s before the deadline (is rank 0 running?)%s%s",
                                 path.c_str(),
                                 stale_writer != 0 ? format("; the file there was left by pid %d, which has ended",
                                                            static_cast<int>(stale_writer)).c_str()
                                                   : "",
                                 kRendezvousFileHint);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

} // namespace nnpccl
