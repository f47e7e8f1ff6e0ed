// Graph tests of passes/gradient_sums.cpp: autodiff's gradient sums, profiled as the
// interpreter's AutogradAdd laid them out (`b + a`), get the strides `aten::add(a, b)`
// gives them at run time, and elementwise values computed from them follow.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>
#include <vector>

#include "ir_test_helpers.h"
#include "passes/groups.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const std::string kRowMajor = "Float(6, 8, strides=[8, 1], requires_grad=0, device=cpu)";
const std::string kTransposed = "Float(6, 8, strides=[1, 6], requires_grad=0, device=cpu)";
const std::string kSummed = "Float(6, 1, strides=[1, 1], requires_grad=0, device=cpu)";

std::vector<int64_t> stridesOf(const Value* v) {
  return *v->type()->expect<c10::TensorType>()->strides().concrete_sizes();
}

Value* outputOf(const GraphPtr& graph, c10::Symbol kind) {
  for (Node* node : graph->nodes()) {
    if (node->kind() == kind) return node->output();
  }
  return nullptr;
}

// A transposed gradient plus a row-major one, summed as specializeAutogradZero writes
// it, then negated and summed to the broadcast size of a [6, 1] operand.
const std::string kBackward = R"IR(
graph(%g : $A, %h : $B, %size : int[]):
  %one : int = prim::Constant[value=1]()
  %sum : $S = aten::add(%g, %h, %one)
  %neg : $S = aten::neg(%sum)
  %r : $R = aten::_grad_sum_to_size(%neg, %size)
  return (%r, %sum))IR";

GraphPtr backward(const std::string& a, const std::string& b, const std::string& sum) {
  return testing_helpers::parseWithTypes(kBackward,
                                         {{"$A", a}, {"$B", b}, {"$S", sum}, {"$R", kSummed}});
}

TEST(GradientSums, ASumProfiledAsBPlusAIsLaidOutAsAPlusB) {
  auto graph = backward(kTransposed, kRowMajor, kRowMajor);
  prepareGraph(graph);
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::add)), (std::vector<int64_t>{1, 6}));
  // The elementwise value computed from it follows; the reduction keeps its profile.
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::neg)), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::_grad_sum_to_size)),
            (std::vector<int64_t>{1, 1}));
}

TEST(GradientSums, ASumProfiledAsAPlusBKeepsItsProfile) {
  auto graph = backward(kRowMajor, kTransposed, kRowMajor);  // a + b is row-major
  prepareGraph(graph);
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::add)), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::neg)), (std::vector<int64_t>{8, 1}));
}

TEST(GradientSums, AProfileThatIsNeitherOrderIsKept) {
  // Both operands transposed: a + b and b + a are transposed; a row-major profile
  // matches no rule the pass knows, and it is not changed.
  auto graph = backward(kTransposed, kTransposed, kRowMajor);
  prepareGraph(graph);
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::add)), (std::vector<int64_t>{8, 1}));
}

// The sum above, then dropout's backward with a transposed mask, and a contiguous copy
// of the sum. Profiled, the sum (`b + a`) was row-major and so were both. The CPU's
// dropout backward multiplies through TensorIterator, the bool mask copied to float
// first (keeping its strides), so it follows the sum, transposed; `contiguous` stays
// row-major, whatever its operand's layout.
const std::string kAfterTheSum = R"IR(
graph(%g : $T, %h : $R, %mask : $M):
  %one : int = prim::Constant[value=1]()
  %scale : float = prim::Constant[value=1.0]()
  %format : int = prim::Constant[value=0]()
  %sum : $R = aten::add(%g, %h, %one)
  %d : $R = aten::native_dropout_backward(%sum, %mask, %scale)
  %c : $R = aten::contiguous(%sum, %format)
  return (%d, %c))IR";

TEST(GradientSums, ValuesComputedFromARelaidSumFollowEagersRuleForTheirOp) {
  auto graph = testing_helpers::parseWithTypes(
      kAfterTheSum,
      {{"$T", kTransposed},
       {"$R", kRowMajor},
       {"$M", "Bool(6, 8, strides=[1, 6], requires_grad=0, device=cpu)"}});
  prepareGraph(graph);
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::add)), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::native_dropout_backward)),
            (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(stridesOf(outputOf(graph, c10::aten::contiguous)), (std::vector<int64_t>{8, 1}));
}

TEST(GradientSums, TheSumOverTransposedRowsStaysOutOfRowGroups) {
  // Profiled row-major, its rows (the last dim) would be summed by a row group; at run
  // time they lie apart in memory and such a group would run interpreted at every call.
  auto graph = backward(kTransposed, kRowMajor, kRowMajor);
  fuseGraph(graph);
  EXPECT_EQ(testing_helpers::countKind(graph->block(), c10::aten::_grad_sum_to_size), 1);
  for (Node* group : collectFusionGroups(graph->block())) {
    EXPECT_EQ(testing_helpers::countKind(group->g(c10::attr::Subgraph)->block(),
                                         c10::aten::_grad_sum_to_size),
              0);
  }
}

}  // namespace
}  // namespace fuser
