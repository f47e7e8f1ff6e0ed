// The operators random dropout runs through (symbols.h): fuser::philox_state draws a
// Philox state per call; fuser::philox_dropout is what the interpreter runs where a
// group's kernel does not (the fallback graph, a group that could not compile). It
// draws the same mask as the kernels (codegen/philox.h), element e being the e-th of
// the output's memory, as in the kernels' iteration over a dense output.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <mutex>

#include "codegen/philox.h"
#include "runtime/cuda/stream_capture.h"
#include "runtime/masks_drawn_by_aten.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

// Eager's native_dropout checks its keep probability with bernoulli_'s words.
void checkKeepProbability(double p) {
  const double keep = 1 - p;
  TORCH_CHECK(keep >= 0 && keep <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", keep);
}

// CPU: a fresh 64-bit key from the generator, counters from 0. CUDA: the generator's
// seed and 4 counters of its Philox offset, reserved as ATen's own kernels reserve
// theirs (the state reads as curand's; codegen/philox.h); while the stream is captured
// into a CUDA graph, an offset that leaves the draw to ATen (runtime/masks_drawn_by_aten.h).
std::pair<int64_t, int64_t> drawState(c10::Device device) {
  if (cuda::currentStreamCapturing(device)) return {0, kMaskDrawnByAten};
  if (device.is_cpu()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    const uint64_t key = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
    return {static_cast<int64_t>(key), 0};
  }
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  const uint64_t seed = gen.current_seed();
  const uint64_t offset = gen.get_offset();
  gen.set_offset(offset + 4);
  return {static_cast<int64_t>(seed), static_cast<int64_t>(offset)};
}

void philoxState(torch::jit::Stack& stack) {
  const double p = torch::jit::pop(stack).toDouble();
  const c10::Device device = torch::jit::pop(stack).toDevice();
  checkKeepProbability(p);
  const auto [seed, offset] = drawState(device);
  torch::jit::push(stack, seed, offset);
}

void philoxDropout(torch::jit::Stack& stack) {
  const bool scale_in_input_dtype = torch::jit::pop(stack).toBool();
  const int64_t drawn_offset = torch::jit::pop(stack).toInt();
  const auto offset = static_cast<uint64_t>(drawn_offset);
  const auto seed = static_cast<uint64_t>(torch::jit::pop(stack).toInt());
  const double p = torch::jit::pop(stack).toDouble();
  const at::Tensor input = torch::jit::pop(stack).toTensor();
  if (drawn_offset == kMaskDrawnByAten) {
    auto [output, mask] = at::native_dropout(input, p, true);
    torch::jit::push(stack, std::move(output), std::move(mask));
    return;
  }
  // Eager's masks of the input's dtype cannot hold the scaled values of other dtypes.
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "result type Float can't be cast to the ",
              "desired output type ", input.scalar_type());
  checkKeepProbability(p);
  const double keep = 1 - p;
  const auto keep_below = static_cast<float>(keep);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool).device(at::kCPU),
                                   at::MemoryFormat::Preserve);
  bool* kept = mask.data_ptr<bool>();
  for (int64_t e = 0; e < mask.numel(); ++e) {
    kept[e] = codegen::philox::fx_philox_uniform(seed, offset, static_cast<uint64_t>(e)) < keep_below;
  }
  mask = mask.to(input.device());
  at::Tensor output;
  if (keep == 0) {
    output = input * at::zeros({}, input.options());
  } else if (scale_in_input_dtype) {
    output = input * mask.to(input.scalar_type()).div_(keep);
  } else {
    output = input.mul(mask).mul_(1 / keep);
  }
  torch::jit::push(stack, output, mask);
}

torch::jit::RegisterOperators philoxOpsRegistration({
    // Conservative: a draw has an effect (the generator advances), so no pass may merge
    // two draws or drop one.
    torch::jit::Operator("fuser::philox_state(Device device, float p) -> (int, int)",
                         philoxState, c10::AliasAnalysisKind::CONSERVATIVE),
    torch::jit::Operator("fuser::philox_dropout(Tensor input, float p, int seed, int offset, "
                         "bool scale_in_input_dtype) -> (Tensor, Tensor)",
                         philoxDropout, c10::AliasAnalysisKind::FROM_SCHEMA),
});

}  // namespace
}  // namespace fuser::runtime
