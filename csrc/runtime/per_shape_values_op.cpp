// The fuser::PerShapeValues operator (symbols.h): its subgraph runs once per distinct
// keys, and its values are handed back at later calls with the same keys.
//
// The key is every number the node reads, and of every tensor it reads for metadata
// only, the dtype, device, layout, sizes and strides; with them the default dtype (a
// float number becomes a tensor of it), whether grad mode and inference mode are on (a
// tensor made in inference mode may not be used outside it), and on a CUDA device the
// current device and stream (the values were written on the stream current then; also
// where only the graph says the piece is on CUDA, a constant device). Inside a CUDA
// graph capture the piece always runs and nothing is kept.
// A node keeps the values of its last 8 keys, up to 32 MiB of tensors in all (the
// values of a key that alone take more are made every call). A value the key cannot
// hold (no number, no tensor) runs the subgraph every call, as the graph did.
#include <ATen/ATen.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "passes/lone_writes.h"
#include "runtime/cuda/stream_capture.h"
#include "runtime/value_keys.h"
#include "stats.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

constexpr size_t kKeysKept = 8;
// What a node may keep in tensors across its keys: a piece that builds activation-sized
// buffers (a zero state the size of each batch) would otherwise hold 8 batches' worth.
constexpr size_t kBytesKept = size_t{32} << 20;

using Key = ValueKey;

size_t bytesOf(const std::vector<c10::IValue>& values) {
  size_t bytes = 0;
  for (const c10::IValue& value : values) {
    if (value.isTensor() && value.toTensor().has_storage()) {
      bytes += value.toTensor().storage().nbytes();
    }
  }
  return bytes;
}

class PerShapeValues {
 public:
  explicit PerShapeValues(const torch::jit::Node* node)
      : subgraph_(node->g(c10::attr::Subgraph)),
        num_keys_(node->inputs().size()),
        cuda_(node->hasAttribute(perShapeValuesCudaAttr())) {}

  void run(torch::jit::Stack& stack) {
    // Inside a CUDA graph capture the kernels are recorded, not run, and the graph keeps
    // no tensor alive: values kept here could be freed before a replay reads them, and
    // values made now are the capture's. So the piece runs, and nothing is kept.
    if (cuda_ && cuda::currentStreamCapturing(currentCudaDevice())) {
      torch::jit::InterpreterState(code()).run(stack);
      return;
    }
    std::optional<Key> key = keyOf(torch::jit::last(stack, num_keys_));
    if (key) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        if (it->key != *key) continue;
        kept_.splice(kept_.begin(), kept_, it);  // most recent first
        torch::jit::drop(stack, num_keys_);
        for (const c10::IValue& value : kept_.front().values) stack.push_back(value);
        stats().per_shape_hits++;
        return;
      }
    }
    const size_t base = stack.size() - num_keys_;
    torch::jit::InterpreterState(code()).run(stack);
    if (!key) return;
    std::vector<c10::IValue> values(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    const size_t bytes = bytesOf(values);
    if (bytes > kBytesKept) return;
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_front({std::move(*key), std::move(values), bytes});
    bytes_kept_ += bytes;
    while (kept_.size() > kKeysKept || bytes_kept_ > kBytesKept) {
      bytes_kept_ -= kept_.back().bytes;
      kept_.pop_back();
    }
  }

 private:
  std::optional<Key> keyOf(c10::ArrayRef<c10::IValue> inputs) const {
    Key key = {static_cast<int64_t>(c10::typeMetaToScalarType(c10::get_default_dtype())),
               c10::GradMode::is_enabled(), c10::InferenceMode::is_enabled()};
    if (cuda_) addDeviceToKey(key, currentCudaDevice());
    for (const c10::IValue& input : inputs) {
      if (!addValueToKey(key, input)) return std::nullopt;
    }
    return key;
  }

  torch::jit::Code& code() {
    std::call_once(once_, [&] {
      auto copy = subgraph_->copy();
      writeFunctionalWritesInPlace(copy->block());  // strides as the graph's own writes keep
      code_ = std::make_unique<torch::jit::Code>(copy, "fuser_per_shape_values");
    });
    return *code_;
  }

  static c10::Device currentCudaDevice() {
    return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice();
  }

  std::shared_ptr<torch::jit::Graph> subgraph_;
  size_t num_keys_;
  bool cuda_;
  std::once_flag once_;
  std::unique_ptr<torch::jit::Code> code_;
  struct Kept {
    Key key;
    std::vector<c10::IValue> values;
    size_t bytes;
  };
  std::mutex mutex_;
  std::list<Kept> kept_;
  size_t bytes_kept_ = 0;
};

torch::jit::RegisterOperators perShapeValuesOpRegistration({torch::jit::Operator(
    perShapeValuesSymbol(),
    [](const torch::jit::Node* node) -> torch::jit::Operation {
      auto values = std::make_shared<PerShapeValues>(node);
      return [values](torch::jit::Stack& stack) { values->run(stack); };
    },
    c10::AliasAnalysisKind::PURE_FUNCTION)});

}  // namespace
}  // namespace fuser::runtime
