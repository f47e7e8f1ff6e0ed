// cachePerShapeValues (csrc/passes/per_shape_values.cpp): which pieces of a graph become
// fuser::PerShapeValues, with which keys and values.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

const std::string kX = "Float(1, 14, 14, 8, strides=[1568, 112, 8, 1], requires_grad=0, device=cpu)";

// A mask from x's metadata and a number, then `$AFTER` (which may read %mask), returning
// `$RETURNED`.
std::shared_ptr<torch::jit::Graph> maskGraph(const std::string& after, const std::string& returned) {
  return testing_helpers::parseWithTypes(R"IR(
graph(%x : $X, %n : int):
  %none : NoneType = prim::Constant()
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %2 : int = prim::Constant[value=2]()
  %3 : int = prim::Constant[value=3]()
  %big : float = prim::Constant[value=-100.]()
  %h : int = aten::size(%x, %1)
  %w : int = aten::size(%x, %2)
  %sizes : int[] = prim::ListConstruct(%h, %w)
  %zeros : Tensor = aten::new_zeros(%x, %sizes, %none, %none, %none, %none)
  %rows : Tensor = aten::slice(%zeros, %0, %0, %n, %1)
  %filled : Tensor = fuser::fill_with_scalar_(%rows, %3)
  %a : Tensor = aten::unsqueeze(%zeros, %1)
  %b : Tensor = aten::unsqueeze(%zeros, %2)
  %diff : Tensor = aten::sub(%a, %b, %1)
  %ne : Tensor = aten::ne(%diff, %0)
  %mask : Tensor = aten::masked_fill(%diff, %ne, %big)
  %s : Tensor = aten::sum(%x, %none)
  $AFTER
  return ($RETURNED)
)IR",
                                         {{"$X", kX}, {"$AFTER", after}, {"$RETURNED", returned}});
}

TEST(PerShapeValues, AMaskFromSizesIsOneNodeKeyedOnItsNumbersAndXsMetadata) {
  auto graph = maskGraph("%y : Tensor = aten::add(%mask, %s, %1)", "%y");
  cachePerShapeValues(graph);
  graph->lint();
  ASSERT_EQ(countKind(graph->block(), perShapeValuesSymbol()), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::new_zeros), 0u);
  EXPECT_EQ(countKind(graph->block(), fillWithScalarSymbol()), 0u);
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != perShapeValuesSymbol()) continue;
    // x (for its dtype and device), the list of sizes, the number, in the order read;
    // constants go inside.
    ASSERT_EQ(node->inputs().size(), 3u);
    EXPECT_EQ(node->input(0), graph->inputs()[0]);
    EXPECT_EQ(node->input(1)->node()->kind(), c10::prim::ListConstruct);
    EXPECT_EQ(node->input(2), graph->inputs()[1]);
    ASSERT_EQ(node->outputs().size(), 1u);  // the mask: nothing else is read after
    EXPECT_EQ(node->output()->uses().size(), 1u);
    EXPECT_EQ(node->output()->uses()[0].user->kind(), c10::aten::add);
    auto& subgraph = *node->g(c10::attr::Subgraph);
    EXPECT_EQ(countKind(subgraph.block(), c10::aten::masked_fill), 1u);
    EXPECT_EQ(countKind(subgraph.block(), c10::aten::sum), 0u);  // reads x's data
  }
}

TEST(PerShapeValues, MasksWrittenReturnedOrReadBeforeTheirLastNodeStay) {
  // Written in place afterwards by a node that reads data.
  auto written = maskGraph("%y : Tensor = aten::add_(%mask, %s, %1)", "%y");
  // Returned: the caller may write it.
  auto returned = maskGraph("%y : Tensor = aten::add(%mask, %s, %1)", "%y, %mask");
  // Written by a write made functional that may be made in place again.
  auto functional = maskGraph("%y : Tensor = aten::add[like_self=1](%mask, %s, %1)", "%y");
  for (auto* graph : {&written, &returned}) {
    cachePerShapeValues(*graph);
    EXPECT_EQ(countKind((*graph)->block(), perShapeValuesSymbol()), 0u) << **graph;
  }
  // (like_self is an attribute only prepareGraph sets: set it here the same way.)
  for (torch::jit::Node* node : functional->nodes()) {
    if (node->kind() == c10::aten::add) node->i_(likeSelfAttr(), 1);
  }
  cachePerShapeValues(functional);
  EXPECT_EQ(countKind(functional->block(), perShapeValuesSymbol()), 0u) << *functional;

  // The zeros read by a data node between the piece's nodes: it would read them filled.
  auto early = testing_helpers::parseWithTypes(R"IR(
graph(%x : $X):
  %none : NoneType = prim::Constant()
  %1 : int = prim::Constant[value=1]()
  %3 : int = prim::Constant[value=3]()
  %sizes : int[] = prim::ListConstruct(%1, %1)
  %zeros : Tensor = aten::new_zeros(%x, %sizes, %none, %none, %none, %none)
  %early : Tensor = aten::mul(%zeros, %x)
  %filled : Tensor = fuser::fill_with_scalar_(%zeros, %3)
  %y : Tensor = aten::add(%early, %filled, %1)
  return (%y)
)IR",
                                               {{"$X", kX}});
  cachePerShapeValues(early);
  EXPECT_EQ(countKind(early->block(), perShapeValuesSymbol()), 0u) << *early;
}

TEST(PerShapeValues, RandomAndDataReadingNodesAreNoPart) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : $X):
  %none : NoneType = prim::Constant()
  %1 : int = prim::Constant[value=1]()
  %sizes : int[] = prim::ListConstruct(%1, %1)
  %noise : Tensor = aten::rand(%sizes, %none, %none, %none, %none)
  %data : Tensor = aten::zeros_like(%x, %none, %none, %none, %none, %none)
  %read : Tensor = aten::add(%data, %x, %1)
  %y : Tensor = aten::mul(%noise, %read)
  return (%y)
)IR",
                                               {{"$X", kX}});
  cachePerShapeValues(graph);
  graph->lint();
  // zeros_like reads only x's metadata: cached alone; rand and the add stay.
  EXPECT_EQ(countKind(graph->block(), perShapeValuesSymbol()), 1u) << *graph;
  EXPECT_EQ(countKind(graph->block(), c10::aten::rand), 1u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::add), 1u);
}

}  // namespace
}  // namespace fuser
