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
// (NNC's isSupported, which consults its custom operator set). Our operators join that
// set so that their inputs and outputs get profiled types; NNC stays off while we are
// enabled. The set has no removal, so this happens once per process.
// In-place variants of our operators (add_, relu_, ...) are profiled through the
// profiling registry instead, so that inplace.cpp knows every operand's type: in NNC's
// set they would be claimed by NNC, which has no lowering for them, once we are off.
// So are native_layer_norm_backward, whose input gradient layer_norm_backward.cpp makes a
// table op, and autodiff's _batch_norm_impl_index, which batch_norm_training.cpp splits.
void requestProfilingOfFusibleOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& schema : ops::supportedSchemas()) {
      torch::jit::tensorexpr::getCustomOperatorSet().insert({schema.c_str()});
    }
    torch::jit::RegisterProfilingNode(
        [](const torch::jit::Node* node) {
          return functionalEntryOf(node) != nullptr ||
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
