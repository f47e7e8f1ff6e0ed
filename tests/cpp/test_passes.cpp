// Graph tests of csrc/passes (prepare, partition, guard, cleanup) and of the TypeGuard
// operator: small IR in, exact shape of the rewritten IR out.
#include <ATen/core/grad_mode.h>
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
#include "stats.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::testing::FileCheck;

const std::string kT = "Float(4, 5, strides=[5, 1], requires_grad=0, device=cpu)";
const std::string kM = "Float(5, 5, strides=[5, 1], requires_grad=0, device=cpu)";

GraphPtr parse(const std::string& ir) {
  return testing_helpers::parseWithTypes(ir, {{"$T", kT}});
}

// prepare + partition only: groups without their guards.
void formGroups(GraphPtr& graph) {
  prepareGraph(graph);
  formFusionGroups(graph);
}

using testing_helpers::countKind;

size_t countGroups(const GraphPtr& graph) { return collectFusionGroups(graph->block()).size(); }

class PassesTest : public ::testing::Test {
 protected:
  void SetUp() override { restore(); }
  void TearDown() override { restore(); }
  static void restore() {
    config().arg_limit = 128;
    config().keep_singletons = false;
    config().dump_reasons = false;
    config().fuse_cpu = true;
  }
};

TEST_F(PassesTest, ChainFusedIntoOneGroup) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %c : $T = aten::add(%a, %b, %one)
  %d : $T = aten::mul(%c, %b)
  %e : $T = aten::relu(%d)
  %f : $T = aten::sigmoid(%e)
  return (%f))IR");
  formGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(countComputeNodes(groups[0]), 4);
  EXPECT_EQ(groups[0]->inputs().size(), 2);  // constants are cloned inside, not inputs
  EXPECT_EQ(groups[0]->outputs().size(), 1);
  FileCheck()
      .check("fuser::FusionGroup")
      ->check_not("aten::")
      ->check("return")
      ->check("prim::Constant")
      ->check("aten::add")
      ->check("aten::mul")
      ->check("aten::relu")
      ->check("aten::sigmoid")
      ->run(*graph);
}

TEST_F(PassesTest, GuardIfAndFallbackShape) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::tanh(%c)
  return (%d))IR");
  fuseGraph(graph);
  FileCheck()
      .check("bool = fuser::TypeGuard[types=[" + kT + ", " + kT + "]]")
      ->check_next("prim::If")
      ->check_next("block0")
      ->check_next("fuser::FusionGroup")
      ->check_next("->")
      ->check_next("block1")
      ->check_next("prim::FallbackGraph")
      ->run(*graph);

  Node* group = collectFusionGroups(graph->block()).at(0);
  Node* branch = group->owningBlock()->owningNode();
  Node* fallback = branch->blocks()[1]->nodes().front();
  ASSERT_EQ(fallback->kind(), c10::prim::FallbackGraph);
  EXPECT_EQ(fallback->inputs().vec(), group->inputs().vec());
  // The fallback runs the same ops, unmodified, as an ordinary graph.
  FileCheck().check("aten::mul")->check("aten::tanh")->run(*fallback->g(c10::attr::Subgraph));
  // Types are wiped outside the group and kept inside it.
  EXPECT_EQ(*graph->inputs()[0]->type(), *c10::TensorType::get());
  for (auto* input : group->g(c10::attr::Subgraph)->inputs()) {
    auto type = input->type()->expect<c10::TensorType>();
    EXPECT_EQ(type->scalarType(), c10::ScalarType::Float);
    EXPECT_EQ(type->sizes().concrete_sizes(), std::vector<int64_t>({4, 5}));
  }
}

TEST_F(PassesTest, FusingTwiceChangesNothing) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::exp(%c)
  return (%d))IR");
  fuseGraph(graph);
  std::string once = graph->toString();
  int64_t formed = stats().groups_formed;
  fuseGraph(graph);
  EXPECT_EQ(graph->toString(), once);
  EXPECT_EQ(stats().groups_formed, formed);
}

TEST_F(PassesTest, ArgLimitHonouredOnFortyInputSum) {
  std::string ir = "graph(";
  for (int i = 0; i < 40; ++i) ir += (i ? ", %x" : "%x") + std::to_string(i) + " : $T";
  ir += "):\n  %one : int = prim::Constant[value=1]()\n  %s0 : $T = aten::add(%x0, %x1, %one)\n";
  for (int i = 2; i < 40; ++i) {
    ir += "  %s" + std::to_string(i - 1) + " : $T = aten::add(%s" + std::to_string(i - 2) + ", %x" +
          std::to_string(i) + ", %one)\n";
  }
  ir += "  return (%s38)";
  auto graph = parse(ir);
  config().arg_limit = 8;
  fuseGraph(graph);
  auto groups = collectFusionGroups(graph->block());
  EXPECT_GT(groups.size(), 1);
  size_t adds = countKind(graph->block(), c10::aten::add);
  for (Node* group : groups) {
    EXPECT_LE(group->inputs().size() + group->outputs().size(), 8) << *graph;
    adds += countKind(group->g(c10::attr::Subgraph)->block(), c10::aten::add);
  }
  EXPECT_EQ(adds, 39);
}

TEST_F(PassesTest, NonFusibleOpSplitsGroups) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T, %m : )IR" +
                     kM + R"IR():
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%c)
  %e : $T = aten::mm(%d, %m)
  %f : $T = aten::sigmoid(%e)
  %g : $T = aten::neg(%f)
  return (%g))IR");
  formGroups(graph);
  EXPECT_EQ(countGroups(graph), 2);
  FileCheck()
      .check("fuser::FusionGroup")
      ->check_next("aten::mm")
      ->check_next("fuser::FusionGroup")
      ->run(*graph);
}

TEST_F(PassesTest, ProducerUsedAfterConsumerBecomesExtraOutput) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T, %m : )IR" +
                     kM + R"IR():
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%c)
  %e : $T = aten::mm(%c, %m)
  return (%d, %e))IR");
  formGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  EXPECT_EQ(groups[0]->outputs().size(), 2);
  Node* mm = groups[0]->next();
  ASSERT_EQ(mm->kind(), c10::aten::mm);
  EXPECT_EQ(mm->input(0)->node(), groups[0]);
}

// Two products, each scaled and shifted by the same %c: two elementwise groups that read
// %c, neither reading the other. $SHIFT: %c's type.
const std::string kSiblingsOfC = R"IR(
graph(%a : $T, %b : $T, %m : $M, %c : $SHIFT):
  %one : int = prim::Constant[value=1]()
  %p : $T = aten::mm(%a, %m)
  %q : $T = aten::mm(%b, %m)
  %u : $T = aten::mul(%p, %c)
  %v : $T = aten::add(%u, %c, %one)
  %w : $T = aten::mul(%q, %c)
  %z : $T = aten::add(%w, %c, %one)
  return (%v, %z))IR";

TEST_F(PassesTest, ElementwiseSiblingsOfOneInputShareAGroup) {
  auto graph = testing_helpers::parseWithTypes(kSiblingsOfC,
                                               {{"$T", kT}, {"$M", kM}, {"$SHIFT", kT}});
  formGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(countComputeNodes(groups[0]), 4u);
  EXPECT_EQ(groups[0]->outputs().size(), 2u);
  EXPECT_EQ(groups[0]->inputs().size(), 3u);  // %p, %q and %c, read once
  EXPECT_EQ(graph->outputs()[0]->node(), groups[0]);
  EXPECT_EQ(graph->outputs()[1]->node(), groups[0]);
}

TEST_F(PassesTest, SiblingsOfOtherShapesOrOnAPathStayApart) {
  // %q [5, 5] against %p [4, 5]: one kernel writes its outputs over one shape.
  std::string other_shape = kSiblingsOfC;
  other_shape.replace(other_shape.find("%b : $T"), 7, "%b : $M");
  for (const char* name : {"%q", "%w", "%z"}) {
    const std::string typed = std::string(name) + " : $T";
    other_shape.replace(other_shape.find(typed), typed.size(), std::string(name) + " : $M");
  }
  auto graph = testing_helpers::parseWithTypes(
      other_shape, {{"$T", kT}, {"$M", kM}, {"$SHIFT", "Float(5, strides=[1], device=cpu)"}});
  formGroups(graph);
  EXPECT_EQ(countGroups(graph), 2u);

  // The second reads the first's result through a product: no place holds both.
  std::string on_a_path = kSiblingsOfC;
  on_a_path.replace(on_a_path.find("%q : $T = aten::mm(%b, %m)"), 26, "%q : $T = aten::mm(%v, %m)");
  const size_t q = on_a_path.find("  %q : $T");
  const std::string q_line = on_a_path.substr(q, on_a_path.find('\n', q) + 1 - q);
  on_a_path.erase(q, q_line.size());
  on_a_path.insert(on_a_path.find("  %w : $T"), q_line);
  graph = testing_helpers::parseWithTypes(on_a_path, {{"$T", kT}, {"$M", kM}, {"$SHIFT", kT}});
  formGroups(graph);
  EXPECT_EQ(countGroups(graph), 2u);
}

TEST_F(PassesTest, FusesInsideIfAndLoopBlocks) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T, %flag : bool, %n : int):
  %r : $T = prim::If(%flag)
    block0():
      %c : $T = aten::mul(%a, %b)
      %d : $T = aten::tanh(%c)
      -> (%d)
    block1():
      %e : $T = aten::neg(%a)
      %f : $T = aten::exp(%e)
      -> (%f)
  %true : bool = prim::Constant[value=1]()
  %out : $T = prim::Loop(%n, %true, %r)
    block0(%i : int, %acc : $T):
      %g : $T = aten::mul(%acc, %b)
      %h : $T = aten::sigmoid(%g)
      -> (%true, %h)
  return (%out))IR");
  fuseGraph(graph);
  EXPECT_EQ(countGroups(graph), 3);
  EXPECT_EQ(countKind(graph->block(), typeGuardSymbol()), 3);
  for (Node* group : collectFusionGroups(graph->block())) {
    EXPECT_EQ(countComputeNodes(group), 2);
  }
}

TEST_F(PassesTest, InPlaceOnFreshValueMadeFunctionalAndFused) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu_(%c)
  return (%d))IR");
  formGroups(graph);
  EXPECT_EQ(countKind(graph->block(), c10::Symbol::fromQualString("aten::relu_")), 0);
  ASSERT_EQ(countGroups(graph), 1);
  FileCheck()
      .check("aten::mul")
      ->check("aten::relu")
      ->run(*collectFusionGroups(graph->block())[0]->g(c10::attr::Subgraph));
}

TEST_F(PassesTest, InPlaceOnViewIsNotFused) {
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %one : int = prim::Constant[value=1]()
  %minus : int = prim::Constant[value=-1]()
  %shape : int[] = prim::ListConstruct(%minus)
  %c : $T = aten::mul(%a, %b)
  %v : Float(20, strides=[1], requires_grad=0, device=cpu) = aten::view(%c, %shape)
  %w : Float(20, strides=[1], requires_grad=0, device=cpu) = aten::add_(%v, %v, %one)
  %d : $T = aten::relu(%c)
  return (%d, %w))IR");
  formGroups(graph);
  // The write through the view stays in place and keeps mul and relu apart.
  EXPECT_EQ(countKind(graph->block(), c10::Symbol::fromQualString("aten::add_")), 1);
  EXPECT_EQ(countGroups(graph), 0);
  FileCheck()
      .check("aten::mul")
      ->check("aten::view")
      ->check("aten::add_")
      ->check("aten::relu")
      ->run(*graph);
}

TEST_F(PassesTest, IncompleteTypesFormNoGroup) {
  auto graph = parse(R"IR(
graph(%a : Tensor, %b : Float(requires_grad=0, device=cpu)):
  %c : Tensor = aten::mul(%a, %b)
  %d : Tensor = aten::relu(%c)
  return (%d))IR");
  fuseGraph(graph);
  EXPECT_EQ(countGroups(graph), 0);
  EXPECT_EQ(countKind(graph->block(), typeGuardSymbol()), 0);
}

TEST_F(PassesTest, SingletonDissolvedUnlessKept) {
  const std::string ir = R"IR(
graph(%a : $T, %m : )IR" +
                         kM + R"IR():
  %b : $T = aten::mm(%a, %m)
  %c : $T = aten::relu(%b)
  %d : $T = aten::mm(%c, %m)
  return (%d))IR";
  auto graph = parse(ir);
  formGroups(graph);
  EXPECT_EQ(countGroups(graph), 0);
  EXPECT_EQ(countKind(graph->block(), c10::aten::relu), 1);

  config().keep_singletons = true;
  auto kept = parse(ir);
  formGroups(kept);
  EXPECT_EQ(countGroups(kept), 1);
}

TEST_F(PassesTest, NodeAboveTheLimitStaysOutEvenAsSingleton) {
  config().keep_singletons = true;
  config().arg_limit = 2;
  auto graph = parse(R"IR(
graph(%a : $T, %b : $T):
  %c : $T = aten::mul(%a, %b)
  %d : $T = aten::relu(%a)
  return (%c, %d))IR");
  formGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);  // relu: 1 input + 1 output; mul would need 3
  FileCheck().check("aten::relu")->run(*groups[0]->g(c10::attr::Subgraph));
}

TEST_F(PassesTest, ScalarInputsMustBeIntFloatOrBool) {
  auto graph = parse(R"IR(
graph(%a : $T, %alpha : float, %s : Scalar):
  %c : $T = aten::mul(%a, %alpha)
  %d : $T = aten::relu(%c)
  %e : $T = aten::mul(%d, %s)
  return (%e))IR");
  formGroups(graph);
  auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1);
  // The float is a group input; the Scalar-typed multiply stays outside.
  EXPECT_EQ(groups[0]->inputs().size(), 2);
  EXPECT_EQ(groups[0]->next()->kind(), c10::aten::mul);
}

TEST_F(PassesTest, DevicesAndDtypesRespected) {
  auto graph = parse(R"IR(
graph(%a : $T, %z : ComplexFloat(4, 5, strides=[5, 1], requires_grad=0, device=cpu)):
  %c : $T = aten::neg(%a)
  %d : $T = aten::exp(%c)
  %y : ComplexFloat(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::neg(%z)
  %x : ComplexFloat(4, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::exp(%y)
  return (%d, %x))IR");
  formGroups(graph);
  EXPECT_EQ(countGroups(graph), 1);  // the complex chain is not fused

  const std::string cuda = "Float(4, 5, strides=[5, 1], requires_grad=0, device=cuda:0)";
  auto mixed = parse(R"IR(
graph(%a : $T, %g : )IR" +
                     cuda + R"IR():
  %c : $T = aten::neg(%a)
  %h : )IR" + cuda + R"IR( = aten::exp(%g)
  %d : $T = aten::mul(%c, %h)
  %e : $T = aten::relu(%d)
  return (%e))IR");
  formGroups(mixed);
  // neg + exp + mul would mix devices; only neg (cpu) and relu could join, via mul: none.
  EXPECT_EQ(countGroups(mixed), 0);

  config().fuse_cpu = false;
  auto off = parse(R"IR(
graph(%a : $T):
  %c : $T = aten::neg(%a)
  %d : $T = aten::exp(%c)
  return (%d))IR");
  formGroups(off);
  EXPECT_EQ(countGroups(off), 0);
}

TEST_F(PassesTest, DumpReasonsPrintsOneLinePerNode) {
  config().dump_reasons = true;
  auto graph = parse(R"IR(
graph(%a : $T, %m : )IR" +
                     kM + R"IR():
  %b : $T = aten::mm(%a, %m)
  %c : $T = aten::relu(%b)
  return (%c))IR");
  testing::internal::CaptureStderr();
  formGroups(graph);
  std::string err = testing::internal::GetCapturedStderr();
  // parseIR numbers node outputs, so only the inputs keep their names.
  FileCheck()
      .check("[fuser] not fused: %")
      ->check_same(" = aten::mm(%a, %m): operator not in the fusible table: aten::mm")
      ->check_next("[fuser] not fused: %")
      ->check_same(" = aten::relu(%")
      ->check_same("): no fusible producer or consumer could join it")
      ->run(err);
}

TEST_F(PassesTest, ProfileNodesBecomeValueTypes) {
  auto graph = parse(R"IR(
graph(%a : Tensor, %b : Tensor):
  %c : Tensor = aten::mul(%a, %b)
  %d : Tensor = aten::relu(%c)
  return (%d))IR");
  // Profile every tensor use as the profiling executor would.
  auto profiled = c10::TensorType::create(c10::ScalarType::Float, c10::Device(c10::kCPU),
                                          c10::SymbolicShape(std::vector<int64_t>{4, 5}),
                                          std::vector<c10::Stride>{}, false);
  for (Node* user : {graph->nodes().front(), graph->nodes().front()->next()}) {
    for (size_t i = 0; i < user->inputs().size(); ++i) {
      Node* profile = graph->create(c10::prim::profile, {user->input(i)});
      profile->ty_(c10::attr::profiled_type, profiled);
      profile->insertBefore(user);
      user->replaceInput(i, profile->output());
    }
  }
  Node* result = graph->create(c10::prim::profile, {graph->outputs()[0]});
  result->ty_(c10::attr::profiled_type, profiled);
  result->insertBefore(graph->return_node());
  graph->return_node()->replaceInput(0, result->output());
  formGroups(graph);
  EXPECT_EQ(countKind(graph->block(), c10::prim::profile), 0);
  EXPECT_EQ(countGroups(graph), 1);
}

// autodiff's sum of a broadcast operand's gradient joins its producer; the size it sums
// to becomes a constant of the subgraph, and the guard checks the list it was.
TEST_F(PassesTest, GradSumToSizeJoinsItsProducerAndItsSizeIsPinned) {
  const std::string g = "Float(6, 4, 5, strides=[20, 5, 1], requires_grad=0, device=cpu)";
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%g : $G, %x : $G, %size : int[]):
  %s : $G = aten::sigmoid(%x)
  %p : $G = aten::mul(%g, %s)
  %r : $T = aten::_grad_sum_to_size(%p, %size)
  return (%r))IR",
                                               {{"$G", g}, {"$T", kT}});
  fuseGraph(graph);
  FileCheck()
      .check("fuser::TypeGuard")
      ->check("lists=[2, 4, 5]")
      ->check("(%g, %x, %size)")
      ->check("fuser::FusionGroup")
      ->run(*graph);
  Node* group = collectFusionGroups(graph->block()).at(0);
  EXPECT_EQ(group->inputs().size(), 2);  // the size is no kernel argument
  FileCheck()
      .check("int[] = prim::Constant[value=[4, 5]]")
      ->check("aten::sigmoid")
      ->check("aten::_grad_sum_to_size")
      ->run(*group->g(c10::attr::Subgraph));
}

// Summing dim 0 away and dim 1 to size 1 gives a result no row reduction returns (it
// keeps every reduced dim or none): the sum stays an ATen op.
TEST_F(PassesTest, GradSumToSizeOverLeadingAndUnitDimsStaysOut) {
  const std::string g = "Float(6, 4, 5, strides=[20, 5, 1], requires_grad=0, device=cpu)";
  const std::string r = "Float(1, 5, strides=[5, 1], requires_grad=0, device=cpu)";
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%g : $G, %x : $G, %size : int[]):
  %s : $G = aten::sigmoid(%x)
  %p : $G = aten::mul(%g, %s)
  %r : $R = aten::_grad_sum_to_size(%p, %size)
  return (%r))IR",
                                               {{"$G", g}, {"$R", r}});
  fuseGraph(graph);
  EXPECT_EQ(countGroups(graph), 1);
  EXPECT_EQ(countKind(graph->block(), c10::aten::_grad_sum_to_size), 1);
  Node* group = collectFusionGroups(graph->block()).at(0);
  EXPECT_EQ(countKind(group->g(c10::attr::Subgraph)->block(), c10::aten::_grad_sum_to_size), 0);
}

// Attention's tail in autodiff's forward: the probabilities and the eval-mode dropout's
// output are both saved; the dropout's output is the probabilities themselves.
const std::string kAttentionTail = R"IR(
graph(%s : $T, %v : $M):
  %scale : float = prim::Constant[value=0.5]()
  %dim : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %p : float = prim::Constant[value=0.1]()
  %train : bool = prim::Constant[value=0]()
  %scaled : $T = aten::mul(%s, %scale)
  %probs : $T = aten::softmax(%scaled, %dim, %none)
  %kept : $T, %mask : $B = aten::native_dropout(%probs, %p, %train)
  %y : $T = aten::matmul(%kept, %v)
  return (%y, %probs, %kept, %mask))IR";

GraphPtr attentionTail(const std::string& after_dropout = "") {
  std::string ir = kAttentionTail;
  if (!after_dropout.empty()) ir.replace(ir.find("  return"), 0, after_dropout);
  return testing_helpers::parseWithTypes(
      ir, {{"$T", kT}, {"$M", kM}, {"$B", "Bool(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"}});
}

Node* onlyNativeDropout(Node* group) {
  for (Node* node : group->g(c10::attr::Subgraph)->nodes()) {
    if (node->kind() == c10::aten::native_dropout) return node;
  }
  return nullptr;
}

TEST_F(PassesTest, EvalDropoutOutputIsItsInput) {
  auto graph = attentionTail();
  fuseGraph(graph);
  Node* group = collectFusionGroups(graph->block()).at(0);
  Node* dropout = onlyNativeDropout(group);
  ASSERT_NE(dropout, nullptr);
  EXPECT_FALSE(dropout->output(0)->hasUses());  // the group writes no copy
  EXPECT_EQ(group->outputs().size(), 2);        // the probabilities and the mask
  EXPECT_EQ(graph->outputs()[1], graph->outputs()[2]);
}

// A view of the dropout's output, or of its input, could be written through: the
// dropout keeps its copy.
TEST_F(PassesTest, EvalDropoutWithAViewKeepsItsCopy) {
  for (const char* viewed : {"%kept", "%probs"}) {
    auto graph = attentionTail(std::string("  %view : Tensor = aten::t(") + viewed + ")\n");
    graph->registerOutput(graph->block()->nodes().rbegin()->output());
    fuseGraph(graph);
    Node* dropout = onlyNativeDropout(collectFusionGroups(graph->block()).at(0));
    ASSERT_NE(dropout, nullptr) << viewed;
    EXPECT_TRUE(dropout->output(0)->hasUses()) << viewed;
    EXPECT_NE(graph->outputs()[1], graph->outputs()[2]) << viewed;
  }
}

// p 0 keeps every element whatever train is: no random mask, no branch on train.
TEST_F(PassesTest, ZeroProbabilityDropoutDrawsNothing) {
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : $T, %train : bool):
  %p : float = prim::Constant[value=0.]()
  %y : $T = aten::sigmoid(%x)
  %kept : $T, %mask : $B = aten::native_dropout(%y, %p, %train)
  %z : $T = aten::mul(%kept, %x)
  return (%z, %mask))IR",
                                               {{"$T", kT}, {"$B", "Bool(4, 5, strides=[5, 1], requires_grad=0, device=cpu)"}});
  fuseGraph(graph);
  EXPECT_EQ(countGroups(graph), 1);
  EXPECT_EQ(countKind(graph->block(), philoxStateSymbol()), 0);
  EXPECT_EQ(countKind(graph->block(), c10::prim::If), 1);  // the guard's only
  Node* dropout = onlyNativeDropout(collectFusionGroups(graph->block()).at(0));
  ASSERT_NE(dropout, nullptr);
  EXPECT_EQ(torch::jit::toIValue(dropout->input(2)), c10::IValue(false));
  EXPECT_FALSE(dropout->output(0)->hasUses());
}

using Counts = std::pair<size_t, size_t>;  // aten ops left, sums in groups

// native_layer_norm_backward on `device` given `mask`, all three gradients read (the
// input's by a fusible add), through the whole pipeline. Returns the aten ops left and
// the sums inside groups.
// `shape_input`: normalized_shape is an input of the graph (nanoGPT's
// `F.layer_norm(x, self.weight.shape, ...)` gives the backward such a list), not a constant.
Counts fuseLayerNormBackward(const std::string& device, const std::vector<bool>& mask,
                             const std::string& dtype = "Float",
                             const std::string& stats_dtype = "Float", bool shape_input = false,
                             std::string* printed = nullptr) {
  const std::string tail = "requires_grad=0, device=" + device + ")";
  std::string ir = R"IR(
graph(%g : $X, %x : $X, %mean : $S, %rstd : $S, %w : $W, %b : $W, %mask : bool[]@LIST_INPUT):
  %two : float = prim::Constant[value=2.]()
  %one : float = prim::Constant[value=1.]()
  @LIST_CONSTANT
  %h : $X = aten::mul(%g, %two)
  %gi : $X, %gw : $W, %gb : $W = aten::native_layer_norm_backward(%h, %x, %shape, %mean, %rstd, %w, %b, %mask)
  %out : $X = aten::add(%gi, %one, %one)
  return (%out, %gw, %gb))IR";
  auto graph = testing_helpers::parseWithTypes(
      ir, {{"$X", dtype + "(6, 8, 16, strides=[128, 16, 1], " + tail},
           {"$S", stats_dtype + "(6, 8, 1, strides=[8, 1, 1], " + tail},
           {"$W", dtype + "(16, strides=[1], " + tail},
           {"@LIST_INPUT", shape_input ? ", %shape : int[]" : ""},
           {"@LIST_CONSTANT", shape_input ? "" : "%shape : int[] = prim::Constant[value=[16]]()"}});
  // A constant mask (the IR parser would read [1, 1, 1] as ints).
  c10::List<bool> bools;
  for (bool asked : mask) bools.push_back(asked);
  for (Node* node : graph->nodes()) {
    if (node->kind() != c10::aten::native_layer_norm_backward) continue;
    torch::jit::WithInsertPoint at(node);
    node->replaceInput(7, graph->insertConstant(bools));
  }
  fuseGraph(graph);
  if (printed) *printed = graph->toString();
  size_t sums = 0;
  for (Node* group : collectFusionGroups(graph->block())) {
    sums += countKind(group->g(c10::attr::Subgraph)->block(), c10::aten::sum);
  }
  return {countKind(graph->block(), c10::aten::native_layer_norm_backward), sums};
}

// layer_norm's weight and bias gradients become sums over the leading dims in a group,
// and no native_layer_norm_backward is left: for CUDA's float statistics of a 16-bit
// input, and for the CPU's 16-bit ones (widened to float in the group).
TEST_F(PassesTest, LayerNormWeightAndBiasGradientsSummed) {
  EXPECT_EQ(fuseLayerNormBackward("cuda:0", {true, true, true}), Counts(0, 2));
  EXPECT_EQ(fuseLayerNormBackward("cpu", {true, true, true}), Counts(0, 2));
  EXPECT_EQ(fuseLayerNormBackward("cpu", {true, true, true}, "Double", "Double"), Counts(0, 2));
  EXPECT_EQ(fuseLayerNormBackward("cuda:0", {true, true, true}, "BFloat16"), Counts(0, 2));
  EXPECT_EQ(fuseLayerNormBackward("cpu", {true, true, true}, "BFloat16", "BFloat16"),
            Counts(0, 2));
}

// A normalized_shape read as an input list: the guard pins it to the weight's sizes,
// and the input gradient joins its neighbours' row group as with a constant list.
TEST_F(PassesTest, LayerNormBackwardOfAListInputPinsIt) {
  std::string printed;
  EXPECT_EQ(fuseLayerNormBackward("cpu", {true, true, true}, "Float", "Float",
                                  /*shape_input=*/true, &printed),
            Counts(0, 2));
  FileCheck()
      .check("lists=[1, 16]")
      ->check("fuser::FusionGroup")
      ->check("fuser::layer_norm_input_grad")
      ->run(printed);
}

// A gradient the mask leaves out is undefined in eager's result: where one is read
// anyway, the weight and bias gradients stay with the ATen op.
TEST_F(PassesTest, LayerNormGradientsTheMaskLeavesOutStayWithAten) {
  EXPECT_EQ(fuseLayerNormBackward("cuda:0", {true, true, false}), Counts(1, 0));
}

// Runs `%ok = TypeGuard[types=[Float(4,5) cpu]](%x)` on `x` through the interpreter.
bool runGuard(const at::Tensor& x) {
  auto graph = parse(R"IR(
graph(%x : Tensor):
  return (%x))IR");
  Node* guard = graph->create(typeGuardSymbol(), {graph->inputs()[0]}, 1);
  guard->tys_(c10::attr::types, {c10::TensorType::create(torch::zeros({4, 5}))});
  guard->output()->setType(c10::BoolType::get());
  graph->prependNode(guard);
  graph->eraseOutput(0);
  graph->registerOutput(guard->output());
  torch::jit::Code code(graph, "guard");
  torch::jit::Stack stack{x};
  torch::jit::InterpreterState(code).run(stack);
  return stack.back().toBool();
}

TEST(TypeGuardOp, ChecksDtypeRankAndGradNotSizes) {
  resetStats();
  EXPECT_TRUE(runGuard(torch::zeros({4, 5})));
  EXPECT_TRUE(runGuard(torch::zeros({17, 3})));     // a new batch size still passes
  EXPECT_TRUE(runGuard(torch::zeros({5, 4}).t()));  // strides are not checked either
  EXPECT_EQ(stats().guard_failures, 0);
  EXPECT_FALSE(runGuard(torch::zeros({4, 5}, at::kDouble)));
  EXPECT_FALSE(runGuard(torch::zeros({4, 5, 1})));
  EXPECT_FALSE(runGuard(at::Tensor()));
  auto leaf = torch::zeros({4, 5}).requires_grad_();
  EXPECT_FALSE(runGuard(leaf));
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(runGuard(leaf));
  }
  EXPECT_EQ(stats().guard_failures, 4);
}

// `%ok = TypeGuard[types=[Float(4,5) cpu], lists=[2, 4, 5]](%x, %size)` on a list.
bool runListGuard(const c10::IValue& size) {
  auto graph = parse(R"IR(
graph(%x : Tensor, %size : int[]?):
  return (%x))IR");
  Node* guard = graph->create(typeGuardSymbol(), {graph->inputs()[0], graph->inputs()[1]}, 1);
  guard->tys_(c10::attr::types, {c10::TensorType::create(torch::zeros({4, 5}))});
  guard->is_(typeGuardListsAttr(), {2, 4, 5});
  guard->output()->setType(c10::BoolType::get());
  graph->prependNode(guard);
  graph->eraseOutput(0);
  graph->registerOutput(guard->output());
  torch::jit::Code code(graph, "guard");
  torch::jit::Stack stack{torch::zeros({4, 5}), size};
  torch::jit::InterpreterState(code).run(stack);
  return stack.back().toBool();
}

TEST(TypeGuardOp, ChecksPinnedLists) {
  EXPECT_TRUE(runListGuard(c10::List<int64_t>({4, 5})));
  EXPECT_FALSE(runListGuard(c10::List<int64_t>({5})));
  EXPECT_FALSE(runListGuard(c10::List<int64_t>({4, 1})));
  EXPECT_FALSE(runListGuard(c10::List<int64_t>({4, 5, 1})));
  EXPECT_FALSE(runListGuard(c10::IValue()));
}

}  // namespace
}  // namespace fuser
