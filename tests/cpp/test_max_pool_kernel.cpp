// Graph tests of passes/max_pool_kernel.cpp: which max pools become fuser::max_pool2d.
// Types name CUDA devices; nothing runs, so no GPU is needed.
#include <gtest/gtest.h>

#include <string>

#include "config.h"
#include "ir_test_helpers.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

// A max pool of %x of type `type` (sizes 2, 8, 6, 6), returned.
GraphPtr pool(const std::string& type) {
  return testing_helpers::parseWithTypes(R"IR(
graph(%x : $X):
  %ones : int[] = prim::Constant[value=[1, 1]]()
  %twos : int[] = prim::Constant[value=[2, 2]]()
  %threes : int[] = prim::Constant[value=[3, 3]]()
  %false : bool = prim::Constant[value=0]()
  %p : Tensor = aten::max_pool2d(%x, %threes, %twos, %ones, %ones, %false)
  return (%p)
)IR",
                                         {{"$X", type}});
}

const std::string kChannelsLast = "(2, 8, 6, 6, strides=[288, 1, 48, 8], requires_grad=0, device=cuda:0)";

size_t ours(const GraphPtr& graph) {
  return testing_helpers::countKind(graph->block(), maxPoolSymbol());
}

TEST(MaxPoolKernel, ChannelsLastCudaPoolsOfEachFloatTypeRunOurKernel) {
  for (const std::string dtype : {"Float", "Half", "BFloat16"}) {
    auto graph = pool(dtype + kChannelsLast);
    useChannelsLastMaxPoolKernel(graph);
    graph->lint();
    EXPECT_EQ(ours(graph), 1u) << dtype;
    EXPECT_EQ(testing_helpers::countKind(graph->block(), c10::aten::max_pool2d), 0u);
    EXPECT_EQ(graph->outputs()[0]->node()->kind(), maxPoolSymbol());
    EXPECT_EQ(graph->outputs()[0]->node()->inputs().size(), 6u);
  }
}

TEST(MaxPoolKernel, OtherPoolsStayAtens) {
  const std::string others[] = {
      "Float(2, 8, 6, 6, strides=[288, 36, 6, 1], requires_grad=0, device=cuda:0)",  // row-major
      "Float(2, 8, 6, 6, strides=[288, 1, 48, 8], requires_grad=0, device=cpu)",
      "Double" + kChannelsLast,
      "Float(2, 8, 6, 6, strides=[288, 1, 48, 8], requires_grad=1, device=cuda:0)",
  };
  for (const std::string& type : others) {
    auto graph = pool(type);
    useChannelsLastMaxPoolKernel(graph);
    EXPECT_EQ(ours(graph), 0u) << type;
  }
}

TEST(MaxPoolKernel, OffWithTheFlag) {
  config().max_pool_kernel = false;
  auto graph = pool("Float" + kChannelsLast);
  useChannelsLastMaxPoolKernel(graph);
  config().max_pool_kernel = true;
  EXPECT_EQ(ours(graph), 0u);
}

}  // namespace
}  // namespace fuser
