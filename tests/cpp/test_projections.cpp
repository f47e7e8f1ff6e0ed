// Graph tests of csrc/passes/projections.cpp: which loops get their per-step input GEMM
// computed once before them, and that the rewritten graph computes what the original did.
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/testing/file_check.h>
#include <torch/torch.h>

#include <string>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::testing::FileCheck;
using testing_helpers::countKind;

// $X: 5 steps of 3x4 rows; $W: a 6x4 weight; $WT its transpose; $R one step's rows;
// $P one step's product (and the loop-carried sum).
GraphPtr parse(const std::string& ir) {
  return testing_helpers::parseWithTypes(ir, {
      {"$X", "Float(5, 3, 4, strides=[12, 4, 1], requires_grad=0, device=cpu)"},
      {"$WT", "Float(4, 6, strides=[1, 4], requires_grad=0, device=cpu)"},
      {"$W", "Float(6, 4, strides=[4, 1], requires_grad=0, device=cpu)"},
      {"$R", "Float(3, 4, strides=[4, 1], requires_grad=0, device=cpu)"},
      {"$P", "Float(3, 6, strides=[6, 1], requires_grad=0, device=cpu)"},
  });
}

// for t in range(x.size(0)): acc = acc + x[t] @ w.t()
const char* kLoopOverAllRows = R"IR(
graph(%x : $X, %w : $W, %h : $P):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %n : int = aten::size(%x, %zero)
  %out : Tensor = prim::Loop(%n, %true, %h)
    block0(%t : int, %acc : Tensor):
      %row : $R = aten::select(%x, %zero, %t)
      %wt : $WT = aten::t(%w)
      %p : $P = aten::matmul(%row, %wt)
      %next : $P = aten::add(%acc, %p, %one)
      -> (%true, %next)
  return (%out)
)IR";

// The same loop as UnrollLoops leaves it with a factor of 2: a main loop of n // 2 trips
// doing steps c and c + 1, then a remainder loop of n - n // 2 * 2 trips.
const char* kUnrolledLoop = R"IR(
graph(%x : $X, %w : $W, %h : $P):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %true : bool = prim::Constant[value=1]()
  %n : int = aten::size(%x, %zero)
  %pairs : int = aten::__round_to_zero_floordiv(%n, %two)
  %paired : int = aten::mul(%pairs, %two)
  %rest : int = aten::sub(%n, %paired)
  %c_end : int, %acc_mid : Tensor = prim::Loop(%pairs, %true, %zero, %h)
    block0(%i : int, %c : int, %acc : Tensor):
      %row0 : $R = aten::select(%x, %zero, %c)
      %wt0 : $WT = aten::t(%w)
      %p0 : $P = aten::matmul(%row0, %wt0)
      %acc1 : $P = aten::add(%acc, %p0, %one)
      %c1 : int = aten::add(%c, %one)
      %row1 : $R = aten::select(%x, %zero, %c1)
      %wt1 : $WT = aten::t(%w)
      %p1 : $P = aten::matmul(%row1, %wt1)
      %acc2 : $P = aten::add(%acc1, %p1, %one)
      %c2 : int = aten::add(%c, %two)
      -> (%true, %c2, %acc2)
  %c_last : int, %out : Tensor = prim::Loop(%rest, %true, %c_end, %acc_mid)
    block0(%j : int, %d : int, %acc3 : Tensor):
      %row2 : $R = aten::select(%x, %zero, %d)
      %wt2 : $WT = aten::t(%w)
      %p2 : $P = aten::matmul(%row2, %wt2)
      %acc4 : $P = aten::add(%acc3, %p2, %one)
      %d1 : int = aten::add(%d, %one)
      -> (%true, %d1, %acc4)
  return (%out)
)IR";

at::Tensor runGraph(const GraphPtr& graph, const std::vector<at::Tensor>& inputs) {
  torch::jit::Code code(graph, "test");
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  torch::jit::InterpreterState(code).run(stack);
  return stack.back().toTensor();
}

// Runs `original` and its hoisted copy on x with `steps` rows; expects equal results.
void expectSameResults(const GraphPtr& original, const GraphPtr& hoisted, int64_t steps) {
  at::manual_seed(steps);
  const std::vector<at::Tensor> inputs = {torch::randn({steps, 3, 4}), torch::randn({6, 4}),
                                          torch::randn({3, 6})};
  EXPECT_TRUE(torch::allclose(runGraph(hoisted, inputs), runGraph(original, inputs), 1e-5, 1e-5))
      << "steps = " << steps;
}

// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

size_t matmulsIn(torch::jit::Block* block) { return countKind(block, c10::aten::matmul); }

torch::jit::Node* onlyLoop(const GraphPtr& graph) {
  for (torch::jit::Node* node : graph->nodes()) {
    if (node->kind() == c10::prim::Loop) return node;
  }
  return nullptr;
}

class ProjectionsTest : public ::testing::Test {
 protected:
  void SetUp() override { config().hoist_projections = true; }
  void TearDown() override { config().hoist_projections = true; }
};

TEST_F(ProjectionsTest, LoopOverAllRowsReadsOneProductMadeBeforeIt) {
  auto original = parse(kLoopOverAllRows);
  auto graph = original->copy();
  hoistLoopInvariantProjections(graph);
  FileCheck()
      .check("prim::If")
      ->check("aten::t(%w)")
      ->check("aten::matmul(%x")
      ->check("prim::Loop")
      ->check("aten::select")
      ->check_not("aten::matmul")
      ->run(*graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 0u);
  for (int64_t steps : {5, 1, 0}) expectSameResults(original, graph, steps);
}

TEST_F(ProjectionsTest, VectorInputRaisesAsTheFirstStepWould) {
  // Profiled with 5 steps of 3x4 rows, called with a vector of 4: each step's row is a
  // 0-d tensor, which matmul refuses. matmul(x, w.t()) itself would succeed.
  auto original = parse(kLoopOverAllRows);
  auto graph = original->copy();
  hoistLoopInvariantProjections(graph);
  const std::vector<at::Tensor> inputs = {torch::randn({4}), torch::randn({6, 4}),
                                          torch::randn({3, 6})};
  EXPECT_THROW(runGraph(original, inputs), std::exception);
  EXPECT_THROW(runGraph(graph, inputs), std::exception);
}

TEST_F(ProjectionsTest, UnrolledLoopAndItsRemainderShareOneProduct) {
  auto original = parse(kUnrolledLoop);
  auto graph = original->copy();
  hoistLoopInvariantProjections(graph);
  // The whole product, and the first step's (run for vector inputs only), outside.
  EXPECT_EQ(matmulsIn(graph->block()), 2u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::select), 4u);
  EXPECT_EQ(countKind(graph->block(), c10::aten::t), 1u);
  FileCheck()
      .check("aten::matmul(%x")
      ->check("prim::Loop")
      ->check_not("aten::select(%x")
      ->check("prim::Loop")
      ->check_not("aten::select(%x")
      ->run(*graph);
  for (int64_t steps : {0, 1, 2, 5, 6}) expectSameResults(original, graph, steps);
}

TEST_F(ProjectionsTest, LoopOverFewerTripsThanRowsKeepsItsSteps) {
  // for t in range(2): the product of all 5 rows would be 2.5x the work.
  auto graph = parse(replaced(kLoopOverAllRows, "%n : int = aten::size(%x, %zero)",
                              "%n : int = prim::Constant[value=2]()"));
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
  EXPECT_EQ(matmulsIn(graph->block()), 1u);
}

TEST_F(ProjectionsTest, RemainderLoopAloneKeepsItsSteps) {
  // Without the main loop's product, the remainder's few trips do not pay for one.
  std::string ir = kUnrolledLoop;
  const size_t main_loop = ir.find("%c_end : int, %acc_mid");
  const size_t remainder = ir.find("%c_last");
  ir.replace(main_loop, remainder - main_loop,
             "%c_end : int = prim::Constant[value=0]()\n  %acc_mid : $P = aten::neg(%h)\n  ");
  auto graph = parse(ir);
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
}

TEST_F(ProjectionsTest, WrittenWeightKeepsItsSteps) {
  // The body scales w in place: every step must see the weight as it is then.
  auto graph = parse(replaced(kLoopOverAllRows, "      -> (%true, %next)",
                              "      %scale : float = prim::Constant[value=0.5]()\n"
                              "      %w2 : $W = aten::mul_(%w, %scale)\n"
                              "      -> (%true, %next)"));
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
}

TEST_F(ProjectionsTest, ConditionalStepKeepsItsSteps) {
  // A GEMM under an If in the body may run on no trip at all.
  auto graph = parse(R"IR(
graph(%x : $X, %w : $W, %h : $P, %cond : bool):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %n : int = aten::size(%x, %zero)
  %out : Tensor = prim::Loop(%n, %true, %h)
    block0(%t : int, %acc : Tensor):
      %next : Tensor = prim::If(%cond)
        block0():
          %row : $R = aten::select(%x, %zero, %t)
          %wt : $WT = aten::t(%w)
          %p : $P = aten::matmul(%row, %wt)
          %sum : $P = aten::add(%acc, %p, %one)
          -> (%sum)
        block1():
          -> (%acc)
      -> (%true, %next)
  return (%out)
)IR");
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
}

TEST_F(ProjectionsTest, StepsAlongAnotherDimensionKeepTheirSteps) {
  auto graph = parse(
      replaced(kLoopOverAllRows, "aten::select(%x, %zero, %t)", "aten::select(%x, %one, %t)"));
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
}

TEST_F(ProjectionsTest, FlagOffLeavesTheGraphAlone) {
  config().hoist_projections = false;
  auto graph = parse(kLoopOverAllRows);
  hoistLoopInvariantProjections(graph);
  EXPECT_EQ(matmulsIn(onlyLoop(graph)->blocks()[0]), 1u);
}

}  // namespace
}  // namespace fuser
