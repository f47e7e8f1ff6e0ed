// copyMatmulOperands (csrc/passes/matmul_operands.cpp): which batched matmul operands get
// an explicit contiguous() before the matmul, from their profiled types alone (no GPU
// needed: the graphs are only typed as CUDA). writeMatmulsPermuted
// (csrc/passes/matmul_permuted.cpp): which CPU products made contiguous after a permute
// are written permuted.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

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


// attention's heads merged back: (att @ v) is [2, 4, 8, 16], transposed to [2, 8, 4, 16]
// and made contiguous. $T is the transpose (or permute) node's line, $USE an extra use.
const char* kMergeHeads = R"IR(
graph(%att : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=$D),
      %v : Float(2, 4, 8, 16, strides=[512, 128, 16, 1], requires_grad=0, device=$D)):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %minus_one : int = prim::Constant[value=-1]()
  %zero : int = prim::Constant[value=0]()
  %dims : int[] = prim::Constant[value=[0, 2, 1, 3]]()
  %last : int[] = prim::Constant[value=[0, 1, 3, 2]]()
  %y : Float(2, 4, 8, 16, strides=[512, 128, 16, 1], requires_grad=0, device=$D) = aten::matmul(%att, %v)
  $T
  %c : Float(2, 8, 4, 16, strides=[512, 64, 16, 1], requires_grad=0, device=$D) = aten::contiguous(%t, %zero)
  return (%c$USE)
)IR";

const std::string kTranspose = "%t : Tensor = aten::transpose(%y, %one, %two)";

// Whether the pass wrote the product permuted (and left no matmul, permute or copy).
bool writtenPermuted(const std::string& transpose, const std::string& device = "cpu",
                     const std::string& extra_use = "") {
  auto graph = testing_helpers::parseWithTypes(
      kMergeHeads, {{"$T", transpose}, {"$D", device}, {"$USE", extra_use}});
  writeMatmulsPermuted(graph);
  graph->lint();
  const size_t fused = testing_helpers::countKind(graph->block(), matmulPermutedSymbol());
  if (fused == 0) return false;
  EXPECT_EQ(testing_helpers::countKind(graph->block(), c10::aten::matmul), 0u);
  EXPECT_EQ(testing_helpers::countKind(graph->block(), c10::aten::contiguous), 0u);
  // The op's result carries the copy's type: contiguous [2, 8, 4, 16].
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != matmulPermutedSymbol()) continue;
    auto type = node->output()->type()->expect<c10::TensorType>();
    EXPECT_EQ(*type->sizes().concrete_sizes(), (std::vector<int64_t>{2, 8, 4, 16}));
    EXPECT_EQ(*type->strides().concrete_sizes(), (std::vector<int64_t>{512, 64, 16, 1}));
  }
  return true;
}

TEST(MatmulPermuted, MergedHeadsAreWrittenPermutedOnCpu) {
  EXPECT_TRUE(writtenPermuted(kTranspose));
  EXPECT_TRUE(writtenPermuted("%t : Tensor = aten::transpose(%y, %two, %one)"));
  EXPECT_TRUE(writtenPermuted("%t : Tensor = aten::permute(%y, %dims)"));
}

TEST(MatmulPermuted, OtherUsesOtherDevicesAndMovedRowsAreLeftAlone) {
  // The product or its permuted view read elsewhere: its layout is observable.
  EXPECT_FALSE(writtenPermuted(kTranspose, "cpu", ", %y"));
  EXPECT_FALSE(writtenPermuted(kTranspose, "cpu", ", %t"));
  // CUDA keeps the copy, which a group takes (copyMatmulOperands' side).
  EXPECT_FALSE(writtenPermuted(kTranspose, "cuda:0"));
  // The last dim moves: the GEMM's rows would not be rows of the buffer.
  EXPECT_FALSE(writtenPermuted("%t : Tensor = aten::transpose(%y, %three, %two)"));
  EXPECT_FALSE(writtenPermuted("%t : Tensor = aten::transpose(%y, %minus_one, %one)"));
  EXPECT_FALSE(writtenPermuted("%t : Tensor = aten::permute(%y, %last)"));
}

}  // namespace
}  // namespace fuser
