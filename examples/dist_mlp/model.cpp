#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

void init(Params *p, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const float r0 = std::sqrt(6.0f / (kInputs + kHidden)), r1 = std::sqrt(6.0f / (kHidden + kClasses));
    std::uniform_real_distribution<float> a0(-r0, r0), a1(-r1, r1);
    for (float &w : p->w0) w = a0(rng);
    for (float &w : p->w1) w = a1(rng);
    std::fill(p->b0.begin(), p->b0.end(), 0.0f);
    std::fill(p->b1.begin(), p->b1.end(), 0.0f);
}

double forward(const Params &p, const float *x, const uint8_t *y, int n, std::vector<float> *h,
               std::vector<float> *prob) {
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

double gradients(const Params &p, Params *g, const float *x, const uint8_t *y, int n, float scale,
                 const std::function<void(int part)> &layer_done) {
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
    layer_done(2);
    layer_done(3);
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
    layer_done(0);
    layer_done(1);
    return loss;
}

void sgd_update(Params *p, const Params &g, float lr) {
    for (int part = 0; part < kParts; ++part)
        for (size_t i = 0; i < p->part(part).size(); ++i) p->part(part)[i] -= lr * g.part(part)[i];
}

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
