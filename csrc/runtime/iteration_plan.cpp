#include "runtime/iteration_plan.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "codegen/cuda_printer.h"

namespace fuser::runtime {
namespace {

// Dimension order, outermost first: by decreasing stride of the lead output (stable, so
// equal strides keep their order), or row-major.
std::vector<int> chooseOrder(c10::IntArrayRef lead_strides, size_t rank) {
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  if (lead_strides.size() != rank) return order;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return lead_strides[a] > lead_strides[b]; });
  return order;
}

}  // namespace

std::vector<int64_t> broadcastShape(c10::ArrayRef<TensorView> tensors) {
  size_t rank = 0;
  for (const TensorView& t : tensors) rank = std::max(rank, static_cast<size_t>(t.dim()));
  std::vector<int64_t> shape(rank, 1);
  for (const TensorView& t : tensors) {
    const auto& sizes = t.sizes;
    const size_t offset = rank - sizes.size();
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t& s = shape[offset + d];
      const int64_t in = sizes[d];
      if (s == 1) {
        s = in;
      } else {
        TORCH_CHECK(in == 1 || in == s, "The size of tensor a (", s,
                    ") must match the size of tensor b (", in, ") at non-singleton dimension ",
                    offset + d);
      }
    }
  }
  return shape;
}

IterationPlan planIteration(c10::ArrayRef<TensorView> tensors, c10::IntArrayRef lead_strides) {
  IterationPlan plan;
  plan.out_sizes = broadcastShape(tensors);
  const int rank = static_cast<int>(plan.out_sizes.size());
  plan.numel = 1;
  for (int64_t s : plan.out_sizes) plan.numel *= s;

  const std::vector<int> order = chooseOrder(lead_strides, plan.out_sizes.size());

  // Iteration sizes and per-input strides in output order; broadcast dims stride 0.
  const size_t nin = tensors.size();
  c10::SmallVector<int64_t, 8> sizes;
  c10::SmallVector<int64_t, 32> strides;  // [input][dim]
  for (int i = 0; i < rank; ++i) sizes.push_back(plan.out_sizes[order[i]]);
  for (const TensorView& t : tensors) {
    const int offset = rank - static_cast<int>(t.dim());
    for (int i = 0; i < rank; ++i) {
      const int d = order[i] - offset;
      strides.push_back(d < 0 || t.sizes[d] == 1 ? 0 : t.strides[d]);
    }
  }
  if (rank == 0) {
    sizes.push_back(1);
    for (size_t k = 0; k < nin; ++k) strides.push_back(0);
  }

  // Collapse dims: drop size-1 dims, and merge an outer dim into its inner neighbour
  // when every input steps through both as one.
  const int full = static_cast<int>(sizes.size());
  c10::SmallVector<int, 8> keep;  // dims kept, each possibly absorbing outer ones
  c10::SmallVector<int64_t, 8> csizes;
  c10::SmallVector<int64_t, 32> cstrides;
  for (int d = full - 1; d >= 0; --d) {
    if (sizes[d] == 1 && !(d == 0 && csizes.empty())) continue;
    if (!csizes.empty()) {
      const int inner = static_cast<int>(csizes.size()) - 1;
      bool mergeable = true;
      for (size_t k = 0; k < nin && mergeable; ++k) {
        mergeable = strides[k * full + d] == cstrides[k * 8 + inner] * csizes[inner];
      }
      if (mergeable) {
        csizes[inner] *= sizes[d];
        continue;
      }
    }
    TORCH_CHECK(csizes.size() < 8, "fuser: more than 8 non-collapsible dimensions");
    csizes.push_back(sizes[d]);
    if (cstrides.size() < nin * 8) cstrides.resize(nin * 8, 0);
    for (size_t k = 0; k < nin; ++k) cstrides[k * 8 + csizes.size() - 1] = strides[k * full + d];
  }
  // csizes is innermost first; store outermost first.
  plan.ndim = static_cast<int>(csizes.size());
  plan.sizes.assign(csizes.rbegin(), csizes.rend());
  plan.strides.resize(nin * plan.ndim);
  for (size_t k = 0; k < nin; ++k) {
    for (int i = 0; i < plan.ndim; ++i) {
      plan.strides[k * plan.ndim + i] = cstrides[k * 8 + (plan.ndim - 1 - i)];
    }
  }

  // Access class per input, and whether 32-bit offsets suffice.
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  plan.index32 = plan.numel <= kMax32;
  plan.flat = true;
  for (size_t k = 0; k < nin; ++k) {
    codegen::TensorInput in{tensors[k].dtype, codegen::Access::Strided};
    const int64_t* st = plan.strides.data() + k * plan.ndim;
    bool dense = true;
    int64_t expected = 1, extent = 0;
    for (int i = plan.ndim - 1; i >= 0; --i) {
      dense = dense && st[i] == expected;
      expected *= plan.sizes[i];
      extent += (plan.sizes[i] - 1) * (st[i] < 0 ? -st[i] : st[i]);
    }
    if (tensors[k].numel() == 1) {
      in.access = codegen::Access::Broadcast1;
    } else if (dense) {
      in.access = codegen::Access::Flat;
    } else {
      in.inner_unit_stride = st[plan.ndim - 1] == 1;
      in.inner_zero_stride = st[plan.ndim - 1] == 0;
      plan.flat = false;
    }
    plan.index32 = plan.index32 && extent <= kMax32;
    plan.inputs.push_back(in);
  }
  return plan;
}

void chooseTransposeTiles(IterationPlan& plan, size_t count, int side) {
  // Shorter dims fill too little of a tile to repay staging it; their reads also share
  // cache lines already.
  constexpr int64_t kMinTileDim = 32;
  const int n = plan.ndim;
  if (plan.flat || n < 2 || plan.sizes[n - 2] < kMinTileDim || plan.sizes[n - 1] < kMinTileDim) {
    return;
  }
  c10::SmallVector<size_t, 8> transposed;
  for (size_t k = 0; k < count; ++k) {
    codegen::TensorInput& in = plan.inputs[k];
    const int64_t* st = plan.strides.data() + k * n;
    if (in.access == codegen::Access::Strided && st[n - 2] == 1 && st[n - 1] != 0 &&
        st[n - 1] != 1) {
      transposed.push_back(k);
      in.transposed = true;  // until the budget below says otherwise
    }
  }
  if (transposed.empty()) return;
  // CUDA stages each transposed input in a tile of shared memory; past this many bytes
  // of tiles (48 KB is the most a kernel may declare) the rest are read directly, along
  // the output's rows. Returns whether all of them got a tile.
  constexpr int64_t kMaxTileBytes = 32 * 1024;
  auto assignTiles = [&](int s) {
    int64_t tile_bytes = 0;
    bool all = true;
    for (size_t k : transposed) {
      const int64_t bytes = codegen::transposeTileBytes(plan.inputs[k].dtype, s);
      const bool fits = tile_bytes + bytes <= kMaxTileBytes;
      plan.inputs[k].transposed = fits;
      if (fits) tile_bytes += bytes;
      all = all && fits;
    }
    plan.transpose_tile = tile_bytes > 0 ? s : 0;
    return all;
  };
  if (side != 0) {
    assignTiles(side);
    return;
  }
  // Vector tiles of 64 need every transposed input in a tile (codegen::vectorTiles); where
  // some do not fit, more of them do in tiles of 32.
  const int wide = codegen::transposeTileSide({plan.inputs.data(), count});
  if (!assignTiles(wide) && wide != 32) assignTiles(32);
}

void shareEqualStrides(IterationPlan& plan, size_t count) {
  const int64_t* strides = plan.strides.data();
  const size_t n = static_cast<size_t>(plan.ndim);
  for (size_t k = 0; k < count; ++k) {
    if (plan.inputs[k].access != codegen::Access::Strided) continue;
    for (size_t j = 0; j < k; ++j) {
      const codegen::TensorInput& earlier = plan.inputs[j];
      if (earlier.access != codegen::Access::Strided || earlier.same_strides_as >= 0) continue;
      if (std::equal(strides + k * n, strides + (k + 1) * n, strides + j * n)) {
        plan.inputs[k].same_strides_as = static_cast<int32_t>(j);
        break;
      }
    }
  }
}

}  // namespace fuser::runtime
