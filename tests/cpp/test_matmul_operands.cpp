// copyMatmulOperands (csrc/passes/matmul_operands.cpp): which batched matmul operands get
// an explicit contiguous() before the matmul, from their profiled types alone (no GPU
// needed: the graphs are only typed as CUDA).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

// q and k^T of attention: [B, heads, T, d] views of one [B, T, 3 * heads * d] projection.
const std::string kQ = "Float(2, 4, 8, 8, strides=[768, 8, 96, 1], requires_grad=0, device=cuda:0)";
const std::string kKt = "Float(2, 4, 8, 8, strides=[768, 8, 1, 96], requires_grad=0, device=cuda:0)";

// The number of matmul operands an aten::contiguous makes, after the pass.
size_t copiedOperands(const std::string& a_type, const std::string& b_type) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%a : $A, %b : $B):
  %r : Tensor = aten::matmul(%a, %b)
  return (%r)
)IR",
                                               {{"$A", a_type}, {"$B", b_type}});
  copyMatmulOperands(graph);
  size_t copied = 0;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::matmul) continue;
    for (const torch::jit::Value* in : node->inputs()) {
      if (in->node()->kind() != c10::aten::contiguous) continue;
      auto type = in->type()->expect<c10::TensorType>();
      EXPECT_TRUE(type->isComplete());
      EXPECT_EQ(*type->strides().concrete_sizes(), *type->contiguous()->strides().concrete_sizes());
      ++copied;
    }
  }
  return copied;
}

std::string onDevice(std::string type, const std::string& device) {
  type.replace(type.find("cuda:0"), 6, device);
  return type;
}

TEST(MatmulOperands, AttentionHeadsAreCopiedAsAtenWould) { EXPECT_EQ(copiedOperands(kQ, kKt), 2u); }

TEST(MatmulOperands, MergeableBatchesAreLeftAlone) {
  const std::string contiguous =
      "Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cuda:0)";
  EXPECT_EQ(copiedOperands(contiguous, contiguous), 0u);
  // A batch of one: the heads dim alone merges with nothing.
  const std::string one = "Float(1, 4, 8, 8, strides=[768, 8, 96, 1], requires_grad=0, device=cuda:0)";
  EXPECT_EQ(copiedOperands(one, one), 0u);
  EXPECT_EQ(copiedOperands(kQ, contiguous), 1u);
}

TEST(MatmulOperands, BroadcastBatchesGradientsAndCpuAreLeftAlone) {
  const std::string broadcast =
      "Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cuda:0)";
  EXPECT_EQ(copiedOperands(kQ, broadcast), 0u);
  std::string grad = kQ;
  grad.replace(grad.find("requires_grad=0"), 15, "requires_grad=1");
  EXPECT_EQ(copiedOperands(grad, kKt), 0u);
  EXPECT_EQ(copiedOperands(onDevice(kQ, "cpu"), onDevice(kKt, "cpu")), 0u);
}

}  // namespace
}  // namespace fuser
