// A group's subgraph run by the TorchScript interpreter: what a group does when its
// kernel cannot serve a call (eager's results and errors, by construction).
#pragma once

#include <ATen/core/stack.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <atomic>
#include <memory>
#include <mutex>

namespace fuser::runtime {

class InterpretedGroup {
 public:
  explicit InterpretedGroup(std::shared_ptr<torch::jit::Graph> subgraph)
      : subgraph_(std::move(subgraph)) {}
  // Runs the subgraph on the stack's inputs, leaving its outputs; counts
  // stats().interpreted_runs. The code is made at the first run (BroadcastingChunk
  // nodes, which the interpreter has no operator for, expanded in a copy). `why`: what
  // kept the kernel from this call, printed with it under FUSER_DUMP=interpreted.
  void run(torch::jit::Stack& stack, const char* why = nullptr);

 private:
  std::shared_ptr<torch::jit::Graph> subgraph_;
  std::once_flag once_;
  std::unique_ptr<torch::jit::Code> code_;
  std::atomic<int> dumped_{0};  // interpreted calls printed (FUSER_DUMP=interpreted)
};

}  // namespace fuser::runtime
