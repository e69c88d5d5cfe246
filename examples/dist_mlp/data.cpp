#include "data.hpp"

#include <zlib.h>

#include <algorithm>
#include <random>

namespace {

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

uint32_t be32(const uint8_t *p) {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

} // namespace

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
