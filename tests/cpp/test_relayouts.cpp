// gatherRelayouts (csrc/passes/relayouts.cpp): which chains of element moves become one
// fuser::Relayout, and aliasZeroPads (csrc/passes/zero_pads.cpp): which pads of zero may
// hand back their input.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

// Swin's shifted-window split; $BETWEEN lies between the roll's `if` and the view, and
// $MOVE is the branch's op.
std::string windowSplit(const std::string& between,
                        const std::string& move = "aten::roll(%x, %by, %dims)") {
  std::string ir = R"IR(
graph(%x : Float(1, 14, 14, 8, strides=[1568, 112, 8, 1], requires_grad=0, device=cpu),
      %shift : int[], %ws : int, %on : bool):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %dims : int[] = prim::Constant[value=[1, 2]]()
  %order : int[] = prim::Constant[value=[0, 1, 3, 2, 4, 5]]()
  %rolled : Tensor = prim::If(%on)
    block0():
      %a : int = aten::__getitem__(%shift, %0)
      %na : int = aten::neg(%a)
      %b : int = aten::__getitem__(%shift, %1)
      %nb : int = aten::neg(%b)
      %by : int[] = prim::ListConstruct(%na, %nb)
      %r : Tensor = $MOVE
      -> (%r)
    block1():
      -> (%x)
  $BETWEEN
  %n : int = aten::floordiv(%ws, %ws)
  %sizes : int[] = prim::ListConstruct(%1, %ws, %ws, %ws, %ws, %ws)
  %v : Tensor = aten::view(%rolled, %sizes)
  %p : Tensor = aten::permute(%v, %order)
  %flat : int[] = prim::ListConstruct(%n, %ws, %ws)
  %w : Tensor = aten::reshape(%p, %flat)
  return (%w)
)IR";
  return testing_helpers::parseWithTypes(ir, {{"$BETWEEN", between}, {"$MOVE", move}})
      ->toString();
}

std::shared_ptr<torch::jit::Graph> relaidOut(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, {});
  gatherRelayouts(graph);
  graph->lint();
  return graph;
}

TEST(Relayouts, SwinsShiftedWindowSplitIsOneNode) {
  auto graph = relaidOut(windowSplit(""));
  ASSERT_EQ(countKind(graph->block(), relayoutSymbol()), 1u);
  for (c10::Symbol gone : {c10::aten::roll, c10::aten::view, c10::aten::permute,
                           c10::aten::reshape, c10::prim::If}) {
    EXPECT_EQ(countKind(graph->block(), gone), 0u) << gone.toQualString();
  }
  torch::jit::Node* relayout = graph->outputs()[0]->node();
  ASSERT_EQ(relayout->kind(), relayoutSymbol());
  EXPECT_EQ(relayout->input(0), graph->inputs()[0]);  // the moved tensor comes first
  auto subgraph = relayout->g(c10::attr::Subgraph);
  EXPECT_EQ(countKind(subgraph->block(), c10::aten::roll), 1u);
  EXPECT_EQ(countKind(subgraph->block(), c10::aten::reshape), 1u);
}

TEST(Relayouts, AWriteInsideTheChainLeavesOnlyTheRollToGather) {
  // The shift list written after the `if`: the view must not move past it with the roll.
  auto graph = relaidOut(windowSplit("%set : int[] = aten::_set_item(%shift, %0, %0)"));
  EXPECT_EQ(countKind(graph->block(), relayoutSymbol()), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::roll), 0u);  // inside the branch
  EXPECT_EQ(countKind(graph->block(), c10::prim::If), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::reshape), 1u);
}

TEST(Relayouts, ChainsWithoutARollAndValuesReadElsewhereStay) {
  auto graph = relaidOut(windowSplit("", "aten::contiguous(%x, %0)"));
  EXPECT_EQ(countKind(graph->block(), relayoutSymbol()), 0u);

  // The rolled tensor is also read by a product: the roll alone is gathered.
  auto graph2 = relaidOut(R"IR(
graph(%x : Float(6, 4, strides=[4, 1], requires_grad=0, device=cpu), %s : int[]):
  %0 : int[] = prim::Constant[value=[0]]()
  %flat : int[] = prim::Constant[value=[-1]]()
  %r : Tensor = aten::roll(%x, %s, %0)
  %v : Tensor = aten::reshape(%r, %flat)
  %m : Tensor = aten::mm(%r, %x)
  return (%v, %m)
)IR");
  EXPECT_EQ(countKind(graph2->block(), relayoutSymbol()), 1u);
  EXPECT_EQ(countKind(graph2->block(), c10::aten::reshape), 1u);
  EXPECT_EQ(countKind(graph2->block(), c10::aten::roll), 0u);
}

TEST(Relayouts, ReinterpretingViewsAndTensorArgumentsEndAChain) {
  auto graph = relaidOut(R"IR(
graph(%x : Float(6, 4, strides=[4, 1], requires_grad=0, device=cpu), %s : int[], %o : Tensor):
  %0 : int[] = prim::Constant[value=[0]]()
  %d : int = prim::Constant[value=3]()
  %r : Tensor = aten::roll(%x, %s, %0)
  %v : Tensor = aten::view(%r, %d)
  %e : Tensor = aten::expand_as(%v, %o)
  return (%e)
)IR");
  ASSERT_EQ(countKind(graph->block(), relayoutSymbol()), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::view), 1u);  // view(dtype) stays outside
  EXPECT_EQ(countKind(graph->block(), c10::aten::expand_as), 1u);
}

// A pad read by a product, with $AFTER after it and $RET returned.
std::string padded(const std::string& mode, const std::string& after, const std::string& ret) {
  std::string ir = R"IR(
graph(%x : Float(4, 6, strides=[6, 1], requires_grad=0, device=cpu), %w : Tensor, %r : int):
  %0 : int = prim::Constant[value=0]()
  %one : float = prim::Constant[value=1.]()
  %none : NoneType = prim::Constant()
  %mode : str = prim::Constant[value="$MODE"]()
  %pads : int[] = prim::ListConstruct(%0, %r)
  %y : Tensor = aten::pad(%x, %pads, %mode, %none)
  %m : Tensor = aten::mm(%y, %w)
  $AFTER
  return ($RET)
)IR";
  return testing_helpers::parseWithTypes(ir, {{"$MODE", mode}, {"$AFTER", after}, {"$RET", ret}})
      ->toString();
}

size_t aliasedPads(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, {});
  aliasZeroPads(graph);
  graph->lint();
  return countKind(graph->block(), padUnlessZeroSymbol());
}

TEST(ZeroPads, APadReadOnlyInsideTheGraphMayAlias) {
  EXPECT_EQ(aliasedPads(padded("constant", "", "%m")), 1u);
}

TEST(ZeroPads, PadsSomeoneCouldTellApartStay) {
  EXPECT_EQ(aliasedPads(padded("constant", "", "%y")), 0u);  // returned
  EXPECT_EQ(aliasedPads(padded("constant", "%a : Tensor = aten::add_(%x, %one, %one)", "%m")), 0u);
  EXPECT_EQ(aliasedPads(padded("constant", "%a : Tensor = aten::mul_(%y, %one)", "%m")), 0u);
  EXPECT_EQ(aliasedPads(padded("reflect", "", "%m")), 0u);  // other modes check the rank
}

}  // namespace
}  // namespace fuser
