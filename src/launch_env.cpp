// Reads rank, size and the rendezvous address from the launchers users
// already have: torchrun and Kubeflow's PyTorchJob (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), a Kubernetes Indexed Job (JOB_COMPLETION_INDEX,
// with WORLD_SIZE and the root's address from the manifest), Open MPI's
// mpirun and Kubeflow's MPIJob (OMPI_COMM_WORLD_*), MPICH's hydra mpiexec
// (PMI_RANK, PMI_SIZE) and Slurm's srun (SLURM_PROCID, SLURM_NTASKS).
// docs/clusters.md shows each in a manifest.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "launch_env.hpp"

#include "bootstrap_root.hpp"

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

// The ids launchers give a job (a step, a run), that its ranks share and
// another job's do not: Open MPI's (4.x, 5.x), PMIx's, MPICH's and Intel
// MPI's PMI, Slurm's job and step, torchrun's run.
const char *const kJobIdVars[] = {
    "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE", "PMI_KVSNAME", "SLURM_JOB_ID",
    "SLURM_STEP_ID",           "TORCHELASTIC_RUN_ID"};

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

// The root's address from MASTER_ADDR and MASTER_PORT: the port is moved
// by kMasterPortOffset, as every rank computes alike, because torchrun's
// store listens at MASTER_PORT itself.
Status root_from_master(const std::string &addr, const std::string &port_text, LaunchEnv *env) {
    int port = 0;
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(port_text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < 1 || v > 65535)
        return invalid_argument("MASTER_PORT=%s is not a port from 1 to 65535", port_text.c_str());
    port = static_cast<int>(v);
    const int ours = port + kMasterPortOffset <= 65535 ? port + kMasterPortOffset : port - kMasterPortOffset;
    env->root = (addr.find(':') != std::string::npos ? "[" + addr + "]" : addr) + ":" + std::to_string(ours);
    env->root_from = format("MASTER_ADDR=%s and MASTER_PORT=%d %c %d, torchrun's store holding MASTER_PORT itself",
                            addr.c_str(), port, ours > port ? '+' : '-', kMasterPortOffset);
    return Status::ok();
}

// A one-host job's ranks started by the MPIs and Slurm have a parent of
// the launcher's own for each job (orted, hydra's proxy, slurmstepd) and
// job ids. torchrun-style variables set by a script or a program have
// neither: their parent may start several jobs alike, whose ranks could
// not tell which rank 0 is theirs, and a rank that guessed would compute
// with another job's ranks. Such a job must say what is its own.
Status check_job_is_told_apart(const LaunchEnv &env) {
    const bool script = env.launcher == "torchrun" || env.launcher == "Kubernetes Indexed Job";
    if (!script || env.size == 1 || env.secret_given || !env_string("MASTER_PORT").empty()) return Status::ok();
    for (const char *var : kJobIdVars)
        if (!env_string(var).empty()) return Status::ok();
    return invalid_argument(
        "WORLD_SIZE=%d and LOCAL_WORLD_SIZE=%d with no address: the ranks would meet through a file named after "
        "their parent process (pid %d), but nothing tells this job from another that process starts alike; set "
        "something of this job's own on its ranks: NNPCCL_JOB_SECRET (32 hex digits), TORCHELASTIC_RUN_ID or "
        "MASTER_PORT, or an address (MASTER_ADDR and MASTER_PORT, or NNPCCL_ROOT)",
        env.size, env.size, static_cast<int>(getppid()));
}

// Where the one-host rendezvous files go: a directory only this user can
// enter, so that no other user can create, replace or even see a file
// whose name anyone could compute (without a secret, the name is keyed by
// the parent's pid and the launcher's variables alone).
// $XDG_RUNTIME_DIR when set (the login session's own, 0700), else a
// directory of ours under /tmp; take_file() makes and checks it.
std::string rendezvous_directory() {
    const std::string runtime = env_string("XDG_RUNTIME_DIR");
    if (!runtime.empty() && runtime[0] == '/') return runtime;
    return format("/tmp/nnpccl-rendezvous-%u", static_cast<unsigned>(getuid()));
}

// Names the one-host rendezvous file after everything the job's ranks
// share that another job started beside it may not: the user, the parent
// process (a launcher starts each job's ranks from a process of its own),
// the launcher, the size, the job ids launchers set, MASTER_PORT and the
// secret. Keyed by the secret, the name says nothing about it.
void key_rendezvous(const JobSecret &secret_or_zero, LaunchEnv *env) {
    std::string material = format("uid %u|parent %d|%s|size %d", static_cast<unsigned>(getuid()),
                                  static_cast<int>(getppid()), env->launcher.c_str(), env->size);
    env->rendezvous_keyed_by =
        format("parent process %d, %s, %d ranks", static_cast<int>(getppid()), env->launcher.c_str(), env->size);
    for (const char *var : kJobIdVars)
        if (!env_string(var).empty()) {
            material += format("|%s=%s", var, env_string(var).c_str());
            env->rendezvous_keyed_by += format(", %s=%s", var, env_string(var).c_str());
        }
    if (!env_string("MASTER_PORT").empty()) {
        material += "|MASTER_PORT=" + env_string("MASTER_PORT");
        env->rendezvous_keyed_by += ", MASTER_PORT=" + env_string("MASTER_PORT");
    }
    if (env->secret_given) env->rendezvous_keyed_by += ", NNPCCL_JOB_SECRET";
    const std::string for_name = "nnpccl rendezvous name|" + material, for_key = "nnpccl rendezvous key|" + material;
    const uint64_t name = siphash24(secret_or_zero, for_name.data(), for_name.size());
    env->rendezvous_key = siphash24(secret_or_zero, for_key.data(), for_key.size());
    env->rendezvous_file = format("%s/nnpccl-%u-%016llx.id", rendezvous_directory().c_str(),
                                  static_cast<unsigned>(getuid()), static_cast<unsigned long long>(name));
}

} // namespace

Status parse_job_secret(const std::string &text, JobSecret *out) {
    // Digit by digit: strtol would take a sign or a space ("+f+f...", " f f...").
    if (text.size() != 2 * out->size())
        return invalid_argument("NNPCCL_JOB_SECRET must be exactly 32 hex digits; it has %zu characters", text.size());
    auto digit = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
    };
    for (size_t i = 0; i < text.size(); ++i)
        if (digit(text[i]) < 0)
            return invalid_argument("NNPCCL_JOB_SECRET must be exactly 32 hex digits (0-9, a-f); character %zu is "
                                    "not one",
                                    i + 1);
    for (size_t i = 0; i < out->size(); ++i)
        (*out)[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
    return Status::ok();
}

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
    const std::string secret_hex = env_string("NNPCCL_JOB_SECRET");
    if (!secret_hex.empty()) {
        NNPCCL_TRY(parse_job_secret(secret_hex, &env.secret));
        env.secret_given = true;
    }
    int local_size = -1;
    for (const LauncherVars &l : kLaunchers)
        if (env.launcher == l.name) parse_int(env_string(l.local_size), &local_size);
    env.root = env_string("NNPCCL_ROOT");
    if (!env.root.empty()) env.root_from = "NNPCCL_ROOT=" + env.root;
    std::string addr = env_string("MASTER_ADDR"), port = env_string("MASTER_PORT");
    if (env.root.empty() && !addr.empty() && !port.empty()) NNPCCL_TRY(root_from_master(addr, port, &env));
    if (env.root.empty() && local_size == env.size) {
        // Every rank is here: meet through a file only this user can read.
        NNPCCL_TRY(check_job_is_told_apart(env));
        key_rendezvous(env.secret, &env);
        *out = env;
        return Status::ok();
    }
    if (env.root.empty())
        return invalid_argument("no rendezvous address: set NNPCCL_ROOT=host:port (or MASTER_ADDR and MASTER_PORT) to "
                                "an address of rank 0's host and a free port (needed when ranks span hosts, or when "
                                "the launcher does not say how many ranks share a host)");
    if (!env.secret_given) {
        std::string material = env.root;
        for (const char *var : kJobIdVars) material += "|" + env_string(var);
        env.secret = derive_secret(material);
    }
    *out = env;
    return Status::ok();
}

Status start_root_from_env(const LaunchEnv &env, int timeout_sec, UniqueId *id) {
    id->secret = env.secret;
    NNPCCL_TRY(parse_host_port(env.root, &id->root));
    SockAddr any = id->root;
    if (any.family() == AF_INET)
        reinterpret_cast<sockaddr_in *>(&any.storage)->sin_addr.s_addr = htonl(INADDR_ANY);
    else
        reinterpret_cast<sockaddr_in6 *>(&any.storage)->sin6_addr = in6addr_any;
    SockAddr bound;
    Status st = start_bootstrap_root(any, id->secret, timeout_sec, &bound);
    if (!st)
        return Status(st.code(), format("rank 0 cannot host the rendezvous root at port %u (from %s): %s; another "
                                        "program holds that port: choose a free one with NNPCCL_ROOT=host:port on "
                                        "every rank",
                                        id->root.port(), env.root_from.c_str(), st.message().c_str()));
    return Status::ok();
}

Status explain_join_failure(const LaunchEnv &env, const Status &failure) {
    // The bootstrap's words for "the root was not there, or was not nnpccl's".
    static const char *const kRootMissing[] = {"could not reach the bootstrap root", "without welcoming it",
                                               "other than nnpccl's welcome", "did not answer its hello"};
    if (failure.is_ok() || env.rank == 0) return failure;
    bool about_root = false;
    for (const char *words : kRootMissing) about_root |= failure.message().find(words) != std::string::npos;
    if (!about_root) return failure;
    return Status(
        failure.code(),
        format("%s; rank 0 was to host the rendezvous root at %s (from %s): if rank 0 could not bind that port "
               "(another program holds it) or has not started, its own error says so; choose a free port "
               "with NNPCCL_ROOT=host:port on every rank",
               failure.message().c_str(), env.root.c_str(), env.root_from.c_str()));
}

// The file is named after the parent process (getppid) and the job ids
// launchers set (kJobIdVars): ranks started through a wrapper of their own
// each have a different parent and never meet.
const char *const kRendezvousFileHint =
    "; ranks of one host with no address meet through a file named after their parent process, so ranks that do "
    "not share one (each started through its own wrapper: timeout, bash -c, numactl) never find each other: set "
    "NNPCCL_ROOT=host:port, or MASTER_ADDR and MASTER_PORT";

namespace {

// What the rendezvous file holds: the unique id, the pid of the rank 0
// that wrote it and the job's key. A rank 0 killed during init leaves its
// file behind (its unlink never runs), and the next job started by the
// same launcher process has the same file name: its ranks must not take
// the dead one's root for their own. A rank's place holds its pid alone.
struct RendezvousRecord {
    nnpccl_unique_id_t id;
    int32_t writer_pid;
    uint32_t reserved;
    uint64_t key;
};

// Best effort: a pid that a new process has taken, or an exited rank 0 not
// yet reaped, still counts as alive.
bool process_alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::string place_file(const LaunchEnv &env) {
    return env.rank == 0 ? env.rendezvous_file : format("%s.rank%d", env.rendezvous_file.c_str(), env.rank);
}

// Reads a file of ours into `record` (at most its size); the bytes read, or
// -1 when the file is missing or not private to this user (*foreign).
ssize_t read_private(const std::string &path, void *record, size_t size, bool *foreign) {
    *foreign = false;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat info {};
    *foreign = fstat(fd, &info) != 0 || info.st_uid != getuid() || (info.st_mode & 077) != 0;
    ssize_t n = *foreign ? -1 : read(fd, record, size);
    close(fd);
    return n;
}

Status two_jobs_meet(const LaunchEnv &env, const char *what, pid_t holder) {
    return invalid_usage("%s at the one-host rendezvous %s is held by a live process (pid %d) of another job that "
                         "this one cannot be told from (%s): their ranks could not tell which rank 0 is theirs, so "
                         "this one stops rather than join the other; give each job its own NNPCCL_JOB_SECRET (32 hex "
                         "digits), TORCHELASTIC_RUN_ID or MASTER_PORT, or an address with NNPCCL_ROOT",
                         what, env.rendezvous_file.c_str(), static_cast<int>(holder), env.rendezvous_keyed_by.c_str());
}

Status link_into_place(const LaunchEnv &env, const std::string &path, const void *bytes, size_t size, const char *what);

// Opens the directory of `path`, made if missing, for a lock on it; -1
// with *error set when it is not a directory private to this user (a
// symbolic link, another user's, or open to others): a file there could
// be replaced under the ranks.
int open_private_directory(const std::string &path, Status *error) {
    const std::string dir = path.substr(0, path.rfind('/'));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        *error = errno_error("creating the rendezvous directory " + dir);
        return -1;
    }
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat info {};
    if (fd < 0 || fstat(fd, &info) != 0 || info.st_uid != getuid() || (info.st_mode & 077) != 0) {
        *error = invalid_usage("the rendezvous directory %s is not a directory private to this user (%s): remove "
                               "it, or set XDG_RUNTIME_DIR to a directory of this user's that only it can enter",
                               dir.c_str(),
                               fd < 0 ? std::strerror(errno)
                                      : format("owner uid %u, mode %03o", static_cast<unsigned>(info.st_uid),
                                               static_cast<unsigned>(info.st_mode & 0777))
                                            .c_str());
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

// Writes `bytes` to `path` if no live process holds it: through a private
// temporary file linked into place, so that readers see all or nothing
// and two writers cannot both succeed. A file whose writer has ended is a
// dead job's and is replaced, under a lock on the directory: two ranks
// that find the same dead file at once (two jobs, or a job restarted by
// two launchers) would otherwise each remove it, the later one removing
// the earlier one's fresh file, and both go on as its holder.
Status take_file(const LaunchEnv &env, const std::string &path, const void *bytes, size_t size, const char *what) {
    Status refused;
    const int dir = open_private_directory(path, &refused);
    if (dir < 0) return refused;
    flock(dir, LOCK_EX);
    Status st = link_into_place(env, path, bytes, size, what);
    close(dir); // and with it the lock
    return st;
}

Status link_into_place(const LaunchEnv &env, const std::string &path, const void *bytes, size_t size,
                       const char *what) {
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno_error("creating the rendezvous file " + tmp);
    ssize_t n = write(fd, bytes, size);
    close(fd);
    if (n != static_cast<ssize_t>(size)) {
        unlink(tmp.c_str());
        return errno_error("writing the rendezvous file " + tmp);
    }
    Status st = Status::ok();
    for (int attempt = 0;; ++attempt) {
        if (link(tmp.c_str(), path.c_str()) == 0) break;
        if (errno != EEXIST || attempt == 3) {
            st = errno_error("placing the rendezvous file " + path);
            break;
        }
        int32_t holder = 0; // the first field of both kinds of file is a pid
        RendezvousRecord record{};
        bool foreign = false;
        ssize_t got = read_private(path, &record, sizeof record, &foreign);
        if (foreign) {
            st = invalid_usage("rendezvous file %s is not private to this user; remove it", path.c_str());
            break;
        }
        if (got == static_cast<ssize_t>(sizeof record))
            holder = record.writer_pid;
        else if (got >= static_cast<ssize_t>(sizeof holder))
            std::memcpy(&holder, &record, sizeof holder);
        if (process_alive(holder)) {
            st = two_jobs_meet(env, what, holder);
            break;
        }
        unlink(path.c_str());
    }
    unlink(tmp.c_str());
    return st;
}

} // namespace

Status publish_unique_id(const LaunchEnv &env, const nnpccl_unique_id_t &id) {
    RendezvousRecord record{};
    record.id = id;
    record.writer_pid = static_cast<int32_t>(getpid());
    record.key = env.rendezvous_key;
    return take_file(env, env.rendezvous_file, &record, sizeof record, "rank 0's place");
}

Status claim_rendezvous_place(const LaunchEnv &env) {
    if (env.rank == 0) return Status::ok();
    const int32_t pid = static_cast<int32_t>(getpid());
    return take_file(env, place_file(env), &pid, sizeof pid, format("rank %d's place", env.rank).c_str());
}

void leave_rendezvous(const LaunchEnv &env) {
    const std::string path = place_file(env);
    RendezvousRecord record{};
    bool foreign = false;
    ssize_t got = read_private(path, &record, sizeof record, &foreign);
    int32_t holder = 0;
    if (got >= static_cast<ssize_t>(sizeof holder)) std::memcpy(&holder, &record, sizeof holder);
    if (env.rank == 0 && got == static_cast<ssize_t>(sizeof record)) holder = record.writer_pid;
    if (holder == static_cast<int32_t>(getpid())) unlink(path.c_str());
}

Status read_unique_id(const LaunchEnv &env, const Deadline &deadline, nnpccl_unique_id_t *id, const StopSignal *stop) {
    pid_t stale_writer = 0;
    while (true) {
        if (stop != nullptr && stop->raised()) return stopped_error();
        RendezvousRecord record{};
        bool foreign = false;
        ssize_t n = read_private(env.rendezvous_file, &record, sizeof record, &foreign);
        if (foreign)
            return invalid_usage("rendezvous file %s is not private to this user; remove it",
                                 env.rendezvous_file.c_str());
        // A file whose writer has died is a dead job's: wait for this job's
        // rank 0 to replace it. One with another key (a name that collides)
        // is not this job's either.
        if (n == static_cast<ssize_t>(sizeof record) && record.key == env.rendezvous_key) {
            if (process_alive(record.writer_pid)) {
                *id = record.id;
                return Status::ok();
            }
            stale_writer = record.writer_pid;
        }
        if (deadline.passed())
            return timeout_error("rank 0 did not publish %s before the deadline (is rank 0 running?)%s%s",
                                 env.rendezvous_file.c_str(),
                                 stale_writer != 0 ? format("; the file there was left by pid %d, which has ended",
                                                            static_cast<int>(stale_writer))
                                                         .c_str()
                                                   : "",
                                 kRendezvousFileHint);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

} // namespace nnpccl
