// What the 2D torus's two builders share (torus2d.cpp: allreduce, the cost
// and the entry; torus2d_blocks.cpp: reduce-scatter and allgather): the
// rank grid as a channel sees it and the block-wise phases' entry point.
#pragma once

#include <cstddef>
#include <vector>

#include "builders.hpp"
#include "schedule.hpp"

namespace nnpccl {

inline int wrap(int a, int p) { return ((a % p) + p) % p; }

// Ranks on a grid whose rows run along the channel's first dimension:
// rank_at[i + j·width] is at (i, j).
struct ChannelGrid {
    int width = 0;  // the first dimension: a row's length
    int height = 0; // the second: a column's length
    std::vector<int> rank_at;

    ChannelGrid transposed() const {
        ChannelGrid t{height, width, std::vector<int>(rank_at.size())};
        for (int j = 0; j < height; ++j)
            for (int i = 0; i < width; ++i) t.rank_at[static_cast<size_t>(j + i * height)] = at(i, j);
        return t;
    }
    int at(int i, int j) const { return rank_at[static_cast<size_t>(i + j * width)]; }
    // The ring through row j (or column i), in increasing order or, when
    // reversed, decreasing: the other direction of the same links.
    std::vector<int> row(int j, bool reversed) const {
        std::vector<int> ring;
        for (int k = 0; k < width; ++k) ring.push_back(at(reversed ? width - 1 - k : k, j));
        return ring;
    }
    std::vector<int> column(int i, bool reversed) const {
        std::vector<int> ring;
        for (int k = 0; k < height; ++k) ring.push_back(at(i, reversed ? height - 1 - k : k));
        return ring;
    }
};

// Whether a slice of `slice` elements of each block travels its first
// dimension packed (torus2d_blocks.cpp); the cost model counts its
// messages alike.
bool torus2d_packs(size_t slice, int b, size_t chunk);

// Reduce-scatter or allgather (args.collective) of one channel's elements
// of every block on `grid`, in messages of at most `chunk` elements.
void blocks_on_grid(const ChannelGrid &grid, const CollectiveArgs &args, const Torus2dChannel &channel, size_t chunk,
                    std::vector<Step> &out);

} // namespace nnpccl
