// foldLoneBiasAdds (csrc/passes/lone_bias_adds.cpp): which mm + bias add pairs become one
// addmm again, decided from profiled types (no GPU needed: the graphs are only typed as
// CUDA).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <optional>
#include <string>
#include <vector>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

struct Case {
  std::string product = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cuda:0)";
  std::string bias = "Float(6, strides=[1], requires_grad=0, device=cuda:0)";
  std::string sum = "Float(8, 6, strides=[6, 1], requires_grad=0, device=cuda:0)";
  std::string add = "aten::add(%b, %p, %alpha)";
  std::string alpha = "1";
  std::string second_use = "";  // another node reading the product
};

struct Folded {
  std::string bias, mat1, mat2;  // addmm's operands, by debug name
  double beta, alpha;
};

// The addmm the pass made of the case, or nullopt where it left mm and add.
std::optional<Folded> fold(const Case& c) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%a : Float(8, 5, strides=[5, 1], requires_grad=0, device=cuda:0),
      %w : Float(5, 6, strides=[6, 1], requires_grad=0, device=cuda:0),
      %b : $BIAS):
  %alpha : int = prim::Constant[value=$ALPHA]()
  %p : $PRODUCT = aten::mm(%a, %w)
  %s : $SUM = $ADD
  %sizes : int[] = prim::Constant[value=[2, 4, 6]]()
  %v : Tensor = aten::view(%s, %sizes)
  $SECOND
  return (%v)
)IR",
                                               {{"$PRODUCT", c.product},
                                                {"$BIAS", c.bias},
                                                {"$SUM", c.sum},
                                                {"$ADD", c.add},
                                                {"$ALPHA", c.alpha},
                                                {"$SECOND", c.second_use}},
                                               /*keep_names=*/true);
  foldLoneBiasAdds(graph);
  graph->lint();
  for (const torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::addmm) continue;
    auto type = node->output()->type()->expect<c10::TensorType>();  // the sum's
    EXPECT_EQ(*type->sizes().concrete_sizes(), (std::vector<int64_t>{8, 6}));
    EXPECT_EQ(*type->device(), c10::Device("cuda:0"));
    const torch::jit::Node* view = node->output()->uses().at(0).user;
    EXPECT_EQ(view->kind(), c10::aten::view);
    auto scalar = [&](size_t i) { return torch::jit::toIValue(node->input(i))->toScalar(); };
    return Folded{node->input(0)->debugName(), node->input(1)->debugName(),
                  node->input(2)->debugName(), scalar(3).toDouble(), scalar(4).toDouble()};
  }
  return std::nullopt;
}

TEST(LoneBiasAdds, ABiasAddAfterACudaProductBecomesAddmm) {
  auto folded = fold(Case{});
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->bias, "b");
  EXPECT_EQ(folded->mat1, "a");
  EXPECT_EQ(folded->mat2, "w");
  EXPECT_EQ(folded->beta, 1.0);
  EXPECT_EQ(folded->alpha, 1.0);
}

// add scales its second operand: the product's scale where the product is second, the
// bias's (addmm's beta) where the product comes first.
TEST(LoneBiasAdds, TheAddsScaleGoesToItsOperand) {
  Case scaled_product;
  scaled_product.alpha = "2";
  auto folded = fold(scaled_product);
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->beta, 1.0);
  EXPECT_EQ(folded->alpha, 2.0);
  Case scaled_bias = scaled_product;
  scaled_bias.add = "aten::add(%p, %b, %alpha)";
  folded = fold(scaled_bias);
  ASSERT_TRUE(folded);
  EXPECT_EQ(folded->beta, 2.0);
  EXPECT_EQ(folded->alpha, 1.0);
}

TEST(LoneBiasAdds, LeftWhereAddmmWouldComputeOtherwiseOrNotGain) {
  Case cpu;
  for (std::string* type : {&cpu.product, &cpu.bias, &cpu.sum}) {
    type->replace(type->find("cuda:0"), 6, "cpu");
  }
  EXPECT_FALSE(fold(cpu));  // ATen's CPU addmm copies the bias first: no gain
  Case read_twice;
  read_twice.second_use = "%t : Tensor = aten::relu(%p)";
  EXPECT_FALSE(fold(read_twice));
  Case other_dtype;
  other_dtype.bias = "Double(6, strides=[1], requires_grad=0, device=cuda:0)";
  other_dtype.sum = "Double(8, 6, strides=[6, 1], requires_grad=0, device=cuda:0)";
  EXPECT_FALSE(fold(other_dtype));  // the add promotes; addmm would refuse
  Case broadcast_up;  // the bias makes the sum bigger than the product
  broadcast_up.bias = "Float(3, 8, 6, strides=[48, 6, 1], requires_grad=0, device=cuda:0)";
  broadcast_up.sum = "Float(3, 8, 6, strides=[48, 6, 1], requires_grad=0, device=cuda:0)";
  EXPECT_FALSE(fold(broadcast_up));
  Case untyped;
  untyped.bias = "Tensor";
  EXPECT_FALSE(fold(untyped));
}

}  // namespace
}  // namespace fuser
