// sinkAddsPastViews (csrc/passes/adds_past_views.cpp): which bias adds move past the view
// after them, decided from profiled types (GPT-2's Conv1D: mm -> add(bias) -> view -> tanh).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

struct Case {
  std::string product = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  std::string bias = "Float(6, strides=[1], requires_grad=0, device=cpu)";
  std::string sum = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  std::string viewed = "Float(2, 4, 6, strides=[24, 6, 1], requires_grad=0, device=cpu)";
  std::string sizes = "[2, 4, 6]";
  std::string reader = "aten::tanh(%v)";
  std::string second_use = "";  // another node reading the sum
};

// Whether the add now reads the view (moved past it), after the pass; checks the graph.
bool moved(const Case& c) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%p : $PRODUCT, %b : $BIAS):
  %one : int = prim::Constant[value=1]()
  %sizes : int[] = prim::Constant[value=$SIZES]()
  %s : $SUM = aten::add(%b, %p, %one)
  %v : $VIEWED = aten::view(%s, %sizes)
  %r : $VIEWED = $READER
  $SECOND
  return (%r)
)IR",
                                               {{"$PRODUCT", c.product},
                                                {"$BIAS", c.bias},
                                                {"$SUM", c.sum},
                                                {"$VIEWED", c.viewed},
                                                {"$SIZES", c.sizes},
                                                {"$READER", c.reader},
                                                {"$SECOND", c.second_use}});
  sinkAddsPastViews(graph);
  graph->lint();
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::add) continue;
    const torch::jit::Value* operand = node->input(1);
    if (operand->node()->kind() != c10::aten::view) return false;
    // The bias stays the first operand, the view reads the product, the sum is typed as
    // the view was.
    EXPECT_EQ(node->input(0)->debugName(), "b");
    EXPECT_EQ(operand->node()->input(0)->debugName(), "p");
    EXPECT_EQ(*node->output()->type(), *operand->type());
    EXPECT_TRUE(node->isAfter(operand->node()));
    return true;
  }
  ADD_FAILURE() << "no add left";
  return false;
}

// [B, T, N] -> [B * T, N]: also only leading dims regrouped.
Case flatCase() {
  Case flat;
  flat.product = flat.sum = "Float(2, 4, 6, strides=[24, 6, 1], requires_grad=0, device=cpu)";
  flat.viewed = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  flat.sizes = "[8, 6]";
  return flat;
}

TEST(AddsPastViews, ABiasAddMovesPastAViewOfItsLeadingDims) {
  EXPECT_TRUE(moved(Case{}));
  Case flat = flatCase();
  EXPECT_TRUE(moved(flat));
}

TEST(AddsPastViews, AnOperandsLeadingOnesBroadcastIntoTheViewsDims) {
  // Swin: scores [windows, heads, N, N] + relative position bias [1, heads, N, N], viewed
  // as [B, windows per image, heads, N, N]: the bias spans the trailing three dims.
  Case swin;
  swin.product = swin.sum = "Float(6, 2, 3, 3, strides=[18, 9, 3, 1], requires_grad=0, device=cpu)";
  swin.bias = "Float(1, 2, 3, 3, strides=[18, 9, 3, 1], requires_grad=0, device=cpu)";
  swin.viewed = "Float(3, 2, 2, 3, 3, strides=[36, 18, 9, 3, 1], requires_grad=0, device=cpu)";
  swin.sizes = "[3, 2, 2, 3, 3]";
  EXPECT_TRUE(moved(swin));
  Case fewer = swin;  // a view of fewer dims than the bias: the sum would gain a dim
  fewer.viewed = "Float(12, 3, 3, strides=[9, 3, 1], requires_grad=0, device=cpu)";
  fewer.sizes = "[12, 3, 3]";
  EXPECT_FALSE(moved(fewer));
  Case split = swin;  // a bias spanning all four dims (no leading 1)
  split.bias = "Float(6, 2, 3, 3, strides=[18, 9, 3, 1], requires_grad=0, device=cpu)";
  EXPECT_FALSE(moved(split));
}

TEST(AddsPastViews, LeftWhereTheSumsOrTheGainWouldDiffer) {
  Case heads;  // [8, 6] -> [8, 2, 3]: the view splits the dim the bias spans
  heads.viewed = "Float(8, 2, 3, strides=[6, 3, 1], requires_grad=0, device=cpu)";
  heads.sizes = "[8, 2, 3]";
  EXPECT_FALSE(moved(heads));
  Case promoted;  // a float bias on a half product: the sum is float, the view of p is not
  promoted.product = "Half(8, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  EXPECT_FALSE(moved(promoted));
  Case strided;  // a transposed product: its view would be another op
  strided.product = "Float(8, 6, strides=[1, 8], requires_grad=0, device=cpu)";
  EXPECT_FALSE(moved(strided));
  Case broadcast_up;  // the product is broadcast up by the other operand
  broadcast_up.product = "Float(1, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  broadcast_up.bias = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cpu)";
  EXPECT_FALSE(moved(broadcast_up));
  Case no_join = flatCase();  // nothing fusible reads the view
  no_join.reader = "aten::t(%v)";
  EXPECT_FALSE(moved(no_join));
  Case shared;  // the sum is read elsewhere too
  shared.second_use = "%t : " + shared.sum + " = aten::sigmoid(%s)";
  EXPECT_FALSE(moved(shared));
}

}  // namespace
}  // namespace fuser
