// convertAttentionMasksOnce (csrc/passes/attention_masks_once.cpp): which attention masks
// are converted once for all the layers that read them.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>
#include <vector>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

const c10::Symbol kAdditive = c10::Symbol::fromQualString("fuser::additive_attention_mask");
const c10::Symbol kAttention = c10::Symbol::fromQualString("fuser::scaled_dot_product_attention");

// The kinds of the graph's nodes after the pass, constants left out.
std::vector<std::string> kindsAfterPass(const std::string& ir, const std::string& mask_type) {
  auto graph = testing_helpers::parseWithTypes(ir, {{"$MASK", mask_type}});
  convertAttentionMasksOnce(graph);
  std::vector<std::string> kinds;
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::prim::Constant) kinds.push_back(node->kind().toQualString());
  }
  return kinds;
}

const std::string kTwoLayers = R"IR(
graph(%q : Tensor, %k : Tensor, %v : Tensor, %mask : $MASK):
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.]()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %f, %none, %f)
  %r : Tensor = aten::relu(%a)
  %b : Tensor = aten::scaled_dot_product_attention(%r, %k, %v, %mask, %p, %f, %none, %f)
  return (%b)
)IR";

TEST(AttentionMasksOnce, AMaskReadByTwoLayersIsConvertedBeforeTheFirst) {
  auto graph = testing_helpers::parseWithTypes(kTwoLayers, {{"$MASK", "Tensor"}});
  convertAttentionMasksOnce(graph);
  const torch::jit::Node* convert = nullptr;
  std::vector<const torch::jit::Node*> layers;
  for (const torch::jit::Node* node : graph->nodes()) {
    EXPECT_NE(node->kind(), c10::aten::scaled_dot_product_attention);
    if (node->kind() == kAdditive) {
      EXPECT_EQ(convert, nullptr);  // once
      ASSERT_EQ(node->inputs().size(), 8u);
      ASSERT_EQ(node->outputs().size(), 2u);  // the converted mask and its form
      EXPECT_EQ(node->input(0), graph->inputs()[3]);
      // The first layer's query, key and value: its backend decides the form.
      EXPECT_EQ(node->input(1), graph->inputs()[0]);
      EXPECT_EQ(node->input(2), graph->inputs()[1]);
      EXPECT_EQ(node->input(3), graph->inputs()[2]);
      convert = node;
    }
    if (node->kind() != kAttention) continue;
    ASSERT_NE(convert, nullptr);  // the conversion comes before every layer
    ASSERT_EQ(node->inputs().size(), 10u);
    EXPECT_EQ(node->input(3), graph->inputs()[3]);  // the boolean mask, for the other paths
    EXPECT_EQ(node->input(4), convert->output(0));
    EXPECT_EQ(node->input(5), convert->output(1));
    layers.push_back(node);
  }
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[1]->input(0)->node()->input(0), layers[0]->output());  // relu(first)
  EXPECT_EQ(graph->outputs()[0], layers[1]->output());
}

TEST(AttentionMasksOnce, BooleanMasksAndMasksOfUnknownDtypeAreConverted) {
  const std::vector<std::string> converted = {
      "fuser::additive_attention_mask", "fuser::scaled_dot_product_attention", "aten::relu",
      "fuser::scaled_dot_product_attention"};
  EXPECT_EQ(kindsAfterPass(kTwoLayers, "Tensor"), converted);
  EXPECT_EQ(kindsAfterPass(kTwoLayers, "Bool(2, 1, 8, 8, strides=[64, 64, 8, 1], device=cpu)"),
            converted);
}

TEST(AttentionMasksOnce, FloatMasksOneLayerAndNoMaskAreLeft) {
  const std::vector<std::string> left = {"aten::scaled_dot_product_attention", "aten::relu",
                                         "aten::scaled_dot_product_attention"};
  EXPECT_EQ(kindsAfterPass(kTwoLayers, "Float(2, 1, 8, 8, strides=[64, 64, 8, 1], device=cpu)"),
            left);
  EXPECT_EQ(kindsAfterPass(kTwoLayers, "NoneType"), left);
  const std::string one_layer = R"IR(
graph(%q : Tensor, %k : Tensor, %v : Tensor, %mask : $MASK):
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.]()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %f, %none, %f)
  return (%a)
)IR";
  EXPECT_EQ(kindsAfterPass(one_layer, "Tensor"),
            std::vector<std::string>{"aten::scaled_dot_product_attention"});
}

// A layer inside an if: no single place before both layers in one block.
TEST(AttentionMasksOnce, LayersInDifferentBlocksAreLeft) {
  const std::string branches = R"IR(
graph(%q : Tensor, %k : Tensor, %v : Tensor, %mask : $MASK, %c : bool):
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.]()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %mask, %p, %f, %none, %f)
  %b : Tensor = prim::If(%c)
    block0():
      %x : Tensor = aten::scaled_dot_product_attention(%a, %k, %v, %mask, %p, %f, %none, %f)
      -> (%x)
    block1():
      -> (%a)
  return (%b)
)IR";
  EXPECT_EQ(kindsAfterPass(branches, "Tensor"),
            (std::vector<std::string>{"aten::scaled_dot_product_attention", "prim::If"}));
}

}  // namespace
}  // namespace fuser
