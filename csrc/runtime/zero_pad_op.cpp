// The fuser::pad_unless_zero operator (symbols.h; passes/zero_pads.cpp): a constant pad
// that hands back its input where it pads nothing.
//
// ATen's constant pad copies its input where every pad is zero, and the copy keeps the
// input's strides where its elements are dense (clone's preserve format). Where they are
// and padsNothing holds, the input itself has the copy's values, sizes, strides, offset
// and flags. Everywhere else ATen pads, and raises what it raises.
#include <ATen/ATen.h>
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace fuser::runtime {
namespace {

// Whether ATen's pad would copy `self` into a tensor a reader could not tell from it:
// every pad zero, the elements dense (the copy keeps their strides) and the whole storage
// (the copy's starts at offset 0 and holds them alone), no conjugate or negative bit
// (the copy resolves them) and no gradient, backward or forward (the copy records its own).
bool padsNothing(const at::Tensor& self, const std::vector<int64_t>& pad) {
  if (pad.size() % 2 != 0 || pad.size() > 2 * static_cast<size_t>(self.dim())) return false;
  if (!std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p == 0; })) return false;
  if (self.layout() != c10::kStrided || !self.has_storage() || self.storage_offset() != 0) return false;
  if (self.storage().nbytes() != self.numel() * self.itemsize()) return false;
  if (self.is_conj() || self.is_neg() || self.requires_grad() || self._fw_grad(0).defined()) {
    return false;
  }
  return self.is_non_overlapping_and_dense();
}

torch::jit::RegisterOperators zeroPadOpRegistration({
    torch::jit::Operator(
        "fuser::pad_unless_zero(Tensor(a) self, int[] pad, str mode=\"constant\", "
        "float? value=None) -> Tensor(a)",
        [](torch::jit::Stack& stack) {
          const std::optional<double> value = torch::jit::pop(stack).toOptional<double>();
          const std::string mode = torch::jit::pop(stack).toStringRef();
          const std::vector<int64_t> pad = torch::jit::pop(stack).toIntVector();
          at::Tensor self = torch::jit::pop(stack).toTensor();
          if (mode == "constant" && padsNothing(self, pad)) {
            torch::jit::push(stack, std::move(self));
          } else {
            torch::jit::push(stack, at::pad(self, pad, mode, value));
          }
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
    torch::jit::Operator(
        "fuser::pad_unless_zero.nd(Tensor(a) self, int[] pad, Scalar value=0) -> Tensor(a)",
        [](torch::jit::Stack& stack) {
          const at::Scalar value = torch::jit::pop(stack).toScalar();
          const std::vector<int64_t> pad = torch::jit::pop(stack).toIntVector();
          at::Tensor self = torch::jit::pop(stack).toTensor();
          if (padsNothing(self, pad)) {
            torch::jit::push(stack, std::move(self));
          } else {
            torch::jit::push(stack, at::constant_pad_nd(self, pad, value));
          }
        },
        c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
