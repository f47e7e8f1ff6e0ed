#include "api.h"

#include <torch/csrc/jit/passes/pass_manager.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "config.h"
#include "passes/pipeline.h"

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

}  // namespace

void enable() {
  if (config().killed) return;
  Registration& r = registration();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.active) return;
  r.pass_id = torch::jit::registerPrePass(
      [](std::shared_ptr<torch::jit::Graph>& graph) { fuseGraph(graph); });
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
