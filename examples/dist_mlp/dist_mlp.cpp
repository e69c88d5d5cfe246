// dist_mlp: data-parallel synchronous SGD over nnpccl, the workload of
// nGraph's dist_mnist_mlp. A 784-600-10 perceptron (ReLU, softmax
// cross-entropy) is replicated on every rank; each rank trains on its shard
// of every global batch, and after back-propagation the gradients of the
// replicas are summed by allreduce, so every replica applies the same
// update. The allreduce of a layer's gradients starts as soon as they are
// computed (nonblocking), overlapping the backward pass of the layer below.
//
//   dist_mlp --np 4                          # 4 local ranks, forked here
//   torchrun --nproc_per_node 4 dist_mlp     # or mpirun -np 4 dist_mlp: nnpccl_comm_init_from_env
//   dist_mlp --np 2 --dtype bfloat16 --check --steps 200
//   mpirun -np 4 dist_mlp --backend mpi      # the same training over MPI_Iallreduce
//
// Data: Fashion-MNIST in MNIST's IDX format from Debian's
// dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), else a seeded
// synthetic set, said so on stderr. Uses nothing but nnpccl.h (linked
// through pkg-config), zlib, CLI11 and, for --backend mpi, MPI.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backend.hpp"
#include "data.hpp"
#include "model.hpp"

namespace {

struct Options {
    int np = 0;
    int epochs = 2;
    int batch = 32; // per rank
    float lr = 0.05f;
    uint64_t seed = 1;
    long steps = -1; // stop after this many steps (-1: the epochs)
    std::string dtype = "float32";
    std::string backend = "nnpccl";
    std::string data = "/usr/share/datasets/fashion-mnist";
    bool synthetic = false;
    bool check = false;
};

struct Trainer {
    const Options &o;
    Backend &net;
    int rank, nranks;
    Params params, grads;
    std::vector<std::vector<uint16_t>> bf16; // per part, for --dtype bfloat16

    bool bfloat16() const { return o.dtype == "bfloat16"; }

    // Starts the sum of a gradient part over the ranks.
    void start_allreduce(int part) {
        std::vector<float> &g = grads.part(part);
        if (bfloat16()) {
            std::vector<uint16_t> &b = bf16[size_t(part)];
            b.resize(g.size());
            for (size_t i = 0; i < g.size(); ++i) b[i] = to_bf16(g[i]);
            net.start_sum(b.data(), b.size(), Dtype::bfloat16);
        } else {
            net.start_sum(g.data(), g.size(), Dtype::float32);
        }
    }

    void finish_allreduces() {
        net.wait_all();
        if (bfloat16())
            for (int part = 0; part < kParts; ++part)
                for (size_t i = 0; i < grads.part(part).size(); ++i)
                    grads.part(part)[i] = from_bf16(bf16[size_t(part)][i]);
    }

    double sum_over_ranks(double v) {
        net.sum(&v, 1, Dtype::float64);
        return v;
    }

    // A hash of every parameter's bits, the same on every rank or not.
    bool replicas_identical() {
        uint64_t h = 1469598103934665603ull;
        for (int part = 0; part < kParts; ++part)
            for (float v : params.part(part)) {
                uint32_t bits;
                std::memcpy(&bits, &v, 4);
                h = (h ^ bits) * 1099511628211ull;
            }
        std::vector<uint64_t> all(static_cast<size_t>(nranks));
        net.allgather(h, all.data());
        return std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == all[0]; });
    }

    double accuracy(const Dataset &test) {
        std::vector<float> h, prob;
        double right = 0;
        const size_t begin = test.size() * size_t(rank) / size_t(nranks);
        const size_t end = test.size() * size_t(rank + 1) / size_t(nranks);
        for (size_t i = begin; i < end; i += 256) {
            const int n = int(std::min<size_t>(256, end - i));
            forward(params, test.images.data() + i * kInputs, nullptr, n, &h, &prob);
            for (int k = 0; k < n; ++k) {
                const float *pk = prob.data() + size_t(k) * kClasses;
                right += (std::max_element(pk, pk + kClasses) - pk) == test.labels[i + size_t(k)];
            }
        }
        return sum_over_ranks(right) / double(test.size());
    }

    int run(const Dataset &train, const Dataset &test) {
        init(&params, o.seed);
        bf16.resize(kParts);
        Params serial = params, serial_grads; // --check: one process on the global batch
        const size_t global = size_t(o.batch) * size_t(nranks);
        const size_t steps_per_epoch = train.size() / global;
        std::mt19937_64 shuffle(o.seed + 1);
        std::vector<uint32_t> order(train.size());
        std::vector<float> x(global * kInputs);
        std::vector<uint8_t> y(global);
        long step = 0;
        int status = 0;
        double worst_diff = 0;
        std::vector<double> serial_losses; // --check: the global batch's loss after each step, rank 0
        if (rank == 0)
            std::printf("# dist_mlp: %d ranks over %s, batch %d per rank (%zu global), lr %g, %s gradients\n"
                        "# epoch    steps      loss   test acc    images/s   step ms   allreduce wait ms\n",
                        nranks, o.backend.c_str(), o.batch, global, double(o.lr), o.dtype.c_str());
        for (int epoch = 1; epoch <= o.epochs && (o.steps < 0 || step < o.steps); ++epoch) {
            for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
            std::shuffle(order.begin(), order.end(), shuffle);
            double loss = 0, waited = 0;
            size_t seen = 0, steps = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (size_t s = 0; s < steps_per_epoch && (o.steps < 0 || step < o.steps); ++s, ++step, ++steps) {
                for (size_t k = 0; k < global; ++k) {
                    const uint32_t idx = order[s * global + k];
                    std::memcpy(&x[k * kInputs], &train.images[size_t(idx) * kInputs], kInputs * sizeof(float));
                    y[k] = train.labels[idx];
                }
                const size_t mine = size_t(rank) * size_t(o.batch);
                loss += gradients(params, &grads, &x[mine * kInputs], &y[mine], o.batch, float(global),
                                  [this](int part) { start_allreduce(part); });
                const auto w0 = std::chrono::steady_clock::now();
                finish_allreduces();
                waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
                sgd_update(&params, grads, o.lr);
                seen += global;
                if (o.check && !replicas_identical()) {
                    if (rank == 0) std::fprintf(stderr, "dist_mlp: step %ld: the replicas' parameters differ\n", step);
                    status = 1;
                }
                if (o.check && rank == 0) {
                    serial_losses.push_back(
                        gradients(serial, &serial_grads, x.data(), y.data(), int(global), float(global), [](int) {}) /
                        double(global));
                    sgd_update(&serial, serial_grads, o.lr);
                    for (int part = 0; part < kParts; ++part)
                        for (size_t i = 0; i < params.part(part).size(); ++i)
                            worst_diff = std::max(worst_diff,
                                                  double(std::fabs(params.part(part)[i] - serial.part(part)[i])));
                }
            }
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            loss = sum_over_ranks(loss) / double(std::max<size_t>(seen, 1));
            const double acc = accuracy(test);
            const double per_step = 1e3 / double(std::max<size_t>(steps, 1));
            if (rank == 0)
                std::printf("%7d  %7zu  %8.4f  %8.2f%%  %10.0f  %8.3f  %18.3f\n", epoch, steps, loss, 100 * acc,
                            double(seen) / seconds, seconds * per_step, waited * per_step);
        }
        if (o.check && rank == 0) {
            const double tolerance = bfloat16() ? 1e-2 : 1e-4;
            std::printf("# check: replicas bit-identical after every step: %s; largest difference from one process "
                        "on the global batch: %.3g (tolerance %g)\n",
                        status == 0 ? "yes" : "NO", worst_diff, tolerance);
            if (!(worst_diff <= tolerance)) status = 1;
            // The loss falls: the last tenth of the steps against the first.
            const size_t tenth = std::max<size_t>(1, serial_losses.size() / 10);
            double first = 0, last = 0;
            for (size_t i = 0; i < tenth; ++i) {
                first += serial_losses[i] / double(tenth);
                last += serial_losses[serial_losses.size() - 1 - i] / double(tenth);
            }
            std::printf("# check: mean loss of the first %zu steps %.4f, of the last %zu %.4f\n", tenth, first, tenth,
                        last);
            if (!(last < first)) status = 1;
        }
        std::fflush(stdout);
        return status;
    }
};

int train(const Options &o, std::unique_ptr<Backend> net) {
    if (!net) return 1;
    const int rank = net->rank(), nranks = net->size();
    Dataset train_set, test_set;
    std::string why;
    if (o.synthetic || !read_idx(o.data + "/train-images-idx3-ubyte.gz", o.data + "/train-labels-idx1-ubyte.gz",
                                 &train_set, &why) ||
        !read_idx(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz", &test_set, &why)) {
        if (rank == 0 && !o.synthetic)
            std::fprintf(stderr, "dist_mlp: %s (apt-get install dataset-fashion-mnist); training on a synthetic set\n",
                         why.c_str());
        train_set = synthetic(12000, o.seed + 2);
        test_set = synthetic(2000, o.seed + 3);
    }
    Trainer t{o, *net, rank, nranks, {}, {}, {}};
    const int status = t.run(train_set, test_set);
    return net->finish() ? status : 1;
}

// --np N: N ranks forked here, meeting as torchrun's would on one host
// (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; nnpccl_comm_init_from_env makes the
// rendezvous file).
int fork_ranks(const Options &o) {
    std::vector<pid_t> children;
    const std::string job = std::to_string(getpid()) + "-" +
                            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int r = 0; r < o.np; ++r) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::perror("dist_mlp: fork");
            return 1;
        }
        if (pid == 0) {
            setenv("RANK", std::to_string(r).c_str(), 1);
            setenv("WORLD_SIZE", std::to_string(o.np).c_str(), 1);
            setenv("LOCAL_WORLD_SIZE", std::to_string(o.np).c_str(), 1);
            setenv("TORCHELASTIC_RUN_ID", job.c_str(), 1);
            unsetenv("MASTER_ADDR");
            std::fflush(stdout);
            _exit(train(o, nnpccl_backend()));
        }
        children.push_back(pid);
    }
    int status = 0;
    for (pid_t pid : children) {
        int st = 0;
        waitpid(pid, &st, 0);
        if (status == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) status = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    return status;
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    CLI::App app("dist_mlp: data-parallel training of a 784-600-10 MLP over nnpccl");
    app.add_option("--np", o.np, "ranks to fork on this host (0: take rank and size from the launcher)")
        ->check(CLI::Range(0, 256));
    app.add_option("--epochs", o.epochs, "passes over the training set")->check(CLI::Range(1, 1000));
    app.add_option("--batch", o.batch, "images per rank per step")->check(CLI::Range(1, 1 << 16));
    app.add_option("--lr", o.lr, "learning rate")->check(CLI::PositiveNumber);
    app.add_option("--seed", o.seed, "seed of the weights and the shuffle");
    app.add_option("--steps", o.steps, "stop after this many steps");
    app.add_option("--dtype", o.dtype, "datatype the gradients are summed in")
        ->check(CLI::IsMember({"float32", "bfloat16"}));
    app.add_option("--backend", o.backend, "library the gradients are summed by (mpi: under mpirun)")
        ->check(CLI::IsMember({"nnpccl", "mpi"}));
    app.add_option("--data", o.data, "directory of the Fashion-MNIST IDX files");
    app.add_flag("--synthetic", o.synthetic, "train on the seeded synthetic set");
    app.add_flag("--check", o.check,
                 "after every step, check the replicas are bit-identical and match one process on the global batch");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    if (o.backend == "mpi") {
#ifdef DIST_MLP_WITH_MPI
        if (o.np > 0) {
            std::fprintf(stderr, "dist_mlp: --backend mpi runs under mpirun -np N, not --np\n");
            return 2;
        }
        return train(o, mpi_backend(&argc, &argv));
#else
        std::fprintf(stderr, "dist_mlp: built without MPI (install libopenmpi-dev and rebuild for --backend mpi)\n");
        return 2;
#endif
    }
    if (o.np > 0) return fork_ranks(o);
    return train(o, nnpccl_backend());
}
