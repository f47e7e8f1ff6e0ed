// moveOpsIntoBranches (csrc/passes/into_branches.cpp): which fusible ops beside an `if`
// move into its branches.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

const std::string kT = "Float(2, 4, strides=[4, 1], requires_grad=0, device=cpu)";

// %s = x * x (or `product`, which makes %s); if c: %s + m else %s; then $AFTER (reading
// %r), with $ALSO after the `if`.
std::shared_ptr<torch::jit::Graph> branchGraph(const std::string& after, const std::string& also,
                                               const std::string& returned,
                                               const std::string& product = "%s : $T = aten::mul(%x, %x)") {
  return testing_helpers::parseWithTypes(R"IR(
graph(%x : $T, %m : $T, %c : bool):
  %1 : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %last : int = prim::Constant[value=-1]()
  $PRODUCT
  %r : $T = prim::If(%c)
    block0():
      %a : $T = aten::add(%s, %m, %1)
      -> (%a)
    block1():
      -> (%s)
  $ALSO
  $AFTER
  return ($RETURNED)
)IR",
                                         {{"$AFTER", after}, {"$ALSO", also},
                                          {"$RETURNED", returned}, {"$PRODUCT", product},
                                          {"$T", kT}});
}

const std::string kSoftmax = "%y : $T = aten::softmax(%r, %last, %none)";

torch::jit::Node* theIf(const std::shared_ptr<torch::jit::Graph>& graph) {
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() == c10::prim::If) return node;
  }
  return nullptr;
}

TEST(IntoBranches, TheSoftmaxAfterAndTheProductBeforeRunInEachBranch) {
  auto graph = branchGraph(kSoftmax, "", "%y");
  moveOpsIntoBranches(graph);
  graph->lint();
  torch::jit::Node* branch = theIf(graph);
  ASSERT_NE(branch, nullptr);
  for (torch::jit::Block* block : branch->blocks()) {
    EXPECT_EQ(countKind(block, c10::aten::softmax), 1u) << *graph;
    EXPECT_EQ(countKind(block, c10::aten::mul), 1u) << *graph;
    EXPECT_EQ(block->outputs()[0]->node()->kind(), c10::aten::softmax);
  }
  EXPECT_EQ(countKind(graph->block(), c10::aten::softmax), 2u);  // none left outside
  EXPECT_EQ(countKind(graph->block(), c10::aten::mul), 2u);
  EXPECT_EQ(graph->outputs()[0], branch->output());
  EXPECT_EQ(*branch->output()->type()->expect<c10::TensorType>()->dim(), 2u);
}

TEST(IntoBranches, OpsReadElsewhereOrReadingLaterValuesStay) {
  // The product is also read after the `if`: it stays before it.
  auto read_after = branchGraph(kSoftmax, "%z : $T = aten::neg(%s)", "%y, %z");
  moveOpsIntoBranches(read_after);
  EXPECT_EQ(countKind(theIf(read_after)->blocks()[0], c10::aten::mul), 0u) << *read_after;
  EXPECT_EQ(countKind(theIf(read_after)->blocks()[0], c10::aten::softmax), 1u);

  // The add after reads a value made after the `if`: it stays after it.
  auto later = branchGraph("%y : $T = aten::add(%r, %late, %1)",
                           "%late : $T = aten::neg(%x)", "%y");
  moveOpsIntoBranches(later);
  EXPECT_EQ(countKind(theIf(later)->blocks()[0], c10::aten::add), 1u) << *later;  // the mask's

  // The result is read twice: the softmax stays.
  auto twice = branchGraph(kSoftmax, "", "%y, %r");
  moveOpsIntoBranches(twice);
  EXPECT_EQ(countKind(theIf(twice)->blocks()[0], c10::aten::softmax), 0u) << *twice;
}

TEST(IntoBranches, AProductAFusibleOpMakesStaysWithIt) {
  auto graph = branchGraph("", "", "%r",
                           "%e : $T = aten::exp(%x)\n  %s : $T = aten::mul(%e, %x)");
  moveOpsIntoBranches(graph);
  EXPECT_EQ(countKind(theIf(graph)->blocks()[0], c10::aten::mul), 0u) << *graph;
}

TEST(IntoBranches, AResultOfAnotherProfiledTypeKeepsTheOpAfterTheIf) {
  const std::string ir = R"IR(
graph(%x : $T, %d : $OTHER, %c : bool):
  %none : NoneType = prim::Constant()
  %last : int = prim::Constant[value=-1]()
  %e : $T = aten::exp(%x)
  %r : $T = prim::If(%c)
    block0():
      -> (%e)
    block1():
      %u : $OTHER = aten::neg(%d)
      -> (%u)
  %y : $T = aten::softmax(%r, %last, %none)
  return (%y)
)IR";
  // The other branch returns float64 where profiling saw float32: the softmax stays.
  auto other_dtype = testing_helpers::parseWithTypes(
      ir, {{"$OTHER", "Double(2, 4, strides=[4, 1], requires_grad=0, device=cpu)"}, {"$T", kT}});
  moveOpsIntoBranches(other_dtype);
  EXPECT_EQ(countKind(theIf(other_dtype)->blocks()[1], c10::aten::softmax), 0u) << *other_dtype;

  // A branch profiling never ran: its copy has no profiled type, the other keeps it.
  auto unprofiled = testing_helpers::parseWithTypes(ir, {{"$OTHER", "Tensor"}, {"$T", kT}});
  moveOpsIntoBranches(unprofiled);
  torch::jit::Node* branch = theIf(unprofiled);
  ASSERT_EQ(countKind(branch->blocks()[1], c10::aten::softmax), 1u) << *unprofiled;
  auto ran = branch->blocks()[0]->outputs()[0]->type()->expect<c10::TensorType>();
  auto never_ran = branch->blocks()[1]->outputs()[0]->type()->expect<c10::TensorType>();
  EXPECT_TRUE(ran->isComplete());
  EXPECT_FALSE(never_ran->scalarType().has_value());
}

}  // namespace
}  // namespace fuser
