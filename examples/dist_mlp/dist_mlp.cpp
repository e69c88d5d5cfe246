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
//
// Data: Fashion-MNIST in MNIST's IDX format from Debian's
// dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), else a seeded
// synthetic set, said so on stderr. Uses nothing but nnpccl.h (linked
// through pkg-config), zlib and CLI11.
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

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

#include "nnpccl.h"

namespace {

constexpr int kInputs = 784, kHidden = 600, kClasses = 10;

struct Options {
    int np = 0;
    int epochs = 2;
    int batch = 32; // per rank
    float lr = 0.05f;
    uint64_t seed = 1;
    long steps = -1; // stop after this many steps (-1: the epochs)
    std::string dtype = "float32";
    std::string data = "/usr/share/datasets/fashion-mnist";
    bool synthetic = false;
    bool check = false;
};

struct Dataset {
    std::vector<float> images; // n x 784, in [0, 1]
    std::vector<uint8_t> labels;
    size_t size() const { return labels.size(); }
};

bool read_gz(const std::string &path, std::vector<uint8_t> *out) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    uint8_t buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) out->insert(out->end(), buf, buf + n);
    const bool ok = n == 0;
    gzclose(f);
    return ok;
}

uint32_t be32(const uint8_t *p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

// One IDX pair (images idx3, labels idx1); false, with a message, when it is
// missing or malformed.
bool read_idx(const std::string &images, const std::string &labels, Dataset *out, std::string *why) {
    std::vector<uint8_t> img, lab;
    if (!read_gz(images, &img) || !read_gz(labels, &lab)) {
        *why = "cannot read " + images + " and " + labels;
        return false;
    }
    if (img.size() < 16 || lab.size() < 8 || be32(img.data()) != 0x803 || be32(lab.data()) != 0x801 ||
        be32(img.data() + 8) != 28 || be32(img.data() + 12) != 28 || be32(img.data() + 4) != be32(lab.data() + 4) ||
        img.size() != 16 + size_t(be32(img.data() + 4)) * kInputs || lab.size() != 8 + size_t(be32(lab.data() + 4))) {
        *why = images + " or " + labels + " is not an MNIST-style IDX file of 28x28 images";
        return false;
    }
    out->labels.assign(lab.begin() + 8, lab.end());
    out->images.resize(out->labels.size() * kInputs);
    for (size_t i = 0; i < out->images.size(); ++i) out->images[i] = img[16 + i] / 255.0f;
    return true;
}

// Ten classes, each a fixed random prototype plus noise: learnable, and the
// same on every rank for a seed.
Dataset synthetic(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(0, 1);
    std::vector<float> prototypes(kClasses * kInputs);
    for (float &v : prototypes) v = u(rng) < 0.3f ? u(rng) : 0;
    Dataset d;
    d.labels.resize(n);
    d.images.resize(n * kInputs);
    for (size_t i = 0; i < n; ++i) {
        const int c = int(rng() % kClasses);
        d.labels[i] = uint8_t(c);
        for (int k = 0; k < kInputs; ++k)
            d.images[i * kInputs + k] = std::clamp(prototypes[c * kInputs + k] + 0.3f * (u(rng) - 0.5f), 0.0f, 1.0f);
    }
    return d;
}

// The parameters, or their gradients: W0 (600x784), b0, W1 (10x600), b1,
// one contiguous vector per layer part so that each is one allreduce.
struct Params {
    std::vector<float> w0, b0, w1, b1;
    Params() : w0(size_t(kHidden) * kInputs), b0(kHidden), w1(size_t(kClasses) * kHidden), b1(kClasses) {}
    std::vector<float> &part(int k) { return k == 0 ? w0 : k == 1 ? b0 : k == 2 ? w1 : b1; }
    const std::vector<float> &part(int k) const { return k == 0 ? w0 : k == 1 ? b0 : k == 2 ? w1 : b1; }
};
constexpr int kParts = 4;

void init(Params *p, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> a0(-std::sqrt(6.0f / (kInputs + kHidden)), std::sqrt(6.0f / (kInputs + kHidden)));
    std::uniform_real_distribution<float> a1(-std::sqrt(6.0f / (kHidden + kClasses)), std::sqrt(6.0f / (kHidden + kClasses)));
    for (float &w : p->w0) w = a0(rng);
    for (float &w : p->w1) w = a1(rng);
    std::fill(p->b0.begin(), p->b0.end(), 0.0f);
    std::fill(p->b1.begin(), p->b1.end(), 0.0f);
}

// Forward pass of `n` images; fills the hidden activations and the class
// probabilities, returns the summed cross-entropy.
double forward(const Params &p, const float *x, const uint8_t *y, int n, std::vector<float> *h, std::vector<float> *prob) {
    h->assign(size_t(n) * kHidden, 0);
    prob->assign(size_t(n) * kClasses, 0);
    // W0 transposed, so that the inner loop runs over the hidden units: it
    // vectorises, each unit's sum still adds its inputs in order, and the
    // many zero pixels are skipped (adding 0 x w changes no sum).
    std::vector<float> w0t(size_t(kInputs) * kHidden);
    for (int j = 0; j < kHidden; ++j)
        for (int k = 0; k < kInputs; ++k) w0t[size_t(k) * kHidden + j] = p.w0[size_t(j) * kInputs + k];
    double loss = 0;
    for (int i = 0; i < n; ++i) {
        const float *xi = x + size_t(i) * kInputs;
        float *hi = h->data() + size_t(i) * kHidden;
        std::copy(p.b0.begin(), p.b0.end(), hi);
        for (int k = 0; k < kInputs; ++k) {
            const float xk = xi[k];
            if (xk == 0) continue;
            const float *w = w0t.data() + size_t(k) * kHidden;
            for (int j = 0; j < kHidden; ++j) hi[j] += w[j] * xk;
        }
        for (int j = 0; j < kHidden; ++j) hi[j] = hi[j] > 0 ? hi[j] : 0;
        float *pi = prob->data() + size_t(i) * kClasses;
        float top = -INFINITY;
        for (int c = 0; c < kClasses; ++c) {
            const float *w = p.w1.data() + size_t(c) * kHidden;
            float s = p.b1[c];
            for (int j = 0; j < kHidden; ++j) s += w[j] * hi[j];
            pi[c] = s;
            top = std::max(top, s);
        }
        float sum = 0;
        for (int c = 0; c < kClasses; ++c) sum += (pi[c] = std::exp(pi[c] - top));
        for (int c = 0; c < kClasses; ++c) pi[c] /= sum;
        if (y != nullptr) loss -= std::log(std::max(pi[y[i]], 1e-30f));
    }
    return loss;
}

// bfloat16 gradients: rounded to nearest even, summed, widened back.
uint16_t to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}
float from_bf16(uint16_t b) {
    const uint32_t x = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

struct Trainer {
    const Options &o;
    nnpccl_comm_t comm;
    int rank, nranks;
    Params params, grads;
    std::vector<std::vector<uint16_t>> bf16; // per part, for --dtype bfloat16
    std::vector<nnpccl_request_t> pending;

    void fail(const char *what, nnpccl_result_t rc) {
        std::fprintf(stderr, "dist_mlp: rank %d: %s failed: %s: %s\n", rank, what, nnpccl_get_error_string(rc),
                     nnpccl_get_last_error(comm));
        nnpccl_comm_abort(comm);
        std::exit(1);
    }

    // Starts the sum of a gradient part over the ranks.
    void start_allreduce(int part) {
        std::vector<float> &g = grads.part(part);
        nnpccl_request_t req = nullptr;
        nnpccl_result_t rc;
        if (o.dtype == "bfloat16") {
            std::vector<uint16_t> &b = bf16[size_t(part)];
            b.resize(g.size());
            for (size_t i = 0; i < g.size(); ++i) b[i] = to_bf16(g[i]);
            rc = nnpccl_iallreduce(b.data(), b.data(), b.size(), NNPCCL_BFLOAT16, NNPCCL_SUM, comm, &req);
        } else {
            rc = nnpccl_iallreduce(g.data(), g.data(), g.size(), NNPCCL_FLOAT32, NNPCCL_SUM, comm, &req);
        }
        if (rc != NNPCCL_SUCCESS) fail("iallreduce", rc);
        pending.push_back(req);
    }

    void finish_allreduces() {
        for (nnpccl_request_t req : pending)
            if (nnpccl_result_t rc = nnpccl_wait(req); rc != NNPCCL_SUCCESS) fail("wait", rc);
        pending.clear();
        if (o.dtype == "bfloat16")
            for (int part = 0; part < kParts; ++part)
                for (size_t i = 0; i < grads.part(part).size(); ++i)
                    grads.part(part)[i] = from_bf16(bf16[size_t(part)][i]);
    }

    // Gradients of the loss summed over `n` images, divided by `scale` (the
    // global batch), overlapping each layer's allreduce with the layer below
    // when `reduce`. Returns the summed loss.
    double step_gradients(const Params &p, Params *g, const float *x, const uint8_t *y, int n, float scale,
                          bool reduce) {
        std::vector<float> h, prob;
        const double loss = forward(p, x, y, n, &h, &prob);
        for (int part = 0; part < kParts; ++part) std::fill(g->part(part).begin(), g->part(part).end(), 0.0f);
        std::vector<float> dz(size_t(n) * kClasses);
        for (int i = 0; i < n; ++i)
            for (int c = 0; c < kClasses; ++c)
                dz[size_t(i) * kClasses + c] = (prob[size_t(i) * kClasses + c] - (y[i] == c ? 1.0f : 0.0f)) / scale;
        for (int i = 0; i < n; ++i)
            for (int c = 0; c < kClasses; ++c) {
                const float d = dz[size_t(i) * kClasses + c];
                float *w = g->w1.data() + size_t(c) * kHidden;
                const float *hi = h.data() + size_t(i) * kHidden;
                for (int j = 0; j < kHidden; ++j) w[j] += d * hi[j];
                g->b1[c] += d;
            }
        if (reduce) {
            start_allreduce(2);
            start_allreduce(3);
        }
        std::vector<float> dh(kHidden);
        for (int i = 0; i < n; ++i) {
            const float *hi = h.data() + size_t(i) * kHidden;
            std::fill(dh.begin(), dh.end(), 0.0f);
            for (int c = 0; c < kClasses; ++c) {
                const float d = dz[size_t(i) * kClasses + c];
                const float *w = p.w1.data() + size_t(c) * kHidden;
                for (int j = 0; j < kHidden; ++j) dh[j] += d * w[j];
            }
            const float *xi = x + size_t(i) * kInputs;
            for (int j = 0; j < kHidden; ++j) {
                if (hi[j] <= 0) continue;
                float *w = g->w0.data() + size_t(j) * kInputs;
                for (int k = 0; k < kInputs; ++k) w[k] += dh[j] * xi[k];
                g->b0[j] += dh[j];
            }
        }
        if (reduce) {
            start_allreduce(0);
            start_allreduce(1);
        }
        return loss;
    }

    static void apply(Params *p, const Params &g, float lr) {
        for (int part = 0; part < kParts; ++part)
            for (size_t i = 0; i < p->part(part).size(); ++i) p->part(part)[i] -= lr * g.part(part)[i];
    }

    double sum_over_ranks(double v) {
        if (nnpccl_result_t rc = nnpccl_allreduce(&v, &v, 1, NNPCCL_FLOAT64, NNPCCL_SUM, comm); rc != NNPCCL_SUCCESS)
            fail("allreduce", rc);
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
        if (nnpccl_result_t rc = nnpccl_allgather(&h, all.data(), 1, NNPCCL_UINT64, comm); rc != NNPCCL_SUCCESS)
            fail("allgather", rc);
        return std::all_of(all.begin(), all.end(), [&](uint64_t x) { return x == all[0]; });
    }

    double accuracy(const Dataset &test) {
        std::vector<float> h, prob;
        double right = 0;
        const size_t begin = test.size() * size_t(rank) / size_t(nranks), end = test.size() * size_t(rank + 1) / size_t(nranks);
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
            std::printf("# dist_mlp: %d ranks, batch %d per rank (%zu global), lr %g, %s gradients\n"
                        "# epoch      loss   test acc    images/s   allreduce s\n",
                        nranks, o.batch, global, double(o.lr), o.dtype.c_str());
        for (int epoch = 1; epoch <= o.epochs && (o.steps < 0 || step < o.steps); ++epoch) {
            for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
            std::shuffle(order.begin(), order.end(), shuffle);
            double loss = 0, waited = 0;
            size_t seen = 0;
            const auto t0 = std::chrono::steady_clock::now();
            for (size_t s = 0; s < steps_per_epoch && (o.steps < 0 || step < o.steps); ++s, ++step) {
                for (size_t k = 0; k < global; ++k) {
                    const uint32_t idx = order[s * global + k];
                    std::memcpy(&x[k * kInputs], &train.images[size_t(idx) * kInputs], kInputs * sizeof(float));
                    y[k] = train.labels[idx];
                }
                const size_t mine = size_t(rank) * size_t(o.batch);
                loss += step_gradients(params, &grads, &x[mine * kInputs], &y[mine], o.batch, float(global), true);
                const auto w0 = std::chrono::steady_clock::now();
                finish_allreduces();
                waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
                apply(&params, grads, o.lr);
                seen += global;
                if (o.check && !replicas_identical()) {
                    if (rank == 0) std::fprintf(stderr, "dist_mlp: step %ld: the replicas' parameters differ\n", step);
                    status = 1;
                }
                if (o.check && rank == 0) {
                    serial_losses.push_back(
                        step_gradients(serial, &serial_grads, x.data(), y.data(), int(global), float(global), false) /
                        double(global));
                    apply(&serial, serial_grads, o.lr);
                    for (int part = 0; part < kParts; ++part)
                        for (size_t i = 0; i < params.part(part).size(); ++i)
                            worst_diff = std::max(worst_diff,
                                                  double(std::fabs(params.part(part)[i] - serial.part(part)[i])));
                }
            }
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            loss = sum_over_ranks(loss) / double(std::max<size_t>(seen, 1));
            const double acc = accuracy(test);
            if (rank == 0)
                std::printf("%7d  %8.4f  %8.2f%%  %10.0f  %12.3f\n", epoch, loss, 100 * acc, double(seen) / seconds,
                            waited);
        }
        if (o.check && rank == 0) {
            const double tolerance = o.dtype == "bfloat16" ? 1e-2 : 1e-4;
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

int train(const Options &o, nnpccl_comm_t comm) {
    int rank = 0, nranks = 1;
    nnpccl_comm_rank(comm, &rank);
    nnpccl_comm_size(comm, &nranks);
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
    Trainer t{o, comm, rank, nranks, {}, {}, {}, {}};
    const int status = t.run(train_set, test_set);
    if (nnpccl_result_t rc = nnpccl_comm_destroy(comm); rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "dist_mlp: destroy failed: %s\n", nnpccl_get_last_error(nullptr));
        return 1;
    }
    return status;
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
            nnpccl_comm_t comm = nullptr;
            if (nnpccl_result_t rc = nnpccl_comm_init_from_env(&comm, nullptr); rc != NNPCCL_SUCCESS) {
                std::fprintf(stderr, "dist_mlp: rank %d: init failed: %s\n", r, nnpccl_get_last_error(nullptr));
                _exit(1);
            }
            _exit(train(o, comm));
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
    app.add_option("--data", o.data, "directory of the Fashion-MNIST IDX files");
    app.add_flag("--synthetic", o.synthetic, "train on the seeded synthetic set");
    app.add_flag("--check", o.check,
                 "after every step, check the replicas are bit-identical and match one process on the global batch");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    if (o.np > 0) return fork_ranks(o);
    nnpccl_comm_t comm = nullptr;
    if (nnpccl_result_t rc = nnpccl_comm_init_from_env(&comm, nullptr); rc != NNPCCL_SUCCESS) {
        std::fprintf(stderr, "dist_mlp: init failed: %s (use --np N, or a launcher)\n", nnpccl_get_last_error(nullptr));
        return 1;
    }
    return train(o, comm);
}
