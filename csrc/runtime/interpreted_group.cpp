#include "runtime/interpreted_group.h"

#include "passes/chunks.h"
#include "passes/lone_writes.h"
#include "config.h"
#include "stats.h"

#include <iostream>
#include <sstream>

namespace fuser::runtime {
namespace {

constexpr int kDumpedCallsPerGroup = 4;  // enough to tell one layout from the next

// The inputs as the call gives them: what the kernel's plan could not serve.
std::string describeInputs(c10::ArrayRef<c10::IValue> inputs) {
  std::ostringstream out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    out << "  input " << i << ": ";
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      out << t.scalar_type() << " " << t.device() << " sizes " << t.sizes() << " strides "
          << t.strides() << " offset " << t.storage_offset();
    } else {
      out << v.tagKind();
      if (v.isScalar() || v.isIntList()) out << " " << v;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace

void InterpretedGroup::run(torch::jit::Stack& stack, const char* why) {
  std::call_once(once_, [&] {
    auto copy = subgraph_->copy();
    expandBroadcastingChunks(copy->block());
    writeFunctionalWritesInPlace(copy->block());  // self's strides, as the kernel keeps them
    code_ = std::make_unique<torch::jit::Code>(copy, "fuser_fusion_group");
  });
  stats().interpreted_runs++;
  if (config().dump_interpreted) {
    int n = dumped_.fetch_add(1);
    if (n < kDumpedCallsPerGroup) {
      size_t num_inputs = subgraph_->inputs().size();
      std::ostringstream out;
      out << "[fuser] group run interpreted (call " << n + 1 << ")";
      if (why) out << ": " << why;
      out << "\n";
      if (n == 0) out << *subgraph_;
      out << describeInputs(torch::jit::last(stack, num_inputs));
      std::cerr << out.str();
    }
  }
  torch::jit::InterpreterState(*code_).run(stack);
}

}  // namespace fuser::runtime
