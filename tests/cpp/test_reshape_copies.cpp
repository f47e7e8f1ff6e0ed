// copyReshapeInputs (csrc/passes/reshape_copies.cpp): which reshapes copy their input
// explicitly first.
#include <gtest/gtest.h>

#include <string>

#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using testing_helpers::countKind;

// Attention's head merge: [B, heads, T, d] transposed and reshaped to [B, T, heads * d];
// `in` is the input's type (its device and `grad` the others'), `after` follows and `ret`
// is returned.
std::string headMerge(const std::string& in, const std::string& after = "",
                      const std::string& ret = "%m", const std::string& grad = "0") {
  std::string ir = R"IR(
graph(%a : Tensor, %v : Tensor, %w : Tensor):
  %1 : int = prim::Constant[value=1]()
  %2 : int = prim::Constant[value=2]()
  %sizes : int[] = prim::Constant[value=[2, 5, 32]]()
  %x : $IN = aten::matmul(%a, %v)
  %t : Float(2, 5, 4, 8, strides=[160, 8, 40, 1], requires_grad=$RG, device=$DEV) = aten::transpose(%x, %1, %2)
  %r : Float(2, 5, 32, strides=[160, 32, 1], requires_grad=$RG, device=$DEV) = aten::reshape(%t, %sizes)
  %m : Tensor = aten::matmul(%r, %w)
  $AFTER
  return ($RET)
)IR";
  return testing_helpers::parseWithTypes(
             ir, {{"$IN", in},
                  {"$AFTER", after},
                  {"$RET", ret},
                  {"$RG", grad},
                  {"$DEV", in.find("device=cpu") != std::string::npos ? "cpu" : "cuda:0"}})
      ->toString();
}

const char* kCudaHeads = "Float(2, 4, 5, 8, strides=[160, 40, 8, 1], requires_grad=0, device=cuda:0)";

size_t explicitCopies(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, {});
  copyReshapeInputs(graph);
  graph->lint();
  return countKind(graph->block(), c10::aten::contiguous);
}

TEST(ReshapeCopies, AHeadMergeOnCudaCopiesFirst) {
  auto graph = testing_helpers::parseWithTypes(headMerge(kCudaHeads), {});
  copyReshapeInputs(graph);
  graph->lint();
  ASSERT_EQ(countKind(graph->block(), c10::aten::contiguous), 1u);
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::reshape) continue;
    torch::jit::Node* copy = node->input(0)->node();
    ASSERT_EQ(copy->kind(), c10::aten::contiguous);
    EXPECT_EQ(copy->input(0)->node()->kind(), c10::aten::transpose);
    auto type = copy->output()->type()->expect<c10::TensorType>();
    EXPECT_TRUE(type->strides().concrete_sizes() ==
                std::vector<int64_t>({160, 32, 8, 1}));  // row-major [2, 5, 4, 8]
  }
}

TEST(ReshapeCopies, ViewsOtherDevicesAndObservableCopiesStay) {
  // The input a graph input's transpose: its layout could differ at the next call.
  auto input_graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : Float(2, 4, 5, 8, strides=[160, 40, 8, 1], requires_grad=0, device=cuda:0)):
  %1 : int = prim::Constant[value=1]()
  %2 : int = prim::Constant[value=2]()
  %sizes : int[] = prim::Constant[value=[2, 5, 32]]()
  %t : Float(2, 5, 4, 8, strides=[160, 8, 40, 1], requires_grad=0, device=cuda:0) = aten::transpose(%x, %1, %2)
  %r : Float(2, 5, 32, strides=[160, 32, 1], requires_grad=0, device=cuda:0) = aten::reshape(%t, %sizes)
  %m : Tensor = aten::relu(%r)
  return (%m)
)IR",
                                                     {});
  copyReshapeInputs(input_graph);
  EXPECT_EQ(countKind(input_graph->block(), c10::aten::contiguous), 0u);
  // Already viewable: merging the last two dims of a row-major tensor.
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : Float(2, 4, 5, 8, strides=[160, 40, 8, 1], requires_grad=0, device=cuda:0)):
  %sizes : int[] = prim::Constant[value=[2, 4, 40]]()
  %r : Float(2, 4, 40, strides=[160, 40, 1], requires_grad=0, device=cuda:0) = aten::reshape(%x, %sizes)
  return (%r)
)IR",
                                               {});
  copyReshapeInputs(graph);
  EXPECT_EQ(countKind(graph->block(), c10::aten::contiguous), 0u);
  // The CPU, and gradients.
  EXPECT_EQ(explicitCopies(headMerge(
                "Float(2, 4, 5, 8, strides=[160, 40, 8, 1], requires_grad=0, device=cpu)")),
            0u);
  EXPECT_EQ(explicitCopies(headMerge(
                "Float(2, 4, 5, 8, strides=[160, 40, 8, 1], requires_grad=1, device=cuda:0)", "",
                "%m", "1")),
            0u);
  // Returned, written afterwards, or its input written afterwards.
  EXPECT_EQ(explicitCopies(headMerge(kCudaHeads, "", "%r")), 0u);
  EXPECT_EQ(explicitCopies(headMerge(kCudaHeads, "%z : Tensor = aten::mul_(%r, %2)")), 0u);
  EXPECT_EQ(explicitCopies(headMerge(kCudaHeads, "%z : Tensor = aten::mul_(%x, %2)")), 0u);
  // Put in a list, or handed on by an op that returns it although its schema says new.
  EXPECT_EQ(explicitCopies(headMerge(kCudaHeads, "%l : Tensor[] = prim::ListConstruct(%r)", "%m, %l")), 0u);
  EXPECT_EQ(explicitCopies(headMerge(kCudaHeads, "%c : Tensor = aten::conj_physical(%r)", "%c")), 0u);
}

}  // namespace
}  // namespace fuser
