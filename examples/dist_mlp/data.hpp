// The training data of dist_mlp: Fashion-MNIST from its IDX files, or a
// seeded synthetic stand-in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

constexpr int kInputs = 784, kHidden = 600, kClasses = 10;

struct Dataset {
    std::vector<float> images; // size() x 784, in [0, 1]
    std::vector<uint8_t> labels;
    size_t size() const { return labels.size(); }
};

// One IDX pair (gzipped images idx3, labels idx1); false, with a message in
// `why`, when it is missing or malformed.
bool read_idx(const std::string &images, const std::string &labels, Dataset *out, std::string *why);

// Ten classes, each a fixed random prototype plus noise: learnable, and the
// same on every rank for a seed.
Dataset synthetic(size_t n, uint64_t seed);
