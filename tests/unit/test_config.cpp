#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "algo_override.hpp"
#include "bootstrap_wire.hpp"
#include "check_data.hpp"
#include "launch_env.hpp"
#include "scoped_env.hpp"
#include "succeeded.hpp"

using namespace nnpccl;

TEST_CASE("sizes parse with binary suffixes and reject junk", "[config]") {
    CHECK(parse_size("4096").value() == 4096);
    CHECK(parse_size("512K").value() == 512 * 1024);
    CHECK(parse_size("64M").value() == 64u << 20);
    CHECK(parse_size("1G").value() == size_t{1} << 30);
    CHECK_FALSE(parse_size(""));
    CHECK_FALSE(parse_size("-4"));
    CHECK_FALSE(parse_size("12Q"));
    CHECK_FALSE(parse_size("99999999999999999999"));
    CHECK_FALSE(parse_size("17179869184G"));
}

TEST_CASE("launcher environments give rank, size and root", "[config]") {
    LaunchEnv env;
    SECTION("torchrun") {
        ScopedEnv r("RANK", "2"), w("WORLD_SIZE", "4"), a("MASTER_ADDR", "127.0.0.1"), p("MASTER_PORT", "29500");
        REQUIRE(read_launch_env(&env).is_ok());
        CHECK(env.rank == 2);
        CHECK(env.size == 4);
        // torchrun's store holds MASTER_PORT: the root is kMasterPortOffset above it.
        CHECK(env.root == "127.0.0.1:29600");
        CHECK_THAT(env.root_from, Catch::Contains("MASTER_PORT=29500 + 100"));
        CHECK(env.launcher == "torchrun");
        SECTION("below it where above would pass the last port") {
            ScopedEnv high("MASTER_PORT", "65500");
            REQUIRE(read_launch_env(&env).is_ok());
            CHECK(env.root == "127.0.0.1:65400");
        }
        SECTION("NNPCCL_ROOT still names the root itself") {
            ScopedEnv root("NNPCCL_ROOT", "127.0.0.1:29500");
            REQUIRE(read_launch_env(&env).is_ok());
            CHECK(env.root == "127.0.0.1:29500");
        }
        SECTION("a MASTER_PORT that is not a port is named") {
            ScopedEnv bad("MASTER_PORT", "29500x");
            Status st = read_launch_env(&env);
            CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
            CHECK_THAT(st.message(), Catch::Contains("MASTER_PORT=29500x"));
        }
    }
    SECTION("a Kubernetes Indexed Job: the completion index is the rank") {
        ScopedEnv i("JOB_COMPLETION_INDEX", "2"), w("WORLD_SIZE", "4"), root("NNPCCL_ROOT", "train-0.train:29500");
        REQUIRE(read_launch_env(&env).is_ok());
        CHECK(env.launcher == "Kubernetes Indexed Job");
        CHECK(env.rank == 2);
        CHECK(env.size == 4);
        CHECK(env.root == "train-0.train:29500");
        SECTION("torchrun inside the pod numbers its own processes") {
            ScopedEnv r("RANK", "5"), w8("WORLD_SIZE", "8");
            REQUIRE(read_launch_env(&env).is_ok());
            CHECK(env.launcher == "torchrun");
            CHECK(env.rank == 5);
        }
    }
    SECTION("a size without a rank names what is missing") {
        ScopedEnv w("WORLD_SIZE", "4"), root("NNPCCL_ROOT", "localhost:4000");
        Status st = read_launch_env(&env);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK(st.message() == "WORLD_SIZE=4 is set but no rank is (RANK for torchrun, or JOB_COMPLETION_INDEX in a "
                              "Kubernetes Indexed Job)");
    }
    SECTION("Open MPI with NNPCCL_ROOT") {
        ScopedEnv r("OMPI_COMM_WORLD_RANK", "1"), w("OMPI_COMM_WORLD_SIZE", "3"), root("NNPCCL_ROOT", "localhost:4000");
        REQUIRE(read_launch_env(&env).is_ok());
        CHECK(env.rank == 1);
        CHECK(env.size == 3);
        CHECK(env.launcher == "Open MPI");
    }
    SECTION("MPICH's hydra mpiexec, every rank on this host: they meet through one file") {
        // What mpiexec.hydra -n 4 exports on one host (and nothing that names the job).
        ScopedEnv r("PMI_RANK", "3"), w("PMI_SIZE", "4"), lr("MPI_LOCALRANKID", "3"), ln("MPI_LOCALNRANKS", "4"),
            fd("PMI_FD", "6");
        REQUIRE(read_launch_env(&env).is_ok());
        CHECK(env.launcher == "MPICH");
        CHECK(env.rank == 3);
        CHECK(env.size == 4);
        CHECK(env.root.empty());
        CHECK_THAT(env.rendezvous_file, Catch::Contains("/nnpccl-")); // in $XDG_RUNTIME_DIR or /tmp
        // Rank 0 of the same job (same parent, the hydra proxy) names the same file.
        ScopedEnv r0("PMI_RANK", "0"), lr0("MPI_LOCALRANKID", "0"), fd0("PMI_FD", "9");
        LaunchEnv rank0;
        REQUIRE(read_launch_env(&rank0).is_ok());
        CHECK(rank0.rank == 0);
        CHECK(rank0.rendezvous_file == env.rendezvous_file);
    }
    SECTION("MPICH across hosts needs an address, and takes NNPCCL_ROOT") {
        ScopedEnv r("PMI_RANK", "5"), w("PMI_SIZE", "8"), lr("MPI_LOCALRANKID", "1"), ln("MPI_LOCALNRANKS", "4");
        Status st = read_launch_env(&env);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::Contains("NNPCCL_ROOT"));
        ScopedEnv root("NNPCCL_ROOT", "host-a:29500");
        REQUIRE(read_launch_env(&env).is_ok());
        CHECK(env.launcher == "MPICH");
        CHECK(env.rank == 5);
        CHECK(env.size == 8);
        CHECK(env.root == "host-a:29500");
        CHECK(env.rendezvous_file.empty());
    }
    SECTION("a rank beyond the size is an error naming the variables") {
        ScopedEnv r("PMI_RANK", "5"), w("PMI_SIZE", "2"), root("NNPCCL_ROOT", "localhost:4000");
        Status st = read_launch_env(&env);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::Contains("PMI_RANK"));
    }
    SECTION("no rendezvous address is an error that says what to set") {
        ScopedEnv r("SLURM_PROCID", "0"), w("SLURM_NTASKS", "2");
        Status st = read_launch_env(&env);
        CHECK_THAT(st.message(), Catch::Contains("NNPCCL_ROOT"));
    }
    SECTION("the job secret is the same on every rank of a job") {
        ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "2"), root("NNPCCL_ROOT", "127.0.0.1:5000");
        REQUIRE(read_launch_env(&env).is_ok());
        LaunchEnv other;
        ScopedEnv r1("RANK", "1");
        REQUIRE(read_launch_env(&other).is_ok());
        CHECK(secrets_equal(env.secret, other.secret));
    }
}

TEST_CASE("unique ids round-trip and garbage is rejected", "[bootstrap]") {
    UniqueId id;
    REQUIRE(parse_host_port("127.0.0.1:4242", &id.root).is_ok());
    REQUIRE(random_secret(&id.secret).is_ok());
    nnpccl_unique_id_t raw;
    encode_unique_id(id, &raw);
    UniqueId back;
    REQUIRE(decode_unique_id(raw, &back).is_ok());
    CHECK(back.root.to_string() == "127.0.0.1:4242");
    CHECK(secrets_equal(back.secret, id.secret));
    nnpccl_unique_id_t junk;
    std::memset(&junk, 0x5a, sizeof junk);
    CHECK(decode_unique_id(junk, &back).code() == NNPCCL_ERR_INVALID_ARGUMENT);
}

TEST_CASE("the root and the ranks prove the job secret to each other without sending it", "[bootstrap]") {
    // SipHash-2-4's published vectors: key 00..0f, messages 00..(n-1).
    JobSecret key;
    for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
    uint8_t message[15];
    for (size_t i = 0; i < sizeof message; ++i) message[i] = static_cast<uint8_t>(i);
    CHECK(siphash24(key, message, 0) == 0x726fdb47dd0e0e31ULL);
    CHECK(siphash24(key, message, 15) == 0xa129ca6149be45e5ULL);

    JobSecret secret, other;
    REQUIRE(random_secret(&secret).is_ok());
    REQUIRE(random_secret(&other).is_ok());
    Hello hello, again;
    REQUIRE(make_hello(secret, 2, 4, 30000, &hello).is_ok());
    REQUIRE(make_hello(secret, 2, 4, 30000, &again).is_ok());
    CHECK(std::memcmp(hello.nonce, again.nonce, sizeof hello.nonce) != 0); // a fresh nonce each time
    CHECK(hello_is_genuine(secret, hello));
    CHECK_FALSE(hello_is_genuine(other, hello));
    Hello renamed = hello;
    renamed.rank = 3; // a proof is bound to the rank it was made for
    CHECK_FALSE(hello_is_genuine(secret, renamed));
    Hello hurried = hello;
    hurried.setup_ms = 1; // and to its deadline, which the root acts on
    CHECK_FALSE(hello_is_genuine(secret, hurried));
    std::string wire = std::string(reinterpret_cast<const char *>(&hello), sizeof hello);
    CHECK(wire.find(std::string(reinterpret_cast<const char *>(secret.data()), 8)) == std::string::npos);

    Nonce challenge, other_challenge, taken{};
    REQUIRE(random_bytes(challenge.data(), challenge.size()).is_ok());
    REQUIRE(random_bytes(other_challenge.data(), other_challenge.size()).is_ok());
    std::string welcome = encode_welcome(secret, hello, challenge).substr(kFrameHeaderBytes);
    CHECK(welcome_is_genuine(secret, hello, welcome, &taken));
    CHECK(taken == challenge); // the rank learns the challenge it must answer
    CHECK_FALSE(welcome_is_genuine(other, hello, welcome, &taken));
    CHECK_FALSE(welcome_is_genuine(secret, again, welcome, &taken)); // not replayable to another hello
    std::string tampered = welcome;
    tampered[sizeof(uint64_t)] ^= 1; // the challenge is covered by the root's proof
    CHECK_FALSE(welcome_is_genuine(secret, hello, tampered, &taken));
    // The hello's own proof is not a welcome: the labels differ.
    CHECK_FALSE(
        welcome_is_genuine(secret, hello, std::string(reinterpret_cast<const char *>(&hello.proof), 8), &taken));
    CHECK_FALSE(welcome_is_genuine(secret, hello, welcome.substr(1), &taken));

    // The answer admits the rank: it is bound to this connection's challenge,
    // so a hello and answer recorded from one connection fail on another.
    std::string answer = encode_answer(secret, hello, challenge).substr(kFrameHeaderBytes);
    CHECK(answer_is_genuine(secret, hello, challenge, answer));
    CHECK_FALSE(answer_is_genuine(secret, hello, other_challenge, answer));
    CHECK_FALSE(answer_is_genuine(other, hello, challenge, answer));
    CHECK_FALSE(answer_is_genuine(secret, again, challenge, answer));
    CHECK_FALSE(answer_is_genuine(secret, hello, challenge, welcome.substr(0, 8))); // a welcome is no answer
    CHECK_FALSE(answer_is_genuine(secret, hello, challenge, answer.substr(1)));
}

TEST_CASE("bootstrap messages are bounds-checked", "[bootstrap]") {
    FrameHeader h{kFrameMagic, static_cast<uint32_t>(FrameType::Gather), 100};
    CHECK(check_frame_header(h, 100).is_ok());
    CHECK_FALSE(check_frame_header(h, 99).is_ok());
    h.magic = 0;
    CHECK_FALSE(check_frame_header(h, 100).is_ok());
    h = FrameHeader{kFrameMagic, 77, 0};
    CHECK_FALSE(check_frame_header(h, 100).is_ok());

    Hello hello{};
    hello.rank = 3;
    hello.nranks = 2;
    Hello out;
    CHECK_FALSE(decode_hello(std::string(reinterpret_cast<char *>(&hello), sizeof hello), &out).is_ok());
    CHECK_FALSE(decode_hello("short", &out).is_ok());

    std::vector<std::string> parts = {"a", "", "ccc"};
    std::string wire = encode_gather_result(parts);
    std::vector<std::string> decoded;
    REQUIRE(decode_gather_result(wire, 3, &decoded).is_ok());
    CHECK(decoded == parts);
    CHECK_FALSE(decode_gather_result(wire, 2, &decoded).is_ok());
    CHECK_FALSE(decode_gather_result(wire.substr(0, wire.size() - 1), 3, &decoded).is_ok());
    CHECK_FALSE(decode_gather_result(wire + "x", 3, &decoded).is_ok());
}

TEST_CASE("the bench's check data catches a single flipped bit", "[check]") {
    auto p = nnpccl_check::reduced_pattern(NNPCCL_FLOAT32, NNPCCL_SUM, 4);
    std::vector<float> buf(5000);
    p.fill(buf.data(), 123, buf.size());
    CHECK(p.count_wrong(buf.data(), 123, buf.size()) == 0);
    uint32_t bits;
    std::memcpy(&bits, &buf[4321], 4);
    bits ^= 1;
    std::memcpy(&buf[4321], &bits, 4);
    CHECK(p.count_wrong(buf.data(), 123, buf.size()) == 1);
    CHECK(p.count_wrong(buf.data(), 124, buf.size()) > 1000);
}

TEST_CASE("NNPCCL_ALGO picks per collective and per half-open size range", "[config][algo]") {
    AlgoOverride rules;
    std::string error;
    REQUIRE(succeeded(rules.parse("allreduce:direct:0-8K,ring:8K-max;broadcast:ring"), &error));
    CHECK(error.empty());
    CHECK(*rules.pick(Collective::Allreduce, 0) == "direct");
    CHECK(*rules.pick(Collective::Allreduce, 8191) == "direct");
    CHECK(*rules.pick(Collective::Allreduce, 8192) == "ring");
    CHECK(*rules.pick(Collective::Allreduce, SIZE_MAX) == "ring");
    CHECK(*rules.pick(Collective::Broadcast, 1u << 30) == "ring");
    CHECK(rules.pick(Collective::Allgather, 64) == nullptr);

    REQUIRE(succeeded(rules.parse("allreduce:direct:0-4K"), &error));
    CHECK(rules.pick(Collective::Allreduce, 4096) == nullptr); // left to the selector
    REQUIRE(succeeded(rules.parse(""), &error));
    CHECK(rules.empty());
}

TEST_CASE("NNPCCL_ALGO takes a short name that fits one algorithm of the collective", "[config][algo]") {
    AlgoOverride rules;
    std::string error;
    REQUIRE(
        succeeded(rules.parse("broadcast:tree;reduce:dbt;allreduce:hd:0-1K,tree:1K-max;allgather:doubling"), &error));
    CHECK(*rules.pick(Collective::Broadcast, 64) == "double_binary_tree");
    CHECK(*rules.pick(Collective::Reduce, 64) == "double_binary_tree");
    CHECK(*rules.pick(Collective::Allreduce, 64) == "halving_doubling");
    CHECK(*rules.pick(Collective::Allreduce, 4096) == "double_binary_tree");
    CHECK(*rules.pick(Collective::Allgather, 64) == "halving_doubling");
    // A short name of no algorithm serving the collective is still unknown.
    CHECK_FALSE(succeeded(rules.parse("allgather:tree"), &error));
    CHECK_THAT(error, Catch::Contains("unknown algorithm 'tree' at character 11 (allgather has: ring,"));
}

TEST_CASE("a bad NNPCCL_ALGO token is an error naming it and where it is", "[config][algo]") {
    struct Case {
        const char *spec;
        const char *names;
    };
    const Case cases[] = {
        {"allreduce", "'allreduce' at character 1"},
        {"allreduc:ring", "unknown collective 'allreduc' at character 1"},
        {"allreduce:rign", "unknown algorithm 'rign' at character 11"},
        {"broadcast:direct", "algorithm 'direct' at character 11 does not serve broadcast"},
        {"allreduce:ring:8K", "size range '8K' at character 16"},
        {"allreduce:ring:8Q-max", "size range '8Q-max'"},
        {"allreduce:ring:max-8K", "size range 'max-8K'"},
        {"allreduce:ring:8K-8K", "size range '8K-8K' at character 16 is empty"},
        {"allreduce:ring:0-99999999999999999999", "size range"},
        {"allreduce:ring;", "'' at character 16"},
        {"allreduce:ring,,direct", "unknown algorithm '' at character 16"},
    };
    for (const Case &c : cases) {
        INFO(c.spec);
        AlgoOverride rules;
        std::string error;
        REQUIRE(succeeded(rules.parse("allreduce:ring"), &error));
        CHECK_FALSE(succeeded(rules.parse(c.spec), &error));
        CHECK_THAT(error, Catch::Contains(c.names));
        CHECK_THAT(error, Catch::StartsWith("NNPCCL_ALGO: "));
        // A rejected spec leaves the rules in force as they were.
        REQUIRE(rules.pick(Collective::Allreduce, 1) != nullptr);
        CHECK(*rules.pick(Collective::Allreduce, 1) == "ring");
    }
}

TEST_CASE("NNPCCL_SOCKET_IFNAME names interfaces by prefix, exclusion or exact name", "[config][socket]") {
    CHECK(interface_matches("eth", "eth0"));
    CHECK(interface_matches("ib,eth", "eth1"));
    CHECK_FALSE(interface_matches("eth", "veth3"));
    CHECK_FALSE(interface_matches("^lo", "lo"));
    CHECK(interface_matches("^lo,docker", "eth0"));
    CHECK_FALSE(interface_matches("^lo,docker", "docker0"));
    CHECK(interface_matches("=eth0", "eth0"));
    CHECK_FALSE(interface_matches("=eth0", "eth0.5"));
    CHECK_FALSE(interface_matches("", "eth0"));
}

namespace {

// A rendezvous in a directory of the test's own, as read_launch_env would key it.
struct TestRendezvous {
    char dir[40] = "/tmp/nnpccl-test-rendezvous-XXXXXX";
    LaunchEnv rank0, rank1;
    TestRendezvous() {
        REQUIRE(mkdtemp(dir) != nullptr);
        rank0.rank = 0;
        rank0.size = 2;
        rank0.rendezvous_file = std::string(dir) + "/job.id";
        rank0.rendezvous_key = 0x5eed;
        rank0.rendezvous_keyed_by = "the test";
        rank1 = rank0;
        rank1.rank = 1;
    }
    ~TestRendezvous() {
        unlink(rank0.rendezvous_file.c_str());
        unlink((rank0.rendezvous_file + ".rank1").c_str());
        rmdir(dir);
    }
};

// Runs `body` in a child that then waits until killed; returns its pid once `body` has run.
template <typename Body> pid_t hold_in_child(Body body) {
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    if (child == 0) {
        const char ok = body() ? '1' : '0';
        (void)!write(ready[1], &ok, 1);
        pause();
        _exit(0);
    }
    char ok = 0;
    REQUIRE(read(ready[0], &ok, 1) == 1);
    close(ready[0]);
    close(ready[1]);
    REQUIRE(ok == '1');
    return child;
}

void end_child(pid_t child) {
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
}

} // namespace

TEST_CASE("a rendezvous file left by a rank 0 that has ended is not taken for this job's", "[config][launcher]") {
    TestRendezvous job;
    nnpccl_unique_id_t dead{}, live{};
    std::memset(dead.internal, 0xd1, sizeof dead.internal);
    std::memset(live.internal, 0x1e, sizeof live.internal);
    // Written by a process that then exits, as a rank 0 killed during init leaves it.
    const pid_t writer = fork();
    if (writer == 0) _exit(publish_unique_id(job.rank0, dead).is_ok() ? 0 : 1);
    int status = 0;
    REQUIRE(waitpid(writer, &status, 0) == writer);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    nnpccl_unique_id_t got{};
    Status st = read_unique_id(job.rank1, Deadline::after_seconds(0.3), &got);
    CHECK(st.code() == NNPCCL_ERR_TIMEOUT);
    CHECK_THAT(st.message(), Catch::Contains("left by pid " + std::to_string(writer)));
    // This job's rank 0 replaces it: that one is taken.
    REQUIRE(publish_unique_id(job.rank0, live).is_ok());
    REQUIRE(read_unique_id(job.rank1, Deadline::after_seconds(5), &got).is_ok());
    CHECK(std::memcmp(&got, &live, sizeof got) == 0);
    // A file of the same name with another job's key is not this job's.
    LaunchEnv stranger = job.rank1;
    stranger.rendezvous_key ^= 1;
    CHECK(read_unique_id(stranger, Deadline::after_seconds(0.2), &got).code() == NNPCCL_ERR_TIMEOUT);
    leave_rendezvous(job.rank0);
    CHECK(access(job.rank0.rendezvous_file.c_str(), F_OK) != 0);
}

TEST_CASE("two jobs that key the same rendezvous fail at once rather than join each other", "[config][launcher]") {
    TestRendezvous job;
    nnpccl_unique_id_t id{};
    SECTION("a second rank 0") {
        const pid_t other = hold_in_child([&] { return publish_unique_id(job.rank0, id).is_ok(); });
        Status st = publish_unique_id(job.rank0, id);
        end_child(other);
        CHECK(st.code() == NNPCCL_ERR_INVALID_USAGE);
        CHECK_THAT(st.message(), Catch::Contains("rank 0's place at the one-host rendezvous"));
        CHECK_THAT(st.message(), Catch::Contains("(pid " + std::to_string(other) + ") of another job"));
        CHECK_THAT(st.message(), Catch::Contains("NNPCCL_JOB_SECRET"));
        // Its holder gone, the place is free again.
        CHECK(publish_unique_id(job.rank0, id).is_ok());
    }
    SECTION("a second rank 1") {
        const pid_t other = hold_in_child([&] { return claim_rendezvous_place(job.rank1).is_ok(); });
        Status st = claim_rendezvous_place(job.rank1);
        // Leaving removes only this process's own place, never the holder's.
        leave_rendezvous(job.rank1);
        CHECK(access((job.rank0.rendezvous_file + ".rank1").c_str(), F_OK) == 0);
        end_child(other);
        CHECK(st.code() == NNPCCL_ERR_INVALID_USAGE);
        CHECK_THAT(st.message(), Catch::Contains("rank 1's place"));
        REQUIRE(claim_rendezvous_place(job.rank1).is_ok());
        leave_rendezvous(job.rank1);
        CHECK(access((job.rank0.rendezvous_file + ".rank1").c_str(), F_OK) != 0);
    }
}

TEST_CASE("the one-host rendezvous is keyed by what a job's ranks share and another job's do not",
          "[config][launcher]") {
    ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "2"), l("LOCAL_WORLD_SIZE", "2");
    unsetenv("MASTER_ADDR");
    LaunchEnv plain;
    // Nothing but the parent process: a sibling job started alike could not be told apart.
    Status st = read_launch_env(&plain);
    CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
    CHECK_THAT(st.message(), Catch::Contains("nothing tells this job from another that process starts alike"));
    CHECK_THAT(st.message(), Catch::Contains("NNPCCL_JOB_SECRET"));
    ScopedEnv run("TORCHELASTIC_RUN_ID", "base");
    REQUIRE(read_launch_env(&plain).is_ok());
    REQUIRE_THAT(plain.rendezvous_file, Catch::Contains("/nnpccl-"));
    auto file_with = [](const char *var, const char *value) {
        ScopedEnv e(var, value);
        LaunchEnv env;
        REQUIRE(read_launch_env(&env).is_ok());
        return env.rendezvous_file;
    };
    const std::string secret_a = file_with("NNPCCL_JOB_SECRET", "000102030405060708090a0b0c0d0e0f");
    CHECK(secret_a != plain.rendezvous_file);
    CHECK(secret_a != file_with("NNPCCL_JOB_SECRET", "000102030405060708090a0b0c0d0e0e"));
    CHECK(secret_a == file_with("NNPCCL_JOB_SECRET", "000102030405060708090A0B0C0D0E0F"));
    CHECK(file_with("TORCHELASTIC_RUN_ID", "a") != file_with("TORCHELASTIC_RUN_ID", "b"));
    CHECK(file_with("SLURM_STEP_ID", "0") != file_with("SLURM_STEP_ID", "1"));
    CHECK(file_with("TORCHELASTIC_RUN_ID", "base") == plain.rendezvous_file);
    CHECK(file_with("MASTER_PORT", "29500") != file_with("MASTER_PORT", "29501"));
    // A job of another size has another rendezvous.
    ScopedEnv w3("WORLD_SIZE", "3"), l3("LOCAL_WORLD_SIZE", "3"), same_run("TORCHELASTIC_RUN_ID", "base");
    LaunchEnv bigger;
    REQUIRE(read_launch_env(&bigger).is_ok());
    CHECK(bigger.rendezvous_file != plain.rendezvous_file);
    // The name does not show the secret.
    CHECK(secret_a.find("000102") == std::string::npos);
}

TEST_CASE("NNPCCL_JOB_SECRET is exactly 32 hex digits", "[config][launcher]") {
    JobSecret secret{};
    REQUIRE(parse_job_secret("00112233445566778899aabbccddEEFF", &secret).is_ok());
    CHECK(secret[0] == 0x00);
    CHECK(secret[1] == 0x11);
    CHECK(secret[15] == 0xff);
    std::string plus, space;
    for (int i = 0; i < 16; ++i) {
        plus += "+f";
        space += " f";
    }
    for (const std::string &bad : {plus, space, std::string(31, 'a'), std::string(33, 'a'), std::string(32, 'g'),
                                   std::string("0x") + std::string(30, 'a'), std::string(31, 'a') + "-"}) {
        INFO(bad);
        Status st = parse_job_secret(bad, &secret);
        CHECK(st.code() == NNPCCL_ERR_INVALID_ARGUMENT);
        CHECK_THAT(st.message(), Catch::StartsWith("NNPCCL_JOB_SECRET must be exactly 32 hex digits"));
    }
    // Refused by init from the environment whichever way the ranks meet.
    ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "2"), s("NNPCCL_JOB_SECRET", plus.c_str());
    LaunchEnv env;
    {
        ScopedEnv root("NNPCCL_ROOT", "127.0.0.1:4000");
        CHECK_THAT(read_launch_env(&env).message(), Catch::Contains("NNPCCL_JOB_SECRET"));
    }
    ScopedEnv l("LOCAL_WORLD_SIZE", "2");
    unsetenv("MASTER_ADDR");
    CHECK_THAT(read_launch_env(&env).message(), Catch::Contains("NNPCCL_JOB_SECRET"));
}
