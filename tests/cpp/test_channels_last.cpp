// Graph tests of passes/channels_last.cpp: which convolutions run channels-last, which
// readers read restored values. CPU graphs, with the pass enabled for them as
// FUSER_CHANNELS_LAST=all does.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <vector>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

const testing_helpers::TypeNames kTypes = {
    {"$X", "Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu)"},
    {"$P", "Float(2, 4, 1, 1, strides=[4, 1, 1, 1], requires_grad=0, device=cpu)"},
    {"$F", "Float(2, 4, strides=[4, 1], requires_grad=0, device=cpu)"},
};

// Two 3x3 convolutions and a 1x1 one (weights %w0, %w1, %w2, made constants), ReLUs,
// then `tail` reading %c (the last convolution's result) and returning %r; `extra`: the
// tail's own 1x1 convolutions' weights (%w3, ...), [4, 4, 1, 1] each.
GraphPtr network(const std::string& tail, int extra = 0) {
  std::string params;
  for (int i = 0; i < extra; ++i) params += ", %w" + std::to_string(3 + i) + " : Tensor";
  const std::string ir = R"IR(
graph(%x : $X, %w0 : Tensor, %w1 : Tensor, %w2 : Tensor)IR" + params + R"IR():
  %one : int = prim::Constant[value=1]()
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %zeros : int[] = prim::Constant[value=[0, 0]]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::conv2d(%x, %w0, %none, %ones, %ones, %ones, %one)
  %ra : $X = aten::relu(%a)
  %b : $X = aten::conv2d(%ra, %w1, %none, %ones, %ones, %ones, %one)
  %rb : $X = aten::relu(%b)
  %c : $X = aten::conv2d(%rb, %w2, %none, %ones, %zeros, %ones, %one)
)IR" + tail;
  auto graph = testing_helpers::parseWithTypes(ir, kTypes);
  std::vector<std::vector<int64_t>> shapes = {{4, 4, 3, 3}, {4, 4, 3, 3}, {4, 4, 1, 1}};
  shapes.resize(3 + extra, {4, 4, 1, 1});
  torch::jit::WithInsertPoint start(graph->block()->nodes().front());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const at::Tensor w = at::randn(shapes[i]);
    Value* constant = graph->insertConstant(w);
    constant->setType(c10::TensorType::create(w));
    graph->inputs()[1]->replaceAllUsesWith(constant);
    graph->eraseInput(1);
  }
  return graph;
}

// The network's features: its last result pooled and flattened.
const std::string kPooledTail = R"IR(
  %p : $P = aten::adaptive_avg_pool2d(%c, %ones)
  %r : $F = aten::flatten(%p, %one, %one)
  return (%r)
)IR";

class ChannelsLast : public ::testing::Test {
 protected:
  void SetUp() override { config().channels_last_cpu = true; }
  void TearDown() override { config().channels_last_cpu = false; }
};

std::vector<Node*> nodesOf(const GraphPtr& graph, c10::Symbol kind) {
  std::vector<Node*> out;
  for (Node* n : graph->nodes()) {
    if (n->kind() == kind) out.push_back(n);
  }
  return out;
}

bool channelsLastStrides(const at::Tensor& w) {
  return w.strides() == c10::IntArrayRef(c10::get_channels_last_strides_2d(w.sizes()));
}

TEST_F(ChannelsLast, WeightsTurnChannelsLastAndTheFlattenReadsARestoredValue) {
  auto graph = network(kPooledTail);
  runConvolutionsChannelsLast(graph);
  graph->lint();
  for (Node* conv : nodesOf(graph, c10::aten::conv2d)) {
    EXPECT_TRUE(channelsLastStrides(torch::jit::toIValue(conv->input(1))->toTensor()));
    // Region values are typed channels-last: [2, 4, 8, 8] as N, H, W, C.
    auto type = conv->output()->type()->expect<c10::TensorType>();
    EXPECT_EQ(*type->strides().concrete_sizes(), (std::vector<int64_t>{256, 1, 32, 4}));
  }
  auto restores = nodesOf(graph, restoreLayoutSymbol());
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores[0]->input(0)->node()->kind(), c10::aten::adaptive_avg_pool2d);
  EXPECT_EQ(restores[0]->input(1), graph->inputs()[0]);  // eager's layout: the input's
  EXPECT_EQ(restores[0]->output()->uses()[0].user->kind(), c10::aten::flatten);
  // The restored value keeps eager's (profiled) type.
  EXPECT_EQ(*restores[0]->output()->type()->expect<c10::TensorType>()->strides().concrete_sizes(),
            (std::vector<int64_t>{4, 1, 1, 1}));
}

TEST_F(ChannelsLast, MetadataReadersStayAndGraphOutputsAreRestored) {
  auto graph = network(R"IR(
  %s : int[] = aten::size(%c)
  return (%c, %s)
)IR");
  runConvolutionsChannelsLast(graph);
  auto restores = nodesOf(graph, restoreLayoutSymbol());
  ASSERT_EQ(restores.size(), 1u);  // the returned value, not size()'s
  EXPECT_EQ(graph->outputs()[0], restores[0]->output());
  EXPECT_EQ(nodesOf(graph, c10::aten::size)[0]->input(0)->node()->kind(), c10::aten::conv2d);
}

TEST_F(ChannelsLast, PermutesToRowsThatLayerNormsReadStayAndChannelsLastOperandsJoinAdds) {
  // ConvNeXt: %c permuted to NHWC, normalized (a LayerNorm reads through a contiguous
  // copy), permuted back (channels-last in eager too) and added to %c, in either order.
  const std::string tail = R"IR(
  %perm : int[] = prim::Constant[value=[0, 2, 3, 1]]()
  %back : int[] = prim::Constant[value=[0, 3, 1, 2]]()
  %shape : int[] = prim::Constant[value=[4]]()
  %eps : float = prim::Constant[value=1e-6]()
  %cudnn : bool = prim::Constant[value=1]()
  %y : Float(2, 8, 8, 4, strides=[256, 8, 1, 64], requires_grad=0, device=cpu) = aten::permute(%c, %perm)
  %n : Float(2, 8, 8, 4, strides=[256, 32, 4, 1], requires_grad=0, device=cpu) = aten::layer_norm(%y, %shape, %none, %none, %eps, %cudnn)
  %m : Float(2, 4, 8, 8, strides=[256, 1, 32, 4], requires_grad=0, device=cpu) = aten::permute(%n, %back)
  %s : $X = aten::add(%c, %m, %one)
  %t : Float(2, 4, 8, 8, strides=[256, 1, 32, 4], requires_grad=0, device=cpu) = aten::add(%m, %s, %one)
  %u : Float(2, 4, 8, 8, strides=[256, 1, 32, 4], requires_grad=0, device=cpu) = aten::conv2d(%t, %w3, %none, %ones, %zeros, %ones, %one)
  %v : Float(2, 4, 8, 8, strides=[256, 1, 32, 4], requires_grad=0, device=cpu) = aten::conv2d(%u, %w4, %none, %ones, %zeros, %ones, %one)
  %w : Float(2, 4, 8, 8, strides=[256, 1, 32, 4], requires_grad=0, device=cpu) = aten::add(%v, %c, %one)
  %o : $X = aten::add(%x, %w, %one)
  return (%o)
)IR";
  auto graph = network(tail, /*extra=*/2);
  runConvolutionsChannelsLast(graph);
  graph->lint();
  Node* permute = nodesOf(graph, c10::aten::permute)[0];
  EXPECT_EQ(permute->input(0)->node()->kind(), c10::aten::conv2d);  // not restored
  // Typed as it now is: contiguous NHWC rows, which the fuser's LayerNorm reads in place.
  EXPECT_EQ(*permute->output()->type()->expect<c10::TensorType>()->strides().concrete_sizes(),
            (std::vector<int64_t>{256, 32, 4, 1}));
  // %c + %m, %m + %s and %v + %c stay in the region (the first operand sets the
  // layout: %c's; %m's, channels-last in eager too, %m then the reference; %v's, whose
  // reference is %m while %c's is %x); %x + %w, whose first operand is row-major from
  // outside, reads %w restored.
  auto adds = nodesOf(graph, c10::aten::add);
  ASSERT_EQ(adds.size(), 4u);
  EXPECT_EQ(adds[0]->input(0)->node()->kind(), c10::aten::conv2d);
  EXPECT_EQ(adds[1]->input(1), adds[0]->output());
  EXPECT_EQ(adds[1]->output()->uses()[0].user->kind(), c10::aten::conv2d);
  EXPECT_EQ(adds[2]->input(1)->node()->kind(), c10::aten::conv2d);  // %c as it is
  Node* restore = adds[3]->input(1)->node();
  ASSERT_EQ(restore->kind(), restoreLayoutSymbol());
  EXPECT_EQ(restore->input(0), adds[2]->output());
  EXPECT_EQ(restore->input(1), adds[1]->input(0));  // eager's layout of %w: %m's
  EXPECT_EQ(graph->outputs()[0], adds[3]->output());
}

TEST_F(ChannelsLast, GraphsWhoseValuesLeaveAtFullSizeStayRowMajor) {
  // Three convolutions, two full-size values leaving: two copies against three
  // convolutions' transforms.
  auto graph = network(R"IR(
  return (%ra, %c)
)IR");
  runConvolutionsChannelsLast(graph);
  EXPECT_TRUE(nodesOf(graph, restoreLayoutSymbol()).empty());
  for (Node* conv : nodesOf(graph, c10::aten::conv2d)) {
    EXPECT_TRUE(torch::jit::toIValue(conv->input(1))->toTensor().is_contiguous());
  }
}

TEST_F(ChannelsLast, SqueezeExciteMeansReadTheRegionAndItsGateKeepsIt) {
  // timm's squeeze-excite: a mean over H and W, a 1x1 convolution of it (a region value
  // of [2, 4, 1, 1], its reference the mean), a sigmoid, the product with the features.
  auto graph = network(R"IR(
  %plane : int[] = prim::Constant[value=[-1, -2]]()
  %keep : bool = prim::Constant[value=1]()
  %m : $P = aten::mean(%c, %plane, %keep, %none)
  %s : $P = aten::conv2d(%m, %w3, %none, %ones, %zeros, %ones, %one)
  %g : $P = aten::sigmoid(%s)
  %r : $X = aten::mul(%c, %g)
  return (%r)
)IR",
                       /*extra=*/1);
  runConvolutionsChannelsLast(graph);
  graph->lint();
  // The mean reads the convolution's channels-last result itself, no copy between.
  Node* mean = nodesOf(graph, c10::aten::mean).at(0);
  EXPECT_EQ(mean->input(0)->node()->kind(), c10::aten::conv2d);
  // The gate's product keeps the features' layout; only the graph's output is restored,
  // to the input's layout.
  Node* mul = nodesOf(graph, c10::aten::mul).at(0);
  EXPECT_EQ(*mul->output()->type()->expect<c10::TensorType>()->strides().concrete_sizes(),
            (std::vector<int64_t>{256, 1, 32, 4}));
  auto restores = nodesOf(graph, restoreLayoutSymbol());
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores[0]->input(0), mul->output());
  EXPECT_EQ(restores[0]->input(1), graph->inputs()[0]);
  EXPECT_EQ(graph->outputs()[0], restores[0]->output());
  EXPECT_EQ(nodesOf(graph, c10::aten::conv2d).size(), 4u);
}

TEST_F(ChannelsLast, ReductionsOverOtherDimsReadRestoredValues) {
  // A mean over C and H is laid out by ATen as its input is: it reads eager's layout.
  auto graph = network(R"IR(
  %dims : int[] = prim::Constant[value=[1, 2]]()
  %keep : bool = prim::Constant[value=1]()
  %r : Float(2, 1, 1, 8, strides=[8, 8, 8, 1], requires_grad=0, device=cpu) = aten::mean(%c, %dims, %keep, %none)
  return (%r)
)IR");
  runConvolutionsChannelsLast(graph);
  Node* mean = nodesOf(graph, c10::aten::mean).at(0);
  EXPECT_EQ(mean->input(0)->node()->kind(), restoreLayoutSymbol());
}

TEST_F(ChannelsLast, CpuGraphsAreLeftAloneByDefault) {
  config().channels_last_cpu = false;
  auto graph = network(kPooledTail);
  runConvolutionsChannelsLast(graph);
  EXPECT_TRUE(nodesOf(graph, restoreLayoutSymbol()).empty());
}

}  // namespace
}  // namespace fuser
