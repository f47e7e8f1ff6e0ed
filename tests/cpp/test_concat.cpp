// Graph tests of csrc/passes/concat.cpp and the cat handling of partition.cpp: small IR
// in, exact shape of the grouped IR out; refusals checked through FUSER_DUMP=reasons
// (the parser renumbers values: %5 below is the list).
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/testing/file_check.h>

#include <string>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/groups.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::testing::FileCheck;

// $T: a 4x5 float matrix; $R: the cat of two of them along dim 1; $M: a 5x5 matrix.
GraphPtr parse(const std::string& ir) {
  return testing_helpers::parseWithTypes(ir, {
      {"$T", "Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"},
      {"$R", "Float(4, 10, strides=[10, 1], requires_grad=0, device=cpu)"},
      {"$M", "Float(5, 5, strides=[5, 1], requires_grad=0, device=cpu)"},
  });
}

// Forms groups with reasons dumped; returns what was printed.
std::string formGroupsWithReasons(GraphPtr& graph) {
  config().dump_reasons = true;
  testing::internal::CaptureStderr();
  prepareGraph(graph);
  formFusionGroups(graph);
  config().dump_reasons = false;
  return testing::internal::GetCapturedStderr();
}

class ConcatTest : public ::testing::Test {
 protected:
  void SetUp() override { config().fuse_cpu = true; }
  void TearDown() override { config().dump_reasons = false; }
};

TEST_F(ConcatTest, CatOfComputedValuesJoinsTheGroupAsOutput) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %x : $T = aten::mul(%a, %b)
  %y : $T = aten::sub(%a, %b, %one)
  %z : $T = aten::relu(%y)
  %l : Tensor[] = prim::ListConstruct(%x, %z)
  %r : $R = aten::cat(%l, %one)
  return (%r))IR");
  const std::string reasons = formGroupsWithReasons(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1) << reasons;
  EXPECT_EQ(groups[0]->inputs().size(), 2);
  EXPECT_EQ(groups[0]->outputs().size(), 1);
  FileCheck()
      .check("fuser::FusionGroup")
      ->check_not("aten::cat")
      ->check("return")
      ->check("aten::mul")
      ->check("aten::relu")
      ->check_next("prim::ListConstruct")
      ->check("aten::cat")
      ->check_next("return")
      ->run(*graph);
}

TEST_F(ConcatTest, NonConstantDimIsRefused) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T, %d : int):
  %x : $T = aten::mul(%a, %b)
  %y : $T = aten::relu(%x)
  %l : Tensor[] = prim::ListConstruct(%x, %y)
  %r : $R = aten::cat(%l, %d)
  return (%r))IR");
  const std::string reasons = formGroupsWithReasons(graph);
  EXPECT_NE(reasons.find("aten::cat(%5, %d): its dim is not a constant"), std::string::npos)
      << reasons;
  FileCheck().check("fuser::FusionGroup")->check_next("prim::ListConstruct")
      ->check_next("aten::cat")->run(*graph);
}

// A piece the group does not compute (here a matmul's result) is copied by the kernel
// into its slice: one kernel for the relu and the cat.
TEST_F(ConcatTest, PieceOfUnfusibleNodeIsCopiedByTheGroup) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T, %m : $M):
  %x : $T = aten::mul(%a, %b)
  %y : $T = aten::relu(%x)
  %p : $T = aten::mm(%a, %m)
  %l : Tensor[] = prim::ListConstruct(%y, %p)
  %zero : int = prim::Constant[value=0]()
  %r : Float(8, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::cat(%l, %zero)
  return (%r))IR");
  const std::string reasons = formGroupsWithReasons(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1) << reasons;
  FileCheck()
      .check("aten::mm")
      ->check("fuser::FusionGroup")
      ->check("return")
      ->check("aten::relu")
      ->check("aten::contiguous")
      ->check_next("prim::ListConstruct")
      ->check("aten::cat")
      ->run(*graph);
  auto subgraph = groups[0]->g(torch::jit::attr::Subgraph);
  for (const torch::jit::Node* node : subgraph->nodes()) {
    if (node->kind() != c10::prim::ListConstruct) continue;
    EXPECT_EQ(node->input(0)->node()->kind(), c10::aten::relu);
    EXPECT_EQ(node->input(1)->node()->kind(), c10::aten::contiguous);
    EXPECT_EQ(node->input(1)->node()->input(0)->node(), subgraph->param_node());
  }
}

// No piece computed by a fusible node: the cat would be a copy, as ATen's.
TEST_F(ConcatTest, CatOfUncomputedPiecesIsRefused) {
  auto graph = parse(R"IR(
graph(%a : $T, %m : $M):
  %p : $T = aten::mm(%a, %m)
  %l : Tensor[] = prim::ListConstruct(%a, %p)
  %zero : int = prim::Constant[value=0]()
  %r : Float(8, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::cat(%l, %zero)
  return (%r))IR");
  const std::string reasons = formGroupsWithReasons(graph);
  EXPECT_NE(reasons.find("no piece is computed by a fusible node"), std::string::npos)
      << reasons;
  EXPECT_EQ(collectFusionGroups(graph->block()).size(), 0);
}

TEST_F(ConcatTest, CatReadInsideTheGroupIsRefused) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %x : $T = aten::mul(%a, %b)
  %y : $T = aten::sub(%a, %b, %one)
  %l : Tensor[] = prim::ListConstruct(%x, %y)
  %r : $R = aten::cat(%l, %one)
  %s : $R = aten::sigmoid(%r)
  %t : $R = aten::neg(%s)
  return (%t))IR");
  formGroupsWithReasons(graph);
  // Two groups: the cat's (an output of it), then sigmoid + neg reading it.
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 2) << *graph;
  FileCheck()
      .check("fuser::FusionGroup")
      ->check_next("fuser::FusionGroup")
      ->check("aten::cat")
      ->check_next("return")
      ->check("aten::sigmoid")
      ->run(*graph);
}

TEST_F(ConcatTest, PiecesOfDifferentSizesAreRefused) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $M):
  %x : $T = aten::relu(%a)
  %y : $M = aten::relu(%b)
  %l : Tensor[] = prim::ListConstruct(%x, %y)
  %zero : int = prim::Constant[value=0]()
  %r : Float(9, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::cat(%l, %zero)
  return (%r))IR");
  const std::string reasons = formGroupsWithReasons(graph);
  EXPECT_NE(reasons.find("differs in size from the first piece"), std::string::npos) << reasons;
  EXPECT_EQ(collectFusionGroups(graph->block()).size(), 0);
}

}  // namespace
}  // namespace fuser
