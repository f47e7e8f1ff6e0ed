// Graph tests of passes/max_pool_first.cpp: which max pools read their epilogue's input,
// with the epilogue copied after them on the pooled type.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <vector>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;

const testing_helpers::TypeNames kTypes = {
    {"$X", "Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu)"},
    {"$G", "Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=1, device=cpu)"},
    {"$P", "Float(2, 4, 4, 4, strides=[64, 16, 4, 1], requires_grad=0, device=cpu)"},
};

// A convolution's result %c, the add of `operand` (%b: a [4, 1, 1] bias, made a
// constant unless `constant_bias` is false), a ReLU of type `relu_type`, a 3x3/2 max pool.
GraphPtr stem(const std::string& operand, bool constant_bias = true,
              const std::string& relu_type = "$X") {
  const std::string ir = R"IR(
graph(%x : $X, %w : Tensor, %b : Float(4, 1, 1, strides=[1, 1, 1], requires_grad=0, device=cpu)):
  %one : int = prim::Constant[value=1]()
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %twos : int[] = prim::Constant[value=[2, 2]]()
  %threes : int[] = prim::Constant[value=[3, 3]]()
  %false : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %c : $X = aten::conv2d(%x, %w, %none, %ones, %ones, %ones, %one)
  %a : $X = aten::add(%c, )IR" + operand + R"IR(, %one)
  %r : )IR" + relu_type + R"IR( = aten::relu(%a)
  %p : $P = aten::max_pool2d(%r, %threes, %twos, %ones, %ones, %false)
  return (%p)
)IR";
  auto graph = testing_helpers::parseWithTypes(ir, kTypes);
  if (constant_bias) {
    torch::jit::WithInsertPoint start(graph->block()->nodes().front());
    graph->inputs()[2]->replaceAllUsesWith(graph->insertConstant(at::randn({4, 1, 1})));
  }
  return graph;
}

Node* only(const GraphPtr& graph, c10::Symbol kind) {
  Node* found = nullptr;
  for (Node* n : graph->nodes()) {
    if (n->kind() != kind) continue;
    EXPECT_EQ(found, nullptr) << "two nodes of " << kind.toQualString();
    found = n;
  }
  return found;
}

TEST(MaxPoolFirst, TheStemPoolsTheConvolutionThenAddsTheBiasAndAppliesTheRelu) {
  auto graph = stem("%b");
  poolBeforeMonotoneOps(graph);
  graph->lint();
  Node* pool = only(graph, c10::aten::max_pool2d);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->input(0)->node()->kind(), c10::aten::conv2d);
  // add and relu follow on the pooled type; the graph returns the relu's result.
  ASSERT_EQ(pool->output()->uses().size(), 1u);
  Node* add = pool->output()->uses()[0].user;
  EXPECT_EQ(add->kind(), c10::aten::add);
  Node* relu = graph->outputs()[0]->node();
  EXPECT_EQ(relu->kind(), c10::aten::relu);
  EXPECT_EQ(relu->input(0), add->output());
  const std::vector<int64_t> pooled = {2, 4, 4, 4};
  for (Node* n : {pool, add, relu}) {
    EXPECT_EQ(*n->output()->type()->expect<c10::TensorType>()->sizes().concrete_sizes(), pooled);
  }
  EXPECT_EQ(testing_helpers::countKind(graph->block(), c10::aten::add), 1u);
}

TEST(MaxPoolFirst, ANonConstantOrFullSizeOperandKeepsTheOrder) {
  for (auto graph : {stem("%b", /*constant_bias=*/false), stem("%c")}) {
    poolBeforeMonotoneOps(graph);
    Node* pool = only(graph, c10::aten::max_pool2d);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pool->input(0)->node()->kind(), c10::aten::relu);
    EXPECT_EQ(graph->outputs()[0], pool->output());
  }
}

TEST(MaxPoolFirst, ValuesThatNeedGradientsKeepTheOrder) {
  auto graph = stem("%b", /*constant_bias=*/true, "$G");
  poolBeforeMonotoneOps(graph);
  Node* pool = only(graph, c10::aten::max_pool2d);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->input(0)->node()->kind(), c10::aten::relu);
}

}  // namespace
}  // namespace fuser
