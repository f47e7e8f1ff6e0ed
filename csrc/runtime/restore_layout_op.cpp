// The fuser::restore_layout operator (symbols.h): a value of a channels-last region
// (passes/channels_last.cpp) in the memory format eager gives it, the one its region's
// input suggests. Where the value already has that order (always, when the input is
// channels-last), no copy: a view with eager's strides (they differ at most in size-1
// dims, which address nothing).
#include <ATen/ATen.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "symbols.h"

namespace fuser::runtime {
namespace {

at::Tensor restoreLayout(const at::Tensor& self, const at::Tensor& reference) {
  const at::MemoryFormat format =
      self.dim() == 4 ? reference.suggest_memory_format() : at::MemoryFormat::Contiguous;
  if (!self.is_contiguous(format)) return self.contiguous(format);
  const c10::DimVector eager =
      format == at::MemoryFormat::ChannelsLast
          ? c10::DimVector(c10::get_channels_last_strides_2d(self.sizes()))
          : c10::contiguous_strides(self.sizes());
  if (self.strides() == c10::IntArrayRef(eager)) return self;
  return self.as_strided(self.sizes(), eager, self.storage_offset());
}

torch::jit::RegisterOperators restoreLayoutOpRegistration({torch::jit::Operator(
    "fuser::restore_layout(Tensor(a) self, Tensor reference) -> Tensor(a)",
    [](torch::jit::Stack& stack) {
      at::Tensor reference = torch::jit::pop(stack).toTensor();
      at::Tensor self = torch::jit::pop(stack).toTensor();
      torch::jit::push(stack, restoreLayout(self, reference));
    },
    c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace
}  // namespace fuser::runtime
