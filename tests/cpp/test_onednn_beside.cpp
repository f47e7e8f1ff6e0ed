// Graph tests of passes/onednn_beside: which nodes are left to oneDNN Graph, and the
// order of the two pre-passes.
#include <gtest/gtest.h>
#include <torch/csrc/jit/codegen/onednn/interface.h>
#include <torch/csrc/jit/passes/pass_manager.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include <algorithm>
#include <string>

#include "api.h"
#include "config.h"
#include "ir_test_helpers.h"
#include "passes/fusibility.h"
#include "passes/onednn_beside.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;

// Turns oneDNN Graph's pre-pass on for one test and off again after it.
class WithOneDnn {
 public:
  WithOneDnn() { torch::jit::RegisterLlgaFuseGraph::setEnabled(true); }
  ~WithOneDnn() { torch::jit::RegisterLlgaFuseGraph::setEnabled(false); }
};

// conv -> relu -> (* 2) is one oneDNN partition; x.sigmoid() is no convolution's.
const char* kConvIr = R"IR(
graph(%x : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu),
      %w : Float(4, 4, 3, 3, strides=[36, 9, 3, 1], requires_grad=0, device=cpu),
      %b : Float(4, strides=[1], requires_grad=0, device=cpu)):
  %one : int = prim::Constant[value=1]()
  %two : float = prim::Constant[value=2.]()
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %pad : int[] = prim::Constant[value=[1, 1]]()
  %c : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::conv2d(%x, %w, %b, %ones, %pad, %ones, %one)
  %r : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::relu(%c)
  %s : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::sigmoid(%x)
  %t : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::tanh(%s)
  %m : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::mul(%r, %t)
  return (%m)
)IR";

Node* firstOfKind(torch::jit::Graph& graph, const std::string& kind) {
  for (Node* node : graph.nodes()) {
    if (node->kind().toQualString() == kind) return node;
  }
  return nullptr;
}

TEST(OneDnnBeside, PostOpsOfAConvolutionAreLeftToOneDnn) {
  WithOneDnn on;
  auto graph = testing_helpers::parseWithTypes(kConvIr, {});
  markOneDnnPatterns(graph, /*leave_patterns=*/true);
  Node* relu = firstOfKind(*graph, "aten::relu");
  ASSERT_TRUE(isLeftToOneDnn(relu));
  EXPECT_EQ(oneDnnPartner(relu), "aten::conv2d");
  EXPECT_FALSE(checkFusible(relu));
  EXPECT_NE(checkFusible(relu).reason().find("left to oneDNN Graph"), std::string::npos);
  // Not in a partition with the convolution: ours.
  EXPECT_FALSE(isLeftToOneDnn(firstOfKind(*graph, "aten::sigmoid")));
  EXPECT_FALSE(isLeftToOneDnn(firstOfKind(*graph, "aten::tanh")));
  EXPECT_TRUE(checkFusible(firstOfKind(*graph, "aten::tanh")));
  // The dry run worked on a copy: the graph itself still has no oneDNN group.
  for (Node* node : graph->nodes()) {
    EXPECT_EQ(std::string(node->kind().toQualString()).find("oneDNN"), std::string::npos);
  }
  clearOneDnnMarks(graph->block());
  EXPECT_FALSE(isLeftToOneDnn(relu));
}

TEST(OneDnnBeside, NothingIsMarkedWithoutOneDnn) {
  auto graph = testing_helpers::parseWithTypes(kConvIr, {});
  ASSERT_FALSE(oneDnnGraphRegistered());
  markOneDnnPatterns(graph, /*leave_patterns=*/true);
  for (Node* node : graph->nodes()) EXPECT_FALSE(isLeftToOneDnn(node));
}

size_t positionOf(torch::jit::GraphPassNameType id) {
  const auto& passes = torch::jit::getCustomPrePasses();
  auto it = std::find_if(passes.begin(), passes.end(),
                         [&](const auto& entry) { return entry.second == id; });
  return static_cast<size_t>(it - passes.begin());
}

size_t positionOfOneDnn() {
  const auto& passes = torch::jit::getCustomPrePasses();
  auto it = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
  EXPECT_NE(it, passes.end());
  return static_cast<size_t>(it - passes.begin());
}

TEST(OneDnnBeside, OurPassMovesBeforeOneDnnsWhenItWasRegisteredFirst) {
  WithOneDnn on;  // registered first
  auto ours = torch::jit::registerPrePass([](std::shared_ptr<torch::jit::Graph>&) {});
  ASSERT_LT(positionOfOneDnn(), positionOf(ours));
  runBeforeOneDnnGraph(ours);
  EXPECT_LT(positionOf(ours), positionOfOneDnn());
  runBeforeOneDnnGraph(ours);  // already in order: unchanged
  EXPECT_LT(positionOf(ours), positionOfOneDnn());
  torch::jit::clearPrePass(ours);
}

TEST(OneDnnBeside, AGraphOneDnnThrowsOnIsLeftAsItWas) {
  WithOneDnn on;
  runBeforeOneDnnGraph(0);  // guards oneDNN's entry
  const auto& passes = torch::jit::getCustomPrePasses();
  auto entry = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
  ASSERT_NE(entry, passes.end());
  // Wiped types: oneDNN's own pass throws on this graph.
  auto graph = testing_helpers::parseWithTypes(kConvIr, {});
  torch::jit::RemoveTensorTypeSpecializations(graph);
  EXPECT_ANY_THROW({
    auto copy = graph->copy();
    torch::jit::fuser::onednn::fuseGraph(copy);
  });
  const torch::jit::Graph* before = graph.get();
  EXPECT_NO_THROW(entry->first(graph));
  EXPECT_EQ(graph.get(), before);
  // A graph it can take is replaced by its result.
  auto typed = testing_helpers::parseWithTypes(kConvIr, {});
  entry->first(typed);
  EXPECT_GE(testing_helpers::countKind(
                typed->block(), c10::Symbol::fromQualString("prim::oneDNNFusionGroup")),
            1u);
}

// matmul -> relu -> (* sqrt(n)): attention's scale, a float computed from an int.
const char* kScalarScaleIr = R"IR(
graph(%x : Float(8, 16, strides=[16, 1], requires_grad=0, device=cpu),
      %w : Float(16, 16, strides=[16, 1], requires_grad=0, device=cpu),
      %n : int):
  %s : float = aten::sqrt(%n)
  %y : Float(8, 16, strides=[16, 1], requires_grad=0, device=cpu) = aten::matmul(%x, %w)
  %r : Float(8, 16, strides=[16, 1], requires_grad=0, device=cpu) = aten::relu(%y)
  %m : Float(8, 16, strides=[16, 1], requires_grad=0, device=cpu) = aten::mul(%r, %s)
  return (%m)
)IR";

TEST(OneDnnBeside, ScalarArithmeticIsHiddenFromOneDnn) {
  WithOneDnn on;
  runBeforeOneDnnGraph(0);  // guards oneDNN's entry
  // Alone, oneDNN's pass throws on the scalar sqrt ("could not add op to the graph").
  auto raw = testing_helpers::parseWithTypes(kScalarScaleIr, {});
  EXPECT_ANY_THROW(torch::jit::fuser::onednn::fuseGraph(raw));
  // Our dry run sees what it would take: the relu goes with the matmul.
  auto marked = testing_helpers::parseWithTypes(kScalarScaleIr, {});
  EXPECT_TRUE(markOneDnnPatterns(marked, /*leave_patterns=*/true));
  Node* relu = firstOfKind(*marked, "aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_TRUE(isLeftToOneDnn(relu));
  // Its guarded entry takes the graph; the sqrt is back in place, unwrapped.
  const auto& passes = torch::jit::getCustomPrePasses();
  auto entry = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
  ASSERT_NE(entry, passes.end());
  auto graph = testing_helpers::parseWithTypes(kScalarScaleIr, {});
  entry->first(graph);
  EXPECT_GE(testing_helpers::countKind(
                graph->block(), c10::Symbol::fromQualString("prim::oneDNNFusionGroup")),
            1u);
  Node* sqrt = firstOfKind(*graph, "aten::sqrt");
  ASSERT_NE(sqrt, nullptr);
  EXPECT_EQ(sqrt->input(0), graph->inputs()[2]);
  EXPECT_EQ(firstOfKind(*graph, "fuser::HiddenFromOneDnn"), nullptr);
  graph->lint();
}

// Enables the fuser for one test and disables it again, whatever the test's outcome.
class WithFuser {
 public:
  WithFuser() { fuser::enable(); }
  ~WithFuser() { fuser::disable(); }
};

TEST(OneDnnBeside, DisableGivesOneDnnItsOwnPassBack) {
  if (config().killed) GTEST_SKIP() << "FUSER_DISABLE=1: enable() does nothing";
  WithOneDnn on;
  auto isRaw = [](const torch::jit::GraphPassEntry& e) {
    auto* target = e.first.target<void (*)(std::shared_ptr<torch::jit::Graph>&)>();
    return target && *target == &torch::jit::fuser::onednn::fuseGraph;
  };
  const auto& passes = torch::jit::getCustomPrePasses();
  {
    WithFuser fused;
    auto entry = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
    ASSERT_NE(entry, passes.end());
    EXPECT_FALSE(isRaw(*entry));  // guarded, scalars hidden
  }  // disable()
  auto entry = std::find_if(passes.begin(), passes.end(), isOneDnnPass);
  ASSERT_NE(entry, passes.end());
  EXPECT_TRUE(isRaw(*entry));
  // Alone again, its pass throws on scalar arithmetic as it does without us.
  auto graph = testing_helpers::parseWithTypes(kScalarScaleIr, {});
  EXPECT_ANY_THROW(entry->first(graph));
}

TEST(OneDnnBeside, FullPipelineKeepsTypesForOneDnnAndLeavesNoMark) {
  WithOneDnn on;
  auto graph = testing_helpers::parseWithTypes(kConvIr, {});
  fuseGraph(graph);
  Node* relu = firstOfKind(*graph, "aten::relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_FALSE(isLeftToOneDnn(relu));
  // oneDNN's pass, which runs next, reads complete types.
  auto type = relu->output()->type()->cast<c10::TensorType>();
  ASSERT_TRUE(type);
  EXPECT_TRUE(type->scalarType().has_value());
  EXPECT_TRUE(type->sizes().concrete_sizes().has_value());
}

}  // namespace
}  // namespace fuser
