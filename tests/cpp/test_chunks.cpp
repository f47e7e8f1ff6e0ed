// Graph tests of csrc/passes/chunks.cpp (and the chunk handling of partition.cpp) and of
// csrc/passes/shapes.cpp: small IR in, exact shape of the rewritten IR out; where the
// rewrite changes what runs, the result is compared with eager.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/testing/file_check.h>
#include <torch/torch.h>

#include <string>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/groups.h"
#include "passes/pipeline.h"
#include "passes/shapes.h"
#include "stats.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::testing::FileCheck;

// $W: a 4x8 matrix, $C: one of its 4x4 column halves, $B: an 8-vector, $M: 8x8.
GraphPtr parse(const std::string& ir) {
  return testing_helpers::parseWithTypes(ir, {
      {"$W", "Float(4, 8, strides=[8, 1], requires_grad=0, device=cpu)"},
      {"$C", "Float(4, 4, strides=[8, 1], requires_grad=0, device=cpu)"},
      {"$B", "Float(8, strides=[1], requires_grad=0, device=cpu)"},
      {"$M", "Float(8, 8, strides=[8, 1], requires_grad=0, device=cpu)"},
  });
}

// The pipeline up to (not including) the guards.
void fuseUnguarded(GraphPtr& graph) {
  prepareGraph(graph);
  formFusionGroups(graph);
  expandUnfusedChunks(graph);
  buildShapeExpressions(graph);
}

using testing_helpers::countKind;

std::vector<at::Tensor> run(const GraphPtr& graph, std::vector<at::Tensor> inputs) {
  torch::jit::Code code(graph, "test");
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  torch::jit::InterpreterState(code).run(stack);
  std::vector<at::Tensor> out;
  for (const auto& v : stack) out.push_back(v.toTensor());
  return out;
}

class ChunksTest : public ::testing::Test {
 protected:
  void SetUp() override { restore(); }
  void TearDown() override { restore(); }
  static void restore() {
    config().arg_limit = 128;
    config().keep_singletons = false;
  }
};

// The chunk of an mm result (not fusible) is read only by one group: it joins it, and the
// group takes the unchunked matrix.
TEST_F(ChunksTest, ChunkOfUnfusedValueJoinsItsConsumerGroup) {
  auto graph = parse(R"IR(
graph(%x : $W, %m : $M):
  %y : $W = aten::mm(%x, %m)
  %a : $C, %b : $C = prim::ConstantChunk[chunks=2, dim=1](%y)
  %s : $C = aten::sigmoid(%a)
  %t : $C = aten::tanh(%b)
  %r : $C = aten::mul(%s, %t)
  return (%r))IR");
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1) << *graph;
  EXPECT_EQ(countKind(graph->block(), c10::prim::ConstantChunk), 0) << *graph;
  ASSERT_EQ(groups[0]->inputs().size(), 1);
  EXPECT_EQ(groups[0]->input(0)->node()->kind(), c10::aten::mm);
  FileCheck()
      .check("prim::ConstantChunk[chunks=2, dim=1]")
      ->check("aten::sigmoid")
      ->check("aten::tanh")
      ->check("aten::mul")
      ->run(*groups[0]->g(c10::attr::Subgraph));
}

// A chunk also read outside the group stays outside: the kernel cannot output a view.
TEST_F(ChunksTest, ChunkReadOutsideTheGroupStaysOutside) {
  auto graph = parse(R"IR(
graph(%x : $W, %m : $M):
  %y : $W = aten::mm(%x, %m)
  %a : $C, %b : $C = prim::ConstantChunk[chunks=2, dim=1](%y)
  %s : $C = aten::sigmoid(%a)
  %t : $C = aten::tanh(%b)
  %r : $C = aten::mul(%s, %t)
  return (%r, %b))IR");
  fuseUnguarded(graph);
  EXPECT_EQ(countKind(graph->block(), c10::prim::ConstantChunk), 1) << *graph;
}

const char* kChunkOfBiasAdd = R"IR(
graph(%x : $W, %m : $M, %bias : $B):
  %one : int = prim::Constant[value=1]()
  %y : $W = aten::mm(%x, %m)
  %z : $W = aten::add(%y, %bias, %one)
  %a : $C, %b : $C = prim::ConstantChunk[chunks=2, dim=1](%z)
  %s : $C = aten::sigmoid(%a)
  %t : $C = aten::tanh(%b)
  %r : $C = aten::mul(%s, %t)
  return (%r))IR";

// chunk(y + bias) -> BroadcastingChunk(y, bias) and one add per chunk, all in the group.
TEST_F(ChunksTest, ChunkMovesAboveBroadcastingProducer) {
  auto graph = parse(kChunkOfBiasAdd);
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1) << *graph;
  EXPECT_EQ(countKind(graph->block(), c10::aten::add), 0) << *graph;
  EXPECT_EQ(groups[0]->inputs().size(), 2);  // %y and %bias, never the sum
  EXPECT_EQ(groups[0]->outputs().size(), 1);
  auto subgraph = groups[0]->g(c10::attr::Subgraph);
  EXPECT_EQ(countKind(subgraph->block(), c10::aten::add), 2);
  FileCheck()
      .check("prim::BroadcastingChunk[chunks=2, dim=1]")
      ->check("aten::add")
      ->check("aten::add")
      ->check("aten::mul")
      ->run(*subgraph);
}

// The chunks of the bias are typed as what they are, views of the bias broadcast along
// the rows (stride 0), not copies laid out like the product's chunks: where the chunk is
// expanded outside a group (gMLP's gate: its halves feed two groups), the groups reading
// them were planned for a layout they never met and ran interpreted.
TEST_F(ChunksTest, BroadcastChunksOfABiasKeepItsStrides) {
  auto graph = parse(R"IR(
graph(%x : $W, %m : $M, %bias : $B):
  %one : int = prim::Constant[value=1]()
  %y : $W = aten::mm(%x, %m)
  %z : $W = aten::add(%y, %bias, %one)
  %a : $C, %b : $C = prim::ConstantChunk[chunks=2, dim=1](%z)
  %s : $C = aten::sigmoid(%a)
  %t : $C = aten::tanh(%b)
  %u : $C = aten::mm(%s, %x)
  %v : $C = aten::mul(%t, %t)
  return (%u, %v))IR");
  prepareGraph(graph);
  formFusionGroups(graph);
  Node* chunk = nullptr;
  for (Node* n : graph->nodes()) {
    if (n->kind() == c10::prim::BroadcastingChunk) chunk = n;
  }
  ASSERT_NE(chunk, nullptr) << *graph;  // its halves feed two groups: it stays outside
  ASSERT_EQ(chunk->inputs().size(), 2u);
  for (size_t j = 0; j < 2; ++j) {
    const bool bias = chunk->input(j)->type()->expectRef<c10::TensorType>().dim() == 1u;
    for (size_t c = 0; c < 2; ++c) {
      auto type = chunk->output(j * 2 + c)->type()->expect<c10::TensorType>();
      EXPECT_EQ(type->sizes().concrete_sizes(), std::vector<int64_t>({4, 4}));
      EXPECT_EQ(type->strides().concrete_sizes(),
                bias ? std::vector<int64_t>({0, 1}) : std::vector<int64_t>({8, 1}));
    }
  }
  expandUnfusedChunks(graph);
  auto x = torch::randn({4, 8}), m = torch::randn({8, 8}), bias = torch::randn({8});
  auto halves = (torch::mm(x, m) + bias).chunk(2, 1);
  auto got = run(graph, {x, m, bias});
  EXPECT_TRUE(torch::allclose(got[0], torch::mm(torch::sigmoid(halves[0]), x)));
  EXPECT_TRUE(torch::allclose(got[1], torch::tanh(halves[1]) * torch::tanh(halves[1])));
}

// The same graph, guarded and run: the kernel reads the bias chunks through stride-0
// views and matches eager.
TEST_F(ChunksTest, BroadcastingChunkInsideGroupMatchesEager) {
  auto graph = parse(kChunkOfBiasAdd);
  fuseGraph(graph);
  ASSERT_EQ(collectFusionGroups(graph->block()).size(), 1) << *graph;
  auto x = torch::randn({4, 8}), m = torch::randn({8, 8}), bias = torch::randn({8});
  auto halves = (torch::mm(x, m) + bias).chunk(2, 1);
  auto expected = torch::sigmoid(halves[0]) * torch::tanh(halves[1]);
  const int64_t launches = stats().kernel_launches;
  EXPECT_TRUE(torch::allclose(run(graph, {x, m, bias})[0], expected));
  EXPECT_EQ(stats().kernel_launches, launches + 1);
}

// Its consumer (mm) is not fusible, so the BroadcastingChunk stays outside every group
// and must become what the interpreter runs.
TEST_F(ChunksTest, BroadcastingChunkLeftOutsideIsExpanded) {
  auto graph = parse(R"IR(
graph(%y : $W, %bias : $B, %m : $M):
  %a : $C, %b : $C, %c : $C, %d : $C = prim::BroadcastingChunk[chunks=2, dim=1](%y, %bias)
  %r : $C = aten::mm(%a, %d)
  return (%r))IR");
  fuseGraph(graph);
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastingChunk), 0);
  FileCheck()
      .check("aten::broadcast_tensors")
      ->check("prim::ListUnpack")
      ->check_count("prim::ConstantChunk[chunks=2, dim=1]", 2)
      ->run(*graph);
  auto y = torch::randn({4, 8}), bias = torch::randn({8}), m = torch::randn({8, 8});
  auto expected = torch::mm(y.chunk(2, 1)[0], bias.expand({4, 8}).chunk(2, 1)[1]);
  EXPECT_TRUE(torch::allclose(run(graph, {y, bias, m})[0], expected));
}

// %d is kept only for its size: the group stops writing it, and the size is computed
// from the inputs' sizes.
TEST_F(ChunksTest, SizeOnlyOutputLeavesTheGroup) {
  auto graph = parse(R"IR(
graph(%a : $W, %b : $B):
  %d : $W = aten::mul(%a, %b)
  %e : $W = aten::tanh(%d)
  %s : int[] = aten::size(%d)
  return (%e, %s))IR");
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(groups[0]->outputs().size(), 1) << *graph;
  EXPECT_EQ(groups[0]->g(c10::attr::Subgraph)->outputs().size(), 1);
  FileCheck()
      .check("fuser::FusionGroup")
      ->check("aten::size(%a)")
      ->check("aten::size(%b)")
      ->check("prim::BroadcastSizes")
      ->check("return")
      ->run(*graph);
}

// A group whose every output is read only for its size keeps them: it is the only place
// its ops run, and a call whose dtypes make one raise in eager must reach its guard.
TEST_F(ChunksTest, AGroupReadOnlyForSizesKeepsItsOutputs) {
  auto graph = parse(R"IR(
graph(%a : $W, %b : $B):
  %d : $W = aten::mul(%a, %b)
  %e : $W = aten::tanh(%d)
  %s : int[] = aten::size(%e)
  return (%s))IR");
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(groups[0]->outputs().size(), 1) << *graph;
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 0) << *graph;
}

// Sizes of chunks come from prim::ChunkSizes of the chunked input's size.
TEST_F(ChunksTest, SizeOfAChunkResultUsesChunkSizes) {
  auto graph = parse(R"IR(
graph(%x : $W, %m : $M):
  %y : $W = aten::mm(%x, %m)
  %a : $C, %b : $C = prim::ConstantChunk[chunks=2, dim=1](%y)
  %s : $C = aten::sigmoid(%a)
  %t : $C = aten::tanh(%b)
  %r : $C = aten::mul(%s, %t)
  %n : int[] = aten::size(%t)
  return (%r, %n))IR");
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(groups[0]->outputs().size(), 1) << *graph;
  FileCheck()
      .check("fuser::FusionGroup")
      ->check("aten::size(")
      ->check("prim::ChunkSizes[chunks=2, dim=1]")
      ->run(*graph);
  // The last chunk's size, of the chunked product.
  Node* chunk_sizes = graph->outputs()[1]->node();
  ASSERT_EQ(chunk_sizes->kind(), c10::prim::ChunkSizes);
  EXPECT_EQ(graph->outputs()[1]->offset(), 1);
  EXPECT_EQ(chunk_sizes->input()->node()->input()->node()->kind(), c10::aten::mm);
}

// A size read with a dimension is an int, not a shape expression: the output stays.
TEST_F(ChunksTest, SizeOfOneDimensionKeepsTheOutput) {
  auto graph = parse(R"IR(
graph(%a : $W, %b : $W):
  %zero : int = prim::Constant[value=0]()
  %d : $W = aten::mul(%a, %b)
  %e : $W = aten::tanh(%d)
  %s : int = aten::size(%d, %zero)
  return (%e, %s))IR");
  fuseUnguarded(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(groups[0]->outputs().size(), 2);
}

TEST_F(ChunksTest, PeepholeFoldsBroadcastSizes) {
  auto graph = parse(R"IR(
graph(%a : $W, %b : $B, %c : $W):
  %sa : int[] = aten::size(%a)
  %sb : int[] = aten::size(%b)
  %sc : int[] = aten::size(%c)
  %one : int[] = prim::BroadcastSizes(%sa)
  %same : int[] = prim::BroadcastSizes(%sb, %sb)
  %inner : int[] = prim::BroadcastSizes(%sa, %sb)
  %outer : int[] = prim::BroadcastSizes(%inner, %sc, %sa)
  return (%one, %same, %outer))IR");
  simplifyShapeExpressions(graph->block());
  EXPECT_EQ(countKind(graph->block(), c10::prim::BroadcastSizes), 1) << *graph;
  EXPECT_EQ(graph->outputs()[0]->node()->kind(), c10::aten::size);
  EXPECT_EQ(graph->outputs()[1]->node()->kind(), c10::aten::size);
  Node* outer = graph->outputs()[2]->node();
  ASSERT_EQ(outer->kind(), c10::prim::BroadcastSizes);
  EXPECT_EQ(outer->inputs().size(), 3);  // %sa, %sb, %sc once each
}

}  // namespace
}  // namespace fuser
