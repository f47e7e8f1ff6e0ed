// Graph tests of passes/inplace.cpp (in-place table ops made functional, or left with
// their reason) and passes/type_propagation.cpp (types for values profiling missed).
#include <gtest/gtest.h>
#include <torch/csrc/jit/testing/file_check.h>
#include <torch/torch.h>

#include <string>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/groups.h"
#include "passes/lone_writes.h"
#include "passes/pipeline.h"
#include "passes/type_propagation.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::testing::FileCheck;
using testing_helpers::countKind;

const std::string kT = "Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)";

GraphPtr parse(const std::string& ir) {
  return testing_helpers::parseWithTypes(
      ir, {{"$T", kT},
           {"$H", "Half(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"},
           {"$I", "Long(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"},
           {"$R", "Float(5, strides=[1], requires_grad=0, device=cpu)"},
           {"$U", "Float(1, 5, strides=[5, 1], requires_grad=0, device=cpu)"},
           {"$V", "Float(1, 5, strides=[1, 1], requires_grad=0, device=cpu)"},
           {"$N", "Float(2, 3, 4, 4, strides=[48, 16, 4, 1], requires_grad=0, device=cpu)"},
           {"$W", "Float(3, 3, 3, 3, strides=[27, 9, 3, 1], requires_grad=0, device=cpu)"},
           {"$B", "Float(3, strides=[1], requires_grad=0, device=cpu)"}},
      /*keep_names=*/true);
}

size_t countSym(const GraphPtr& graph, const char* qual) {
  return countKind(graph->block(), c10::Symbol::fromQualString(qual));
}

// Runs prepare + partition with FUSER_DUMP=reasons; returns what was printed.
std::string formGroupsWithReasons(GraphPtr& graph) {
  config().dump_reasons = true;
  ::testing::internal::CaptureStderr();
  prepareGraph(graph);
  formFusionGroups(graph);
  config().dump_reasons = false;
  return ::testing::internal::GetCapturedStderr();
}

class InPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override { config().keep_singletons = false; }
  void TearDown() override { config().dump_reasons = false; }
};

// The issue's example: z = x * y; z.add_(1.0); z.relu_(); return z.sigmoid().
// The in-place results were never read, so profiling gave them no type.
TEST_F(InPlaceTest, ChainOnFreshValueFormsOneGroup) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %one : float = prim::Constant[value=1.]()
  %alpha : int = prim::Constant[value=1]()
  %z : $T = aten::mul(%x, %y)
  %a : Tensor = aten::add_(%z, %one, %alpha)
  %r : Tensor = aten::relu_(%z)
  %s : $T = aten::sigmoid(%z)
  return (%s))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(reasons, "");
  EXPECT_EQ(countSym(graph, "aten::add_") + countSym(graph, "aten::relu_"), 0);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(countComputeNodes(groups[0]), 4);
  FileCheck()
      .check("aten::mul")
      ->check("aten::add")
      ->check("aten::relu")
      ->check("aten::sigmoid")
      ->run(*groups[0]->g(c10::attr::Subgraph));
}

// A resnet BasicBlock's tail: out = conv(x); out += identity; out = relu_(out).
TEST_F(InPlaceTest, ResidualAddAndReluJoinOneGroup) {
  auto graph = parse(R"IR(
graph(%x : $N, %w : $W, %b : $B):
  %alpha : int = prim::Constant[value=1]()
  %stride : int[] = prim::Constant[value=[1, 1]]()
  %groups : int = prim::Constant[value=1]()
  %out : $N = aten::conv2d(%x, %w, %b, %stride, %stride, %stride, %groups)
  %sum : $N = aten::add_(%out, %x, %alpha)
  %r : $N = aten::relu_(%sum)
  return (%r))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(reasons.find("in-place"), std::string::npos) << reasons;
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  FileCheck().check("aten::add")->check("aten::relu")->run(*groups[0]->g(c10::attr::Subgraph));
  FileCheck().check("aten::conv2d")->check_not("aten::add_")->check_not("aten::relu_")->run(
      *graph);
}

// float16 += float32 computes in float32 and writes float16: add, then a cast back.
TEST_F(InPlaceTest, PromotingWriteIsCastBackToSelfDtype) {
  auto graph = parse(R"IR(
graph(%x : $H, %y : $T):
  %alpha : int = prim::Constant[value=1]()
  %z : $H = aten::neg(%x)
  %a : Tensor = aten::add_(%z, %y, %alpha)
  return (%z))IR");
  prepareGraph(graph);
  EXPECT_EQ(countSym(graph, "aten::add_"), 0);
  FileCheck()
      .check("aten::neg")
      ->check("Float(4, 5")
      ->check_same("aten::add[like_self=1](")
      ->check("Half(4, 5")
      ->check_same("aten::_to_copy(")
      ->check("return")
      ->run(*graph);
}

// masked_fill_ keeps self's strides where ATen's masked_fill clones self row-major: the
// write becomes fuser::masked_fill_like_self, which the group computes like masked_fill.
TEST_F(InPlaceTest, MaskedFillWriteKeepsSelfsLayout) {
  auto graph = parse(R"IR(
graph(%x : $T, %m : $T):
  %zero : float = prim::Constant[value=0.]()
  %half : float = prim::Constant[value=0.5]()
  %z : $T = aten::sigmoid(%x)
  %mask : Bool(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::gt(%m, %zero)
  %w : Tensor = aten::masked_fill_(%z, %mask, %half)
  return (%z))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(reasons, "");
  EXPECT_EQ(countSym(graph, "aten::masked_fill_") + countSym(graph, "aten::masked_fill"), 0);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  FileCheck()
      .check("aten::sigmoid")
      ->check("fuser::masked_fill_like_self[like_self=1](")
      ->check("return")
      ->run(*groups[0]->g(c10::attr::Subgraph));
}

TEST_F(InPlaceTest, WriteEagerRejectsStays) {
  auto graph = parse(R"IR(
graph(%x : $I):
  %half : float = prim::Constant[value=0.5]()
  %z : $I = aten::neg(%x)
  %a : Tensor = aten::mul_(%z, %half)
  return (%z))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::mul_"), 1);
  EXPECT_NE(reasons.find("aten::mul_(%z, %half): in-place op not made functional: eager raises "
                         "here: result type Float can't be cast to self's Long"),
            std::string::npos)
      << reasons;
}

TEST_F(InPlaceTest, WriteToGraphInputStays) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %alpha : int = prim::Constant[value=1]()
  %a : Tensor = aten::add_(%x, %y, %alpha)
  %r : $T = aten::relu(%x)
  return (%r))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::add_"), 1);
  EXPECT_NE(reasons.find("aten::add_(%x, %y, %alpha): in-place op not made functional: writes "
                         "to a graph or block input %x"),
            std::string::npos)
      << reasons;
}

TEST_F(InPlaceTest, WriteThroughViewReadLaterStays) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %one : float = prim::Constant[value=1.]()
  %alpha : int = prim::Constant[value=1]()
  %minus : int = prim::Constant[value=-1]()
  %shape : int[] = prim::ListConstruct(%minus)
  %c : $T = aten::mul(%x, %y)
  %v : Float(20, strides=[1], requires_grad=0, device=cpu) = aten::view(%c, %shape)
  %a : Tensor = aten::add_(%v, %one, %alpha)
  %r : $T = aten::sigmoid(%c)
  return (%r))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::add_"), 1);
  EXPECT_EQ(countSym(graph, "fuser::FusionGroup"), 0);
  EXPECT_NE(reasons.find("writes to %v, which may alias %c"), std::string::npos) << reasons;
}

TEST_F(InPlaceTest, WriteToListElementStays) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %zero : int = prim::Constant[value=0]()
  %c : $T = aten::mul(%x, %y)
  %l : Tensor[] = prim::ListConstruct(%c)
  %e : $T = aten::__getitem__(%l, %zero)
  %a : Tensor = aten::relu_(%e)
  %s : Tensor = aten::stack(%l, %zero)
  return (%s))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::relu_"), 1);
  EXPECT_NE(reasons.find("writes to %e, which may alias %l"), std::string::npos) << reasons;
}

// A reader of the old value before the write (here a list holding it) keeps it.
TEST_F(InPlaceTest, WriteAfterAnotherAliasTookItStays) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %zero : int = prim::Constant[value=0]()
  %c : $T = aten::mul(%x, %y)
  %l : Tensor[] = prim::ListConstruct(%c)
  %a : Tensor = aten::relu_(%c)
  %s : Tensor = aten::stack(%l, %zero)
  return (%s))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::relu_"), 1);
  EXPECT_NE(reasons.find("%c is read before the write by %l = prim::ListConstruct(%c)"),
            std::string::npos)
      << reasons;
}

// Readers before the write that only read the old value (a mask of self, a sum) let the
// write be made functional, as eager computes them before it writes; a view stays (above).
TEST_F(InPlaceTest, ValuesReadBeforeTheWriteDoNotKeepIt) {
  auto graph = parse(R"IR(
graph(%x : $T):
  %half : float = prim::Constant[value=0.5]()
  %zero : float = prim::Constant[value=0.]()
  %none : NoneType = prim::Constant()
  %z : $T = aten::sigmoid(%x)
  %mask : Bool(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::gt(%z, %half)
  %s : Float(requires_grad=0, device=cpu) = aten::sum(%z, %none)
  %w : Tensor = aten::masked_fill_(%z, %mask, %zero)
  %r : $T = aten::mul(%z, %s)
  return (%r))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(reasons, "");
  EXPECT_EQ(countSym(graph, "aten::masked_fill_"), 0);
  // The mask and the sum read the sigmoid (their groups' inputs are named after it).
  FileCheck().check("aten::gt(%z")->run(*graph);
  FileCheck().check("aten::sum(%z")->run(*graph);
  FileCheck().check("fuser::masked_fill_like_self[like_self=1](%z")->run(*graph);
}

// passes/lone_writes.cpp: a write made functional that no group took is written in
// place again, where no reader of the old value runs after it or keeps an alias of it.
TEST_F(InPlaceTest, LoneFunctionalWriteIsWrittenInPlaceAgain) {
  auto graph = parse(R"IR(
graph(%x : $V):
  %none : NoneType = prim::Constant()
  %t : $V = aten::clone(%x, %none)
  %s : Float(requires_grad=0, device=cpu) = aten::sum(%t, %none)
  %y : $V = aten::relu[like_self=1](%t)
  %z : $V = aten::mul[like_self=1](%y, %s)
  return (%z, %s))IR");
  writeLoneWritesInPlace(graph);
  FileCheck().check("aten::sum(%t")->check("aten::relu_(%t)")->check("aten::mul_(")->run(*graph);
  EXPECT_EQ(countSym(graph, "aten::relu"), 0);
  EXPECT_EQ(countSym(graph, "aten::mul"), 0);
}

TEST_F(InPlaceTest, FunctionalWriteStaysWhereTheOldValueIsSeenAfterIt) {
  auto graph = parse(R"IR(
graph(%x : $V, %h : Half(1, 5, strides=[1, 1], requires_grad=0, device=cpu)):
  %none : NoneType = prim::Constant()
  %alpha : int = prim::Constant[value=1]()
  %shape : int[] = prim::Constant[value=[5]]()
  %t : $V = aten::clone(%x, %none)
  %y : $V = aten::relu[like_self=1](%t)
  %s : Float(requires_grad=0, device=cpu) = aten::sum(%t, %none)
  %u : $V = aten::clone(%x, %none)
  %v : Float(5, strides=[1], requires_grad=0, device=cpu) = aten::view(%u, %shape)
  %w : $V = aten::sigmoid[like_self=1](%u)
  %k : Half(1, 5, strides=[1, 1], requires_grad=0, device=cpu) = aten::clone(%h, %none)
  %p : $V = aten::add[like_self=1](%k, %x, %alpha)
  return (%y, %s, %v, %w, %p))IR");
  writeLoneWritesInPlace(graph);
  // The sum reads t after the write; the view keeps an alias of u; the add promotes.
  EXPECT_EQ(countSym(graph, "aten::relu_"), 0);
  EXPECT_EQ(countSym(graph, "aten::sigmoid_"), 0);
  EXPECT_EQ(countSym(graph, "aten::add_"), 0);
  EXPECT_EQ(countSym(graph, "aten::relu"), 1);
}

// In a group's subgraph the interpreter runs: a write to a subgraph input (the caller's
// tensor) stays functional; one to a value the subgraph makes is written in place.
TEST_F(InPlaceTest, SubgraphWritesToItsInputsStayFunctional) {
  auto graph = parse(R"IR(
graph(%x : $V):
  %y : $V = aten::relu[like_self=1](%x)
  %z : $V = aten::sigmoid(%y)
  %w : $V = aten::tanh[like_self=1](%z)
  return (%w))IR");
  writeFunctionalWritesInPlace(graph->block());
  FileCheck().check("aten::relu[like_self=1](%x)")->check("aten::tanh_(%z)")->run(*graph);
}

TEST_F(InPlaceTest, WriteToConstantStays) {
  auto graph = parse(R"IR(
graph(%y : $T):
  %alpha : int = prim::Constant[value=1]()
  return (%y))IR");
  torch::jit::Value* weight = graph->insertConstant(torch::ones({4, 5}));
  weight->setType(c10::TensorType::create(torch::ones({4, 5})));
  Node* write = graph->create(c10::Symbol::fromQualString("aten::mul_"),
                              {weight, graph->inputs()[0]}, 1);
  write->insertBefore(graph->return_node());
  ASSERT_NE(write->maybeSchema(), nullptr);
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::mul_"), 1);
  EXPECT_NE(reasons.find("(a frozen weight)"), std::string::npos) << reasons;
}

TEST_F(InPlaceTest, WriteThatWouldBroadcastSelfStays) {
  auto graph = parse(R"IR(
graph(%x : $R, %y : $T):
  %z : $R = aten::neg(%x)
  %a : Tensor = aten::mul_(%z, %y)
  return (%z))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::mul_"), 1);
  EXPECT_NE(reasons.find("%y has a higher rank than self"), std::string::npos) << reasons;
}

// Self [1, 5] has a size-1 dimension: an operand of other strides could decide the
// functional result's layout.
TEST_F(InPlaceTest, LayoutAmbiguousSelfNeedsSameStrides) {
  auto graph = parse(R"IR(
graph(%x : $U, %y : $V):
  %z : $U = aten::neg(%x)
  %a : Tensor = aten::mul_(%z, %y)
  %u : $U = aten::neg(%x)
  %b : Tensor = aten::mul_(%u, %x)
  return (%z, %u))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::mul_"), 1);  // the second, same strides, is functional
  EXPECT_NE(reasons.find("self has a size-1 dimension and %y other strides"), std::string::npos)
      << reasons;
}

// In a loop body, a value made before the loop is written on every iteration.
TEST_F(InPlaceTest, WriteInLoopToValueFromOutsideStays) {
  auto graph = parse(R"IR(
graph(%x : $T, %n : int):
  %true : bool = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %z : $T = aten::neg(%x)
  prim::Loop(%n, %true)
    block0(%i : int):
      %a : Tensor = aten::mul_(%z, %half)
      -> (%true)
  return (%z))IR");
  std::string reasons = formGroupsWithReasons(graph);
  EXPECT_EQ(countSym(graph, "aten::mul_"), 1);
  EXPECT_NE(reasons.find("%z is made outside the write's block"), std::string::npos) << reasons;
}

// An If output is fresh when each branch makes its value; not when one passes an input.
TEST_F(InPlaceTest, WriteToIfOutputMadeFreshInEachBranch) {
  const std::string ir = R"IR(
graph(%x : $T, %c : bool):
  %out : $T = prim::If(%c)
    block0():
      %a : $T = aten::neg(%x)
      -> (%a)
    block1():
      %b : $T = BRANCH
      -> (%b)
  %r : Tensor = aten::relu_(%out)
  %s : $T = aten::tanh(%out)
  return (%s))IR";
  auto with = [&](const std::string& branch) {
    std::string text = ir;
    text.replace(text.find("BRANCH"), 6, branch);
    return parse(text);
  };
  auto fresh = with("aten::sigmoid(%x)");
  prepareGraph(fresh);
  EXPECT_EQ(countSym(fresh, "aten::relu_"), 0);
  FileCheck().check("prim::If")->check("aten::relu[like_self=1](%out)")->check("aten::tanh")->run(*fresh);

  auto passed = with("aten::neg(%x)");
  passed->block()->nodes().front()->blocks()[1]->eraseOutput(0);
  passed->block()->nodes().front()->blocks()[1]->registerOutput(passed->inputs()[0]);
  std::string reasons = formGroupsWithReasons(passed);
  EXPECT_EQ(countSym(passed, "aten::relu_"), 1);
  EXPECT_NE(reasons.find("%out comes from a prim::If whose branch value %x is read elsewhere"),
            std::string::npos)
      << reasons;
}

// A value profiling never saw (the in-place op's result, and what reads it) is typed
// from its operands, so the whole chain forms one guarded group whose guard checks
// the profiled inputs only.
TEST_F(InPlaceTest, UnprofiledResultsJoinAGuardedGroup) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %alpha : int = prim::Constant[value=1]()
  %z : $T = aten::mul(%x, %y)
  %a : Tensor = aten::add_(%z, %y, %alpha)
  %t : Tensor = aten::tanh(%a)
  %s : Tensor = aten::sigmoid(%t)
  return (%s))IR");
  fuseGraph(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(countComputeNodes(groups[0]), 4);
  FileCheck()
      .check("fuser::TypeGuard")
      ->check_same("Float(4, 5, strides=[5, 1]")
      ->check("fuser::FusionGroup")
      ->run(*graph);
}

// torch.jit.trace records `z.add_(1.5)` with a 0-dim double tensor constant.
TEST_F(InPlaceTest, TracedNumberConstantBecomesAScalarAndFuses) {
  auto graph = parse(R"IR(
graph(%x : $T, %y : $T):
  %z : $T = aten::mul(%x, %y)
  return (%z))IR");
  Node* mul = graph->outputs()[0]->node();
  torch::jit::WithInsertPoint guard(graph->return_node());
  const at::Tensor number = at::scalar_tensor(1.5, at::kDouble);
  torch::jit::Value* constant = graph->insertConstant(number);
  constant->setType(c10::TensorType::create(number));
  Node* add = graph->create(c10::Symbol::fromQualString("aten::add_"),
                            {mul->output(), constant, graph->insertConstant(1)}, 1);
  graph->insertNode(add);
  ASSERT_NE(add->maybeSchema(), nullptr);
  torch::jit::Value* sigmoid = graph->insert(c10::aten::sigmoid, {mul->output()});
  sigmoid->setType(mul->output()->type());
  graph->return_node()->replaceInput(0, sigmoid);
  prepareGraph(graph);
  formFusionGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(countComputeNodes(groups[0]), 3);
  FileCheck()
      .check("prim::Constant[value=1.5]")
      ->check("aten::add[like_self=1](")
      ->check("aten::sigmoid")
      ->run(*groups[0]->g(c10::attr::Subgraph));
}

// Beside an integer tensor a 0-dim double tensor promotes to double, a number to
// float: the constant stays.
TEST_F(InPlaceTest, FloatingConstantBesideIntegerTensorStays) {
  auto graph = parse(R"IR(
graph(%x : $I):
  %z : $I = aten::neg(%x)
  return (%z))IR");
  Node* neg = graph->outputs()[0]->node();
  torch::jit::WithInsertPoint guard(graph->return_node());
  const at::Tensor number = at::scalar_tensor(1.5, at::kDouble);
  torch::jit::Value* constant = graph->insertConstant(number);
  constant->setType(c10::TensorType::create(number));
  torch::jit::Value* mul = graph->insert(c10::aten::mul, {neg->output(), constant});
  graph->return_node()->replaceInput(0, mul);
  prepareGraph(graph);
  EXPECT_EQ(mul->node()->input(1), constant);
}

TEST(TypePropagation, TableOpsTypedFromOperands) {
  auto graph = parse(R"IR(
graph(%x : $I, %h : $H, %r : $R, %s : Float(requires_grad=0, device=cpu)):
  %two : int = prim::Constant[value=2]()
  %q : Tensor = aten::div(%x, %two)
  %p : Tensor = aten::mul(%h, %s)
  %b : Tensor = aten::add(%p, %r, %two)
  %c : Tensor = aten::lt(%b, %q)
  %o : Tensor = aten::mm(%b, %b)
  %n : Tensor = aten::neg(%o)
  return (%q, %p, %b, %c, %n))IR");
  completeTypesFromInputs(graph);
  auto type = [&](size_t i) { return graph->outputs()[i]->type()->expect<c10::TensorType>(); };
  EXPECT_EQ(*type(0)->scalarType(), c10::ScalarType::Float);  // true division
  EXPECT_EQ(type(0)->sizes().concrete_sizes(), std::vector<int64_t>({4, 5}));
  EXPECT_EQ(*type(1)->scalarType(), c10::ScalarType::Half);   // 0-dim float does not promote
  EXPECT_EQ(*type(2)->scalarType(), c10::ScalarType::Float);  // half + float (dim) is float
  EXPECT_EQ(type(2)->sizes().concrete_sizes(), std::vector<int64_t>({4, 5}));
  EXPECT_EQ(*type(2)->device(), c10::Device(c10::kCPU));
  EXPECT_EQ(*type(3)->scalarType(), c10::ScalarType::Bool);
  EXPECT_FALSE(type(4)->scalarType().has_value());  // mm is not in the table: nothing known
}

}  // namespace
}  // namespace fuser
