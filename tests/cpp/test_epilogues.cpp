// Graph tests of passes/epilogues.cpp (bias split) and of tensor constants as group
// inputs (groups.h, hoistTensorConstants).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/testing/file_check.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::testing::FileCheck;

const testing_helpers::TypeNames kTypes = {
    {"$X", "Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu)"},
    {"$W", "Float(4, 4, 3, 3, strides=[36, 9, 3, 1], requires_grad=0, device=cpu)"},
    {"$B", "Float(4, strides=[1], requires_grad=0, device=cpu)"},
    {"$L", "Float(2, 16, strides=[16, 1], requires_grad=0, device=cpu)"},
    {"$M", "Float(4, 16, strides=[16, 1], requires_grad=0, device=cpu)"},
    {"$O", "Float(2, 4, strides=[4, 1], requires_grad=0, device=cpu)"},
};

// conv2d(x, w, b) read by `reader`: a node kind applied to it, or the call's text with
// `%c` as the convolution.
std::string convThen(const std::string& reader, const std::string& bias = "%b") {
  return R"IR(
graph(%x : $X, %w : $W, %b : $B):
  %one : int = prim::Constant[value=1]()
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %none : NoneType = prim::Constant()
  %c : $X = aten::conv2d(%x, %w, )IR" +
         bias + R"IR(, %ones, %ones, %ones, %one)
  %r : $X = )IR" + (reader.find('(') == std::string::npos ? reader + "(%c)" : reader) + R"IR(
  return (%r)
)IR";
}

GraphPtr splitAndGroup(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, kTypes);
  prepareGraph(graph);
  splitBiasEpilogues(graph);
  graph->lint();  // every value defined before its uses
  formFusionGroups(graph);
  return graph;
}

TEST(Epilogues, ConvBiasAddsAfterAPermuteToRowsAndJoinsTheLayerNorm) {
  // ConvNeXt: the depthwise convolution's result, permuted to NHWC (contiguous rows, as
  // a channels-last region gives it), normalized over its channels.
  auto graph = splitAndGroup(R"IR(
graph(%x : $X, %w : $W, %b : $B):
  %one : int = prim::Constant[value=1]()
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %perm : int[] = prim::Constant[value=[0, 2, 3, 1]]()
  %shape : int[] = prim::Constant[value=[4]]()
  %eps : float = prim::Constant[value=1e-6]()
  %cudnn : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %c : $X = aten::conv2d(%x, %w, %b, %ones, %ones, %ones, %one)
  %y : Float(2, 8, 8, 4, strides=[256, 32, 4, 1], requires_grad=0, device=cpu) = aten::permute(%c, %perm)
  %r : Float(2, 8, 8, 4, strides=[256, 32, 4, 1], requires_grad=0, device=cpu) = aten::layer_norm(%y, %shape, %none, %none, %eps, %cudnn)
  return (%r)
)IR");
  FileCheck()
      .check("aten::conv2d(%x, %w, %")
      ->check("aten::permute")
      ->check("fuser::FusionGroup")
      ->run(*graph);
  for (Node* n : graph->nodes()) {
    if (n->kind() == c10::aten::conv2d) EXPECT_TRUE(n->input(2)->type()->cast<c10::NoneType>());
  }
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  FileCheck().check("aten::add")->check("aten::layer_norm")->run(
      *groups[0]->g(torch::jit::attr::Subgraph));
  // The bias as it is, [4]: the permuted result's last dim.
  bool bias_in = false;
  for (torch::jit::Value* in : groups[0]->inputs()) bias_in = bias_in || in == graph->inputs()[2];
  EXPECT_TRUE(bias_in);
}

TEST(Epilogues, ConvBiasJoinsTheActivationsGroup) {
  auto graph = splitAndGroup(convThen("aten::relu"));
  FileCheck()
      .check("aten::conv2d(%x, %w, %")
      ->check("aten::view(%b")
      ->check("fuser::FusionGroup")
      ->run(*graph);
  Node* conv = nullptr;
  for (Node* n : graph->nodes()) {
    if (n->kind() == c10::Symbol::fromQualString("aten::conv2d")) conv = n;
  }
  ASSERT_NE(conv, nullptr);
  EXPECT_TRUE(conv->input(2)->type()->cast<c10::NoneType>());
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  FileCheck().check("aten::add")->check("aten::relu")->run(
      *groups[0]->g(torch::jit::attr::Subgraph));
  // The bias reaches the kernel as a [4, 1, 1] argument.
  bool viewed_bias_in = false;
  for (torch::jit::Value* in : groups[0]->inputs()) {
    auto type = in->type()->cast<c10::TensorType>();
    if (type && type->sizes().concrete_sizes() == std::vector<int64_t>{4, 1, 1}) {
      viewed_bias_in = true;
    }
  }
  EXPECT_TRUE(viewed_bias_in);
}

TEST(Epilogues, NothingToJoinLeavesTheConvolution) {
  auto graph = splitAndGroup(convThen("aten::clone(%c, %none)"));  // not fusible
  FileCheck().check("aten::conv2d(%x, %w, %b")->check_not("aten::add")->run(*graph);
}

TEST(Epilogues, NoBiasIsLeftAlone) {
  auto graph = splitAndGroup(convThen("aten::relu", "%none"));
  FileCheck().check("aten::conv2d(%x, %w, %")->check_not("aten::add")->run(*graph);
  for (Node* n : graph->nodes()) {
    if (n->kind() == c10::Symbol::fromQualString("aten::conv2d")) {
      EXPECT_TRUE(n->input(2)->type()->cast<c10::NoneType>());
    }
  }
}

TEST(Epilogues, LinearBiasAddsWithoutAView) {
  auto graph = splitAndGroup(R"IR(
graph(%x : $L, %w : $M, %b : $B):
  %l : $O = aten::linear(%x, %w, %b)
  %s : $O = aten::sigmoid(%l)
  return (%s)
)IR");
  FileCheck().check("aten::linear(%x, %w, %")->check_not("aten::view")->check("fuser::FusionGroup")->run(
      *graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  FileCheck().check("aten::add")->check("aten::sigmoid")->run(
      *groups[0]->g(torch::jit::attr::Subgraph));
}

TEST(Epilogues, ConstantBiasIsAConstantGroupInput) {
  // A frozen module: the bias is a constant tensor, viewed at pass time.
  auto graph = testing_helpers::parseWithTypes(convThen("aten::relu"), kTypes);
  torch::jit::Value* bias = nullptr;
  {
    torch::jit::WithInsertPoint start(*graph->nodes().begin());
    bias = graph->insertConstant(at::arange(4, at::kFloat));
  }
  for (Node* n : graph->nodes()) {
    if (n->kind() == c10::Symbol::fromQualString("aten::conv2d")) n->replaceInput(2, bias);
  }
  graph->eraseInput(2);
  prepareGraph(graph);
  splitBiasEpilogues(graph);
  graph->lint();  // every value defined before its uses
  formFusionGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  // No tensor constant stays inside the subgraph; the group reads one from outside.
  for (Node* inner : groups[0]->g(torch::jit::attr::Subgraph)->nodes()) {
    EXPECT_FALSE(inner->kind() == c10::prim::Constant &&
                 inner->output()->type()->cast<c10::TensorType>());
  }
  bool constant_input = false;
  for (torch::jit::Value* in : groups[0]->inputs()) {
    if (in->node()->kind() == c10::prim::Constant) {
      constant_input = true;
      EXPECT_EQ(torch::jit::toIValue(in)->toTensor().sizes(), at::IntArrayRef({4, 1, 1}));
    }
  }
  EXPECT_TRUE(constant_input);
}

}  // namespace
}  // namespace fuser
