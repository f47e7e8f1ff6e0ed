// denseAttentionMasks (csrc/passes/attention_masks.cpp): which attention masks get a dense
// copy before scaled_dot_product_attention, from their profiled types alone (no GPU
// needed: the graphs are only typed as CUDA).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>
#include <vector>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

const std::string kQkv =
    "Float(2, 4, 8, 16, strides=[512, 128, 16, 1], requires_grad=0, device=cuda:0)";
// A traced transformers model's all-true mask: [B, 1, T, T] expanded from [B, 1, 1, 1].
const std::string kExpanded =
    "Bool(2, 1, 8, 8, strides=[1, 1, 0, 0], requires_grad=0, device=cuda:0)";

// Two layers' attention reading one mask; returns, per layer, the node kind its mask comes
// from after the pass, and checks the copies' types.
std::vector<std::string> maskSources(const std::string& mask_type, const std::string& qkv = kQkv) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%q : $QKV, %k : $QKV, %v : $QKV, %mask : $MASK):
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.]()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %f, %none, %f)
  %b : Tensor = aten::scaled_dot_product_attention(%a, %k, %v, %mask, %p, %f, %none, %f)
  return (%b)
)IR",
                                               {{"$QKV", qkv}, {"$MASK", mask_type}});
  denseAttentionMasks(graph);
  std::vector<std::string> sources;
  const torch::jit::Value* first_copy = nullptr;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::scaled_dot_product_attention) continue;
    const torch::jit::Value* mask = node->input(3);
    sources.push_back(mask->node()->kind().toQualString());
    if (mask->node()->kind() == c10::Symbol::fromQualString("fuser::dense_attention_mask")) {
      if (first_copy) EXPECT_EQ(mask, first_copy);
      first_copy = mask;
    }
    if (mask->node()->kind() != c10::aten::contiguous) continue;
    auto type = mask->type()->expect<c10::TensorType>();
    EXPECT_TRUE(type->isComplete());
    EXPECT_EQ(*type->strides().concrete_sizes(), *type->contiguous()->strides().concrete_sizes());
    if (first_copy) EXPECT_EQ(mask, first_copy);  // one copy shared by both layers
    first_copy = mask;
  }
  return sources;
}

TEST(AttentionMasks, ExpandedMasksAreCopiedOnceForEveryLayer) {
  EXPECT_EQ(maskSources(kExpanded), std::vector<std::string>(2, "aten::contiguous"));
  // Broadcast along the key dim only (a per-query mask): still stride 0 there.
  const std::string per_query =
      "Bool(2, 1, 8, 8, strides=[8, 8, 1, 0], requires_grad=0, device=cuda:0)";
  EXPECT_EQ(maskSources(per_query), std::vector<std::string>(2, "aten::contiguous"));
}

// TorchScript profiles no input of attention: a mask from an unprofiled producer has no
// strides in the graph, and the copy is decided per call.
TEST(AttentionMasks, MasksOfUnknownLayoutAreCheckedPerCallOnCuda) {
  EXPECT_EQ(maskSources("Tensor"), std::vector<std::string>(2, "fuser::dense_attention_mask"));
  std::string cpu = kQkv;
  cpu.replace(cpu.find("cuda:0"), 6, "cpu");
  EXPECT_EQ(maskSources("Tensor", cpu), std::vector<std::string>(2, "prim::Param"));
}

TEST(AttentionMasks, MasksTheKernelsTakeAndCpuMasksAreLeftAlone) {
  const std::vector<std::string> untouched(2, "prim::Param");
  // Broadcast along batch and queries, dense along keys (a padding mask): taken as it is.
  EXPECT_EQ(maskSources("Bool(2, 1, 8, 8, strides=[8, 8, 0, 1], requires_grad=0, device=cuda:0)"),
            untouched);
  EXPECT_EQ(maskSources("Bool(2, 1, 8, 1, strides=[8, 8, 1, 0], requires_grad=0, device=cuda:0)"),
            untouched);
  EXPECT_EQ(maskSources("Bool(2, 1, 8, 8, strides=[1, 1, 0, 0], requires_grad=0, device=cpu)"),
            untouched);
  EXPECT_EQ(maskSources("Float(2, 1, 8, 8, strides=[1, 1, 0, 0], requires_grad=1, device=cuda:0)"),
            untouched);
}

}  // namespace
}  // namespace fuser
