// The fuser::matmul_permuted operator (symbols.h): a CPU matmul whose product is permuted
// and made contiguous (attention's heads merged back, [B, H, T, D] to [B, T, H, D])
// writes it into the contiguous permuted buffer through the inverse permutation's view.
// ATen's GEMM takes the view's row stride, so no copy is made. Where that does not hold
// (other devices, autocast, operands ATen would refuse or broadcast into another shape),
// it computes eager's expression itself, and ATen raises eager's errors.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <c10/util/strides.h>

#include <optional>
#include <vector>

#include "symbols.h"

namespace fuser::runtime {
namespace {

at::Tensor asEager(const at::Tensor& self, const at::Tensor& other, at::IntArrayRef dims) {
  return at::matmul(self, other).permute(dims).contiguous();
}

// The product's sizes where both operands have 2 or more dims and their inner sizes
// agree; empty otherwise (eager's path decides).
std::vector<int64_t> productSizes(const at::Tensor& self, const at::Tensor& other) {
  if (self.dim() < 2 || other.dim() < 2 || self.size(-1) != other.size(-2)) return {};
  std::vector<int64_t> sizes =
      at::infer_size(self.sizes().slice(0, self.dim() - 2), other.sizes().slice(0, other.dim() - 2));
  sizes.push_back(self.size(-2));
  sizes.push_back(other.size(-1));
  return sizes;
}

// ATen's is_contiguous for these sizes and strides: no element, or every dim of more
// than one element at the row-major stride.
bool isContiguous(at::IntArrayRef sizes, at::IntArrayRef strides) {
  if (c10::multiply_integers(sizes) == 0) return true;
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// Whether dims [first, end) of `t` (batch dims) view as one dim: each non-1 dim's stride
// is the next non-1 dim's stride times its size.
bool batchDimsMerge(const at::Tensor& t, int64_t first, int64_t end) {
  std::optional<int64_t> inner;
  for (int64_t d = end; d-- > first;) {
    if (t.size(d) == 1) continue;
    if (inner && t.stride(d) != t.stride(*inner) * t.size(*inner)) return false;
    inner = d;
  }
  return true;
}

// product = self @ other, written into `product`'s strides. ATen's matmul copies into an
// output whose batch dims do not merge into one (heads merged back at a batch above 1:
// [B, H, T, D] strided as [B, T, H, D]), so the leading batch dims that keep them apart
// are walked here, one matmul per index, each into a slice whose batch dims merge.
void matmulInto(at::Tensor& product, const at::Tensor& self, const at::Tensor& other) {
  const int64_t batch = product.dim() - 2;
  int64_t walked = 0;
  while (!batchDimsMerge(product, walked, batch)) ++walked;
  if (walked == 0) {
    at::matmul_out(product, self, other);
    return;
  }
  std::vector<int64_t> self_sizes = product.sizes().slice(0, batch).vec();
  std::vector<int64_t> other_sizes = self_sizes;
  self_sizes.insert(self_sizes.end(), {self.size(-2), self.size(-1)});
  other_sizes.insert(other_sizes.end(), {other.size(-2), other.size(-1)});
  const at::Tensor a = self.expand(self_sizes);
  const at::Tensor b = other.expand(other_sizes);
  const int64_t count = c10::multiply_integers(product.sizes().slice(0, walked));
  for (int64_t linear = 0; linear < count; ++linear) {
    at::Tensor slice = product, lhs = a, rhs = b;
    int64_t rest = linear;
    for (int64_t d = walked; d-- > 0;) {
      const int64_t i = rest % product.size(d);
      rest /= product.size(d);
      slice = slice.select(d, i);
      lhs = lhs.select(d, i);
      rhs = rhs.select(d, i);
    }
    at::Tensor out = slice.alias();
    at::matmul_out(out, lhs, rhs);
    // An out that matmul_out gave other storage: its values, copied into the slice.
    if (!out.is_alias_of(slice) || out.strides() != slice.strides()) slice.copy_(out);
  }
}

at::Tensor matmulPermuted(const at::Tensor& self, const at::Tensor& other, at::IntArrayRef dims) {
  if (!self.is_cpu() || !other.is_cpu() || self.scalar_type() != other.scalar_type() ||
      !at::isFloatingType(self.scalar_type()) || at::autocast::is_autocast_enabled(at::kCPU) ||
      self.requires_grad() || other.requires_grad()) {
    return asEager(self, other, dims);
  }
  const std::vector<int64_t> sizes = productSizes(self, other);
  if (sizes.empty() || sizes.size() != dims.size()) return asEager(self, other, dims);
  const c10::DimVector row_major = c10::contiguous_strides(sizes);
  std::vector<int64_t> permuted(dims.size());
  std::vector<int64_t> permuted_strides(dims.size());
  std::vector<int64_t> inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t from = c10::maybe_wrap_dim(dims[d], static_cast<int64_t>(dims.size()));
    if (seen[from]) return asEager(self, other, dims);  // eager's error for repeated dims
    seen[from] = true;
    permuted[d] = sizes[from];
    permuted_strides[d] = row_major[from];
    inverse[from] = static_cast<int64_t>(d);
  }
  // Where the permuted product is contiguous already (it moves only dims of size 1, or
  // has no element), eager's contiguous() returns it with its own strides.
  const c10::DimVector row_major_permuted = c10::contiguous_strides(permuted);
  at::Tensor buffer = at::empty_strided(
      permuted,
      isContiguous(permuted, permuted_strides) ? at::IntArrayRef(permuted_strides)
                                               : at::IntArrayRef(row_major_permuted),
      self.options());
  at::Tensor product = buffer.permute(inverse);
  const void* data = product.data_ptr();
  const std::vector<int64_t> strides = product.strides().vec();
  matmulInto(product, self, other);
  // matmul_out may give its result other storage; the values are right either way.
  if (product.data_ptr() != data || product.strides() != at::IntArrayRef(strides)) {
    return product.permute(dims).contiguous();
  }
  return buffer;
}

torch::jit::RegisterOperators registration({
    torch::jit::Operator(
        "fuser::matmul_permuted(Tensor self, Tensor other, int[] dims) -> Tensor",
        [](torch::jit::Stack& stack) {
          const std::vector<int64_t> dims = torch::jit::pop(stack).toIntVector();
          const at::Tensor other = torch::jit::pop(stack).toTensor();
          const at::Tensor self = torch::jit::pop(stack).toTensor();
          torch::jit::push(stack, matmulPermuted(self, other, dims));
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
