// readSizesFromOperands (csrc/passes/operand_sizes.cpp): sizes of elementwise results that
// a fusible op reads are read from the results' operands; other sizes stay.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

const char* kType = "Float(4, 6, 8, strides=[48, 8, 1], requires_grad=0, device=cpu)";

// `y = $PRODUCER`, then `$READER` of the size the graph reads as `%n` (an int).
std::shared_ptr<torch::jit::Graph> rewritten(const std::string& producer,
                                             const std::string& reader) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : $T, %r : $T):
  %one : int = prim::Constant[value=1]()
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %eps : float = prim::Constant[value=1.0000000000000001e-05]()
  %true : bool = prim::Constant[value=1]()
  %dims : int[] = prim::Constant[value=[-1]]()
  %y : $T = $PRODUCER
  %n : int = aten::size(%y, %last)
  $READER
)IR",
                                               {{"$PRODUCER", producer},
                                                {"$READER", reader},
                                                {"$T", kType}});
  readSizesFromOperands(graph);
  graph->lint();
  return graph;
}

const std::string kLayerNorm = R"IR(
  %shape : int[] = prim::ListConstruct(%n)
  %o : $T = aten::layer_norm(%y, %shape, %none, %none, %eps, %true)
  return (%o))IR";

// The nodes of `kind` whose first input is the graph's input number `input`.
size_t readsOf(torch::jit::Graph& graph, c10::Symbol kind, size_t input) {
  size_t n = 0;
  for (torch::jit::Node* node : graph.nodes()) {
    if (node->kind() == kind && node->input(0) == graph.inputs()[input]) ++n;
  }
  return n;
}

TEST(OperandSizes, ABroadcastOfTheOperandsSizesFeedsTheLayerNorm) {
  auto graph = rewritten("aten::add(%x, %r, %one)", kLayerNorm);
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 1u);
  // fuser::size_at: the list's element at the dim, with aten::size's errors.
  EXPECT_EQ(countKind(graph->block(), sizeAtSymbol()), 1u);
  EXPECT_EQ(readsOf(*graph, c10::aten::size, 0), 1u);
  EXPECT_EQ(readsOf(*graph, c10::aten::size, 1), 1u);
  // The sum is read by the layer_norm alone: nothing orders it before the size any more.
  torch::jit::Node* add = nullptr;
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() == c10::aten::add) add = node;
  }
  ASSERT_NE(add, nullptr);
  ASSERT_EQ(add->output()->uses().size(), 1u);
  EXPECT_EQ(add->output()->uses()[0].user->kind(), c10::aten::layer_norm);
}

TEST(OperandSizes, AChainOfOneOperandReadsItsSizeAtTheDim) {
  auto graph = rewritten("aten::relu(%x)", kLayerNorm);
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 0u);
  EXPECT_EQ(countKind(graph->block(), sizeAtSymbol()), 0u);
  EXPECT_EQ(readsOf(*graph, c10::aten::size, 0), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::size), 1u);
}

TEST(OperandSizes, SizesReadForOtherOpsOrOfReductionsStay) {
  // The size is returned: no fusible op reads it.
  auto returned = rewritten("aten::add(%x, %r, %one)", "return (%n)");
  EXPECT_EQ(countKind(returned->block(), c10::prim::BroadcastSizes), 0u);
  EXPECT_EQ(countKind(returned->block(), c10::aten::size), 1u);
  // A reduction's size is not its operands' broadcast.
  auto reduced = testing_helpers::parseWithTypes(R"IR(
graph(%x : $T):
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %eps : float = prim::Constant[value=1.0000000000000001e-05]()
  %last : int = prim::Constant[value=-1]()
  %dims : int[] = prim::Constant[value=[1]]()
  %s : Float(4, 1, 8, strides=[8, 8, 1], requires_grad=0, device=cpu) = aten::sum(%x, %dims, %true, %none)
  %n : int = aten::size(%s, %last)
  %shape : int[] = prim::ListConstruct(%n)
  %o : Float(4, 1, 8, strides=[8, 8, 1], requires_grad=0, device=cpu) = aten::layer_norm(%s, %shape, %none, %none, %eps, %true)
  return (%o)
)IR",
                                                 {{"$T", kType}});
  readSizesFromOperands(reduced);
  EXPECT_EQ(countKind(reduced->block(), c10::aten::size), 1u);
  EXPECT_EQ(reduced->outputs()[0]->node()->input(1)->node()->input(0)->node()->input(0)->node()
                ->kind(),
            c10::aten::sum);
}

TEST(OperandSizes, AResidualChainBuildsEachValuesSizeOnce) {
  // x = x + tanh(x), forty times: every value is read twice on the way back, so a walk
  // without memory would take 2^40 steps (this test would not end). Each size is built
  // once, and equal operand sizes broadcast to themselves.
  std::string ir = "graph(%x0 : $T):\n  %one : int = prim::Constant[value=1]()\n";
  for (int i = 1; i <= 40; ++i) {
    const std::string prev = "%x" + std::to_string(i - 1), t = "%t" + std::to_string(i);
    ir += "  " + t + " : $T = aten::tanh(" + prev + ")\n";
    ir += "  %x" + std::to_string(i) + " : $T = aten::add(" + prev + ", " + t + ", %one)\n";
  }
  ir += R"IR(
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %eps : float = prim::Constant[value=1.0000000000000001e-05]()
  %true : bool = prim::Constant[value=1]()
  %n : int = aten::size(%x40, %last)
  %shape : int[] = prim::ListConstruct(%n)
  %o : $T = aten::layer_norm(%x40, %shape, %none, %none, %eps, %true)
  return (%o)
)IR";
  auto graph = testing_helpers::parseWithTypes(ir, {{"$T", kType}});
  readSizesFromOperands(graph);
  graph->lint();
  EXPECT_EQ(countKind(graph->block(), c10::aten::size), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 0u);
  EXPECT_EQ(readsOf(*graph, c10::aten::size, 0), 1u);
}

TEST(OperandSizes, ValuesWrittenInPlaceKeepTheirOwnSizeRead) {
  // y.t_() changes y's size, not its operands': the size stays y's.
  auto graph = rewritten("aten::add(%x, %r, %one)",
                         "%yt : $T = aten::t_(%y)\n" + kLayerNorm.substr(1));
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 0u);
  EXPECT_EQ(readsOf(*graph, c10::aten::size, 0), 0u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::size), 1u);
}

}  // namespace
}  // namespace fuser
