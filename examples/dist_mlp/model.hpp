// The 784-600-10 perceptron of dist_mlp (ReLU, softmax cross-entropy), its
// forward and backward passes written plainly, and SGD.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data.hpp"

// The parameters, or their gradients: W0 (600x784), b0, W1 (10x600), b1,
// one contiguous vector per part so that each is one allreduce.
struct Params {
    std::vector<float> w0, b0, w1, b1;
    Params() : w0(size_t(kHidden) * kInputs), b0(kHidden), w1(size_t(kClasses) * kHidden), b1(kClasses) {}
    std::vector<float> &part(int k) { return k == 0 ? w0 : k == 1 ? b0 : k == 2 ? w1 : b1; }
    const std::vector<float> &part(int k) const { return k == 0 ? w0 : k == 1 ? b0 : k == 2 ? w1 : b1; }
};
constexpr int kParts = 4;

// Glorot-uniform weights, zero biases, from `seed`.
void init(Params *p, uint64_t seed);

// Forward pass of `n` images: the hidden activations and the class
// probabilities; returns the summed cross-entropy when labels are given.
double forward(const Params &p, const float *x, const uint8_t *y, int n, std::vector<float> *h,
               std::vector<float> *prob);

// Gradients of the loss summed over `n` images and divided by `scale` (the
// global batch) into `g`; `layer_done(part)` is called for each part as soon
// as its gradient is final (W1 and b1 first, then W0 and b0), so that its sum
// over the ranks can overlap the rest of the backward pass. Returns the
// summed loss.
double gradients(const Params &p, Params *g, const float *x, const uint8_t *y, int n, float scale,
                 const std::function<void(int part)> &layer_done);

void sgd_update(Params *p, const Params &g, float lr);

// bfloat16 by rounding to nearest even (NaN stays NaN), and back.
uint16_t to_bf16(float f);
float from_bf16(uint16_t b);
