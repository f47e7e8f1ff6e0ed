// runSoftmaxBeforeViews (csrc/passes/softmax_before_views.cpp): which softmaxes over the
// last dim of a view run before it, decided from profiled types (Swin's add -> view ->
// softmax).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

struct Case {
  std::string sum = "Float(2, 3, 4, 5, strides=[60, 20, 5, 1], requires_grad=0, device=cpu)";
  std::string viewed = "Float(6, 4, 5, strides=[20, 5, 1], requires_grad=0, device=cpu)";
  std::string sizes = "[6, 4, 5]";
  std::string op = "aten::softmax";
  std::string dim = "-1";
  std::string producer = "aten::add(%x, %y, %one)";
  std::string second_use = "";  // another node reading the view
};

// Whether the softmax now reads the sum and the view its result, after the pass.
bool moved(const Case& c) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : $SUM, %y : $SUM):
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %dim : int = prim::Constant[value=$DIM]()
  %sizes : int[] = prim::Constant[value=$SIZES]()
  %s : $SUM = $PRODUCER
  %v : $VIEWED = aten::view(%s, %sizes)
  %r : $VIEWED = $OP(%v, %dim, %none)
  $SECOND
  return (%r)
)IR",
                                               {{"$SUM", c.sum},
                                                {"$VIEWED", c.viewed},
                                                {"$SIZES", c.sizes},
                                                {"$OP", c.op},
                                                {"$DIM", c.dim},
                                                {"$PRODUCER", c.producer},
                                                {"$SECOND", c.second_use}});
  runSoftmaxBeforeViews(graph);
  graph->lint();
  const torch::jit::Node* returned = graph->outputs()[0]->node();
  if (returned->kind() != c10::aten::view) return false;
  const torch::jit::Node* softmax = returned->input(0)->node();
  EXPECT_EQ(softmax->kind().toQualString(), c.op);
  EXPECT_EQ(softmax->input(0)->node()->kind().toQualString(),
            c.producer.substr(0, c.producer.find('(')));
  // Over the sum's last dim, typed as the sum; the view keeps the result's type.
  EXPECT_EQ(torch::jit::constant_as<int64_t>(softmax->input(1)), 3);
  EXPECT_EQ(*softmax->output()->type(), *softmax->input(0)->type());
  EXPECT_EQ(graph->outputs()[0]->type()->expect<c10::TensorType>()->sizes().concrete_sizes(),
            (std::vector<int64_t>{6, 4, 5}));
  return true;
}

TEST(SoftmaxBeforeViews, ASoftmaxOverTheLastDimRunsBeforeTheView) {
  EXPECT_TRUE(moved(Case{}));
  Case log = Case{};
  log.op = "aten::log_softmax";
  log.dim = "2";  // the view's last dim, counted from the front
  EXPECT_TRUE(moved(log));
}

TEST(SoftmaxBeforeViews, LeftWhereTheRowsOrTheGainWouldDiffer) {
  Case other_dim;  // over a dim the view regroups
  other_dim.dim = "0";
  EXPECT_FALSE(moved(other_dim));
  Case new_rows;  // the view splits the last dim: other rows
  new_rows.viewed = "Float(2, 3, 4, 5, 1, strides=[60, 20, 5, 1, 1], requires_grad=0, device=cpu)";
  new_rows.sizes = "[2, 3, 4, 5, 1]";
  EXPECT_FALSE(moved(new_rows));
  Case strided;  // a transposed sum
  strided.sum = "Float(2, 3, 4, 5, strides=[60, 20, 1, 4], requires_grad=0, device=cpu)";
  EXPECT_FALSE(moved(strided));
  Case no_join;  // nothing fusible computes the sum
  no_join.producer = "aten::matmul(%x, %y)";
  no_join.sum = "Float(2, 3, 5, 5, strides=[75, 25, 5, 1], requires_grad=0, device=cpu)";
  no_join.viewed = "Float(6, 5, 5, strides=[25, 5, 1], requires_grad=0, device=cpu)";
  no_join.sizes = "[6, 5, 5]";
  EXPECT_FALSE(moved(no_join));
  Case shared;  // the view is read elsewhere too
  shared.second_use = "%t : " + shared.viewed + " = aten::sigmoid(%v)";
  EXPECT_FALSE(moved(shared));
}

}  // namespace
}  // namespace fuser
