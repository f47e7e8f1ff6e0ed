#include "api.h"

#include <torch/csrc/jit/passes/pass_manager.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/runtime/profiling_record.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "config.h"
#include "ops/op_table.h"
#include "passes/onednn_beside.h"
#include "passes/pipeline.h"
#include "passes/type_propagation.h"

namespace fuser {
namespace {

struct Registration {
  std::mutex mutex;
  bool active = false;
  torch::jit::GraphPassNameType pass_id = 0;
  bool nnc_was_enabled = false;
};

Registration& registration() {
  static Registration r;
  return r;
}

// The profiling executor records tensor types only around nodes that a fuser claims
// (NNC's isSupported) or that its profiling registry names. Our operators, their
// in-place variants (add_, relu_, ...), native_layer_norm_backward (whose input gradient
// layer_norm_backward.cpp makes a table op) and autodiff's _batch_norm_impl_index (which
// batch_norm_training.cpp splits) are named in the registry, which only asks for
// profiles. (They used to join NNC's custom operator set, which has no removal: NNC,
// once turned on again after us, claimed them all, reductions over any dims included,
// and crashed on a column sum on CUDA.)
void requestProfilingOfFusibleOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::RegisterProfilingNode([](const torch::jit::Node* node) {
      return ops::findOp(node) != nullptr || functionalEntryOf(node) != nullptr ||
             node->kind() == c10::aten::native_layer_norm_backward ||
             node->kind() == c10::aten::_batch_norm_impl_index;
    });
  });
}

}  // namespace

void enable() {
  if (config().killed) return;
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.active) return;
  requestProfilingOfFusibleOps();
  r.pass_id = torch::jit::registerPrePass(
      [](std::shared_ptr<torch::jit::Graph>& graph) { fuseGraph(graph); });
  runBeforeOneDnnGraph(r.pass_id);
  r.nnc_was_enabled = torch::jit::tensorExprFuserEnabled();
  torch::jit::setTensorExprFuserEnabled(false);
  r.active = true;
}

void disable() {
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.active) return;
  torch::jit::clearPrePass(r.pass_id);
  unguardOneDnnPass();
  torch::jit::setTensorExprFuserEnabled(r.nnc_was_enabled);
  r.active = false;
}

bool isEnabled() {
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.active;
}

void setArgLimit(int n) {
  if (n < 2) {
    throw std::invalid_argument("fuser argument limit must be at least 2 (one input and one "
                                "output), got " + std::to_string(n));
  }
  config().arg_limit = n;
}

int getArgLimit() { return config().arg_limit; }

}  // namespace fuser
