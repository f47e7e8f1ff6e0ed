// Row kernels (codegen/row_schedule.h, row_printer.h) and the partition of groups that
// reduce (passes/fusibility.h: checkRowGroup): the order of a softmax's work, which
// values are kept between loops, how CUDA lanes share a row, and which graphs make one
// group. Host code only: checked without a GPU.
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <algorithm>
#include <string>

#include "codegen/kernel_ir.h"
#include "codegen/row_printer.h"
#include "codegen/row_schedule.h"
#include "codegen/split_rows.h"
#include "ir_test_helpers.h"
#include "ops/reductions.h"
#include "passes/groups.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using c10::ScalarType;
using codegen::ExprId;
using codegen::IrOp;
using codegen::ReduceKind;
using torch::jit::Node;
using GraphPtr = std::shared_ptr<torch::jit::Graph>;

bool contains(const std::vector<ExprId>& ids, ExprId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// softmax(x) with x one float input read along the row.
struct Softmax {
  codegen::Kernel k;
  ExprId x, max, shifted, e, sum, y;
  Softmax() {
    codegen::TensorInput in{ScalarType::Float, codegen::Access::Strided};
    in.inner_unit_stride = true;
    k.inputs.push_back(in);
    codegen::IrBuilder b(k);
    x = b.load(0, ScalarType::Float);
    max = b.reduce(ReduceKind::Max, x);
    shifted = b.binary(IrOp::Sub, x, max);
    e = b.unary(IrOp::Exp, shifted);
    sum = b.reduce(ReduceKind::Sum, e);
    y = b.binary(IrOp::Div, e, sum);
    k.outputs.push_back({ScalarType::Float, y});
  }
};

TEST(RowSchedule, SoftmaxTakesTwoPassesAndAStoringLoop) {
  Softmax s;
  ASSERT_TRUE(s.k.rows);
  const codegen::RowSchedule schedule = codegen::scheduleRows(s.k);
  ASSERT_EQ(schedule.passes.size(), 2u);
  EXPECT_EQ(schedule.passes[0].reduces, std::vector<ExprId>{s.max});
  EXPECT_EQ(schedule.passes[1].reduces, std::vector<ExprId>{s.sum});
  EXPECT_TRUE(contains(schedule.passes[1].element, s.e));
  EXPECT_TRUE(contains(schedule.final_element, s.y));
  // exp(x - max) is known after one pass and read again when storing: it is kept; x is
  // loaded in the first loop and read by the second.
  EXPECT_EQ(schedule.loop[s.e], 1);
  EXPECT_TRUE(schedule.held[s.e]);
  EXPECT_EQ(schedule.loop[s.x], 0);
  EXPECT_TRUE(schedule.held[s.x]);
  EXPECT_FALSE(schedule.held[s.y]);
}

TEST(RowSchedule, LoadsWaitForTheirFirstReader) {
  // layer_norm's weight: read only by the storing loop, loaded there.
  Softmax s;
  codegen::TensorInput w{ScalarType::Float, codegen::Access::Strided};
  w.inner_unit_stride = true;
  s.k.inputs.push_back(w);
  codegen::IrBuilder b(s.k);
  const ExprId weight = b.load(1, ScalarType::Float);
  s.k.outputs[0].value = b.binary(IrOp::Mul, s.y, weight);
  const codegen::RowSchedule schedule = codegen::scheduleRows(s.k);
  EXPECT_EQ(schedule.loop[weight], 2);
  EXPECT_FALSE(schedule.held[weight]);
}

TEST(RowSchedule, APerRowOutputMayNotVaryAlongTheRow) {
  Softmax s;
  s.k.outputs[0].per_row = true;  // the softmax itself varies
  EXPECT_THROW(codegen::scheduleRows(s.k), c10::Error);
  s.k.outputs[0].value = s.sum;
  EXPECT_NO_THROW(codegen::scheduleRows(s.k));
}

TEST(CudaRowShape, LanesTakeSixtyFourBytesAndVectorsOfSixteen) {
  // 1024 floats: 64 lanes of 16, as 4 runs of 4; 1024 halves: one warp, 4 runs of 8.
  auto f32 = codegen::cudaRowShape(1024, 4, true);
  EXPECT_EQ(f32.lanes, 64);
  EXPECT_EQ(f32.vector, 4);
  EXPECT_EQ(f32.chunks, 4);
  auto f16 = codegen::cudaRowShape(1024, 2, true);
  EXPECT_EQ(f16.lanes, 32);
  EXPECT_EQ(f16.vector, 8);
  EXPECT_EQ(f16.chunks, 4);
  // Misaligned or odd rows take one element at a time; rows too long to hold stream.
  EXPECT_EQ(codegen::cudaRowShape(1024, 4, false).vector, 1);
  EXPECT_EQ(codegen::cudaRowShape(37, 4, true).vector, 1);
  EXPECT_EQ(codegen::cudaRowShape(1 << 20, 4, true).chunks, 0);
  EXPECT_EQ(codegen::cudaRowShape(1 << 20, 4, true).lanes, 1024);
  // Short rows share a warp, at least 8 elements a lane.
  EXPECT_EQ(codegen::cudaRowShape(16, 4, true).lanes, 8);
  EXPECT_EQ(codegen::cudaRowShape(256, 2, true).lanes, 32);
}

TEST(CudaRowPrinter, ArgumentsFitOneStructOfWords) {
  Softmax s;
  s.k.outer_ndim = 1;
  s.k.inner_ndim = 1;
  // Pointers (1 input, 1 output), 2 sizes, 2 strides, a double, an int, the row count.
  EXPECT_EQ(codegen::cudaRowArgWords(s.k), 2 + 2 + 2 + 1 + 1 + 1);
  s.k.row_lanes = 64;
  s.k.row_chunks = 4;
  s.k.row_vector = 4;
  const std::string source = codegen::printCudaRowKernel(s.k);
  EXPECT_NE(source.find("fx_row_reduce<64>"), std::string::npos);
  EXPECT_NE(source.find("FxVec<float, 4>"), std::string::npos);
  // A block takes its own rows, 64 threads at least (rows of 32 lanes go two to a block);
  // column kernels and slices of rows keep blocks of 256.
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 64);
  s.k.row_lanes = 32;
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 64);
  s.k.row_lanes = 512;
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 512);
  s.k.row_lanes = 1;
  s.k.columns = true;
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 256);
  s.k.columns = false;
  s.k.row_lanes = 32;
  s.k.row_stage = 0;
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 256);
  s.k.row_stage = -1;
  s.k.outputs[0].column_partial = true;  // blocks walk many rows, their count resident
  EXPECT_EQ(codegen::cudaRowBlock(s.k), 256);
}

const std::string kX = "Float(4, 6, strides=[6, 1], requires_grad=0, device=cpu)";
const std::string kRow = "Float(4, 1, strides=[1, 1], requires_grad=0, device=cpu)";
const std::string kRows = "Float(4, strides=[1], requires_grad=0, device=cpu)";

GraphPtr partitioned(const std::string& ir) {
  auto graph = testing_helpers::parseWithTypes(ir, {{"$X", kX}, {"$ROWS", kRows}, {"$ROW", kRow}});
  prepareGraph(graph);
  formFusionGroups(graph);
  return graph;
}

size_t groupsAfterPartition(const std::string& ir) {
  return collectFusionGroups(partitioned(ir)->block()).size();
}

// Nodes of `kind` inside groups, and outside.
std::pair<size_t, size_t> insideAndOutside(const GraphPtr& graph, c10::Symbol kind) {
  size_t inside = 0;
  for (Node* group : collectFusionGroups(graph->block())) {
    inside += testing_helpers::countKind(group->g(torch::jit::attr::Subgraph)->block(), kind);
  }
  return {inside, testing_helpers::countKind(graph->block(), kind)};
}

TEST(RowPartition, SoftmaxJoinsItsNeighbours) {
  const std::string ir = R"IR(
graph(%x : $X):
  %half : float = prim::Constant[value=0.5]()
  %dim : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::mul(%x, %half)
  %s : $X = aten::softmax(%a, %dim, %none)
  %y : $X = aten::mul(%s, %half)
  return (%y))IR";
  auto graph = testing_helpers::parseWithTypes(ir, {{"$X", kX}});
  prepareGraph(graph);
  formFusionGroups(graph);
  const auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(countComputeNodes(groups[0]), 4u);  // two muls, and softmax counts twice
}

TEST(RowPartition, AReductionThatDropsItsDimsFeedsNothing) {
  // sum(x, -1) has shape [4]: what reads it broadcasts it along the wrong dim for a row
  // kernel, so the add stays apart.
  auto graph = partitioned(R"IR(
graph(%x : $X):
  %two : float = prim::Constant[value=2.]()
  %one : int = prim::Constant[value=1]()
  %dims : int[] = prim::Constant[value=[-1]]()
  %keep : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::mul(%x, %two)
  %s : $ROWS = aten::sum(%a, %dims, %keep, %none)
  %t : $ROWS = aten::add(%s, %two, %one)
  return (%t))IR");
  EXPECT_EQ(insideAndOutside(graph, c10::aten::sum), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::add), std::make_pair(size_t{0}, size_t{1}));
}

TEST(RowPartition, ALoneSoftmaxIsAGroupALoneAmaxIsNot) {
  EXPECT_EQ(groupsAfterPartition(R"IR(
graph(%x : $X):
  %dim : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %s : $X = aten::softmax(%x, %dim, %none)
  return (%s))IR"), 1u);
  EXPECT_EQ(groupsAfterPartition(R"IR(
graph(%x : $X):
  %dims : int[] = prim::Constant[value=[-1]]()
  %keep : bool = prim::Constant[value=1]()
  %m : $ROW = aten::amax(%x, %dims, %keep)
  return (%m))IR"), 0u);
}

TEST(RowPartition, ReductionsOfDifferentShapesStayApart) {
  // amax keeps a [4, 1] value; summing that over its last dim would read another shape
  // than the amax did, so the sum does not join (the group would never run a kernel).
  auto graph = partitioned(R"IR(
graph(%x : $X):
  %two : float = prim::Constant[value=2.]()
  %dims : int[] = prim::Constant[value=[-1]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::mul(%x, %two)
  %m : $ROW = aten::amax(%a, %dims, %keep)
  %s : $ROW = aten::sum(%m, %dims, %keep, %none)
  return (%s))IR");
  // (The sum, a float sum of contiguous CPU rows, is a group of its own.)
  const std::vector<Node*> groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 2u);
  for (Node* group : groups) {
    torch::jit::Block* body = group->g(torch::jit::attr::Subgraph)->block();
    EXPECT_EQ(testing_helpers::countKind(body, c10::aten::amax) +
                  testing_helpers::countKind(body, c10::aten::sum),
              1u);
  }
  EXPECT_EQ(insideAndOutside(graph, c10::aten::amax), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::sum), std::make_pair(size_t{1}, size_t{0}));
}

TEST(RowPartition, ALoneCpuFloatMeanOfRowsIsAGroupOthersAreNot) {
  // The CPU row kernel sums float rows as explicit vectors, ahead of ATen's mean (three
  // kernels); a double mean and a channels-last one stay with ATen.
  const std::string mean = R"IR(
graph(%x : $T):
  %dims : int[] = prim::Constant[value=[2, 3]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %m : $O = aten::mean(%x, %dims, %keep, %none)
  return (%m))IR";
  auto groupsFor = [&](const std::string& type) {
    const std::string out = type.substr(0, type.find('(')) +
                            "(2, 8, 1, 1, strides=[8, 1, 1, 1], requires_grad=0, device=cpu)";
    auto graph = testing_helpers::parseWithTypes(mean, {{"$T", type}, {"$O", out}});
    prepareGraph(graph);
    formFusionGroups(graph);
    return collectFusionGroups(graph->block()).size();
  };
  EXPECT_EQ(groupsFor("Float(2, 8, 7, 7, strides=[392, 49, 7, 1], requires_grad=0, device=cpu)"), 1u);
  EXPECT_EQ(groupsFor("Double(2, 8, 7, 7, strides=[392, 49, 7, 1], requires_grad=0, device=cpu)"), 0u);
  EXPECT_EQ(groupsFor("Float(2, 8, 7, 7, strides=[392, 1, 56, 8], requires_grad=0, device=cpu)"), 0u);
}

TEST(RowPartition, AdaptiveAveragePoolsToOneElementAreCpuMeans) {
  const std::string pool = R"IR(
graph(%x : $T):
  %size : int[] = prim::Constant[value=[$S, $S]]()
  %p : $O = aten::adaptive_avg_pool2d(%x, %size)
  return (%p))IR";
  auto groupsFor = [&](const std::string& type, const std::string& size) {
    std::string ir = pool;
    for (size_t at; (at = ir.find("$S")) != std::string::npos;) ir.replace(at, 2, size);
    const std::string out = "Float(2, 8, " + size + ", " + size + ", requires_grad=0, device=cpu)";
    auto graph = testing_helpers::parseWithTypes(ir, {{"$T", type}, {"$O", out}});
    prepareGraph(graph);
    formFusionGroups(graph);
    return collectFusionGroups(graph->block()).size();
  };
  const std::string nchw = "Float(2, 8, 7, 7, strides=[392, 49, 7, 1], requires_grad=0, device=cpu)";
  EXPECT_EQ(groupsFor(nchw, "1"), 1u);
  EXPECT_EQ(groupsFor(nchw, "2"), 0u);  // more than one element per channel: ATen's
  EXPECT_EQ(groupsFor("Float(2, 8, 7, 7, strides=[392, 1, 56, 8], requires_grad=0, device=cpu)",
                      "1"),
            0u);  // channels-last: eager restrides the result
}

TEST(RowPartition, KeptDimsBroadcastBack) {
  EXPECT_EQ(groupsAfterPartition(R"IR(
graph(%x : $X):
  %one : int = prim::Constant[value=1]()
  %dims : int[] = prim::Constant[value=[-1]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %m : $ROW = aten::mean(%x, %dims, %keep, %none)
  %c : $X = aten::sub(%x, %m, %one)
  %r : $X = aten::relu(%c)
  return (%r, %m))IR"), 1u);
}

TEST(RowPartition, SiblingReductionsOfOneTensorShareAGroup) {
  // mean and var of x, neither reading the other: one group reads x once for both.
  EXPECT_EQ(groupsAfterPartition(R"IR(
graph(%x : $X):
  %zero : int = prim::Constant[value=0]()
  %dims : int[] = prim::Constant[value=[-1]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %m : $ROW = aten::mean(%x, %dims, %keep, %none)
  %v : $ROW = aten::var(%x, %dims, %zero, %keep)
  return (%m, %v))IR"), 1u);
}

// A row mean beside a column sum of x ($COL: the sum's type).
const char* kMeanBesideColumnSum = R"IR(
graph(%x : $X):
  %two : float = prim::Constant[value=2.]()
  %last : int[] = prim::Constant[value=[-1]]()
  %first : int[] = prim::Constant[value=[0]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::mul(%x, %two)
  %m : $ROW = aten::mean(%a, %last, %keep, %none)
  %b : $X = aten::mul(%x, %two)
  %s : $COL = aten::sum(%b, %first, %keep, %none)
  return (%m, %s))IR";

// `ir` partitioned with $X [4, 6], $ROW [4, 1] and $COL [1, 6] floats on `device`.
GraphPtr partitionedOn(const std::string& ir, const std::string& device) {
  auto type = [&](const std::string& sizes, const std::string& strides) {
    return "Float(" + sizes + ", strides=[" + strides + "], requires_grad=0, device=" + device + ")";
  };
  auto graph = testing_helpers::parseWithTypes(
      ir, {{"$X", type("4, 6", "6, 1")}, {"$ROW", type("4, 1", "1, 1")}, {"$COL", type("1, 6", "6, 1")}});
  prepareGraph(graph);
  formFusionGroups(graph);
  return graph;
}

TEST(RowPartition, SiblingsOverOtherDimsStayApart) {
  // On the CPU (FUSER_COLUMN_SUMS' default) no one row shape serves both.
  auto graph = partitionedOn(kMeanBesideColumnSum, "cpu");
  EXPECT_EQ(collectFusionGroups(graph->block()).size(), 2u);
}

// The same graph on CUDA, where leading-dims sums join the row group beside them
// (config.h: column_sums): the row kernel sums %b as it walks its rows. A sum whose
// result the group would read again stays apart.
GraphPtr partitionedOnCuda(const std::string& ir) { return partitionedOn(ir, "cuda:0"); }

TEST(ColumnSums, ALeadingDimSumJoinsTheRowsBesideItOnCuda) {
  auto graph = partitionedOnCuda(kMeanBesideColumnSum);
  ASSERT_EQ(collectFusionGroups(graph->block()).size(), 1u);
  EXPECT_EQ(insideAndOutside(graph, c10::aten::sum), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::mean), std::make_pair(size_t{1}, size_t{0}));
}

TEST(ColumnSums, ASumTheGroupWouldReadStaysApart) {
  auto graph = partitionedOnCuda(R"IR(
graph(%x : $X):
  %two : float = prim::Constant[value=2.]()
  %last : int[] = prim::Constant[value=[-1]]()
  %first : int[] = prim::Constant[value=[0]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %m : $ROW = aten::mean(%x, %last, %keep, %none)
  %s : $COL = aten::sum(%x, %first, %keep, %none)
  %d : $X = aten::sub(%x, %m, %two)
  %e : $X = aten::mul(%d, %s)
  return (%e))IR");
  for (Node* group : collectFusionGroups(graph->block())) {
    auto* sub = group->g(torch::jit::attr::Subgraph)->block();
    EXPECT_FALSE(testing_helpers::countKind(sub, c10::aten::sum) > 0 &&
                 testing_helpers::countKind(sub, c10::aten::mean) > 0);
  }
}

// Reductions over the leading dims: rows are columns (kept dim 1, of 6), stored per row.
const std::string kColumn = "Float(1, 6, strides=[6, 1], requires_grad=0, device=cpu)";
const std::string kColumns = "Float(6, strides=[1], requires_grad=0, device=cpu)";

GraphPtr partitionedColumns(const std::string& ir) {
  auto graph =
      testing_helpers::parseWithTypes(ir, {{"$X", kX}, {"$COL", kColumn}, {"$KEPT", kColumns}});
  prepareGraph(graph);
  formFusionGroups(graph);
  return graph;
}

TEST(ColumnPartition, ALeadingDimSumJoinsItsPrologue) {
  auto graph = partitionedColumns(R"IR(
graph(%x : $X, %y : $X):
  %dims : int[] = prim::Constant[value=[0]]()
  %keep : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %p : $X = aten::mul(%x, %y)
  %s : $KEPT = aten::sum(%p, %dims, %keep, %none)
  %m : $KEPT = aten::amax(%p, %dims, %keep)
  return (%s, %m))IR");
  EXPECT_EQ(insideAndOutside(graph, c10::aten::sum), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::amax), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::mul), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(collectFusionGroups(graph->block()).size(), 1u);
}

TEST(ColumnPartition, AWholeOutputJoinsTheColumnSum) {
  // %p is also returned whole: the column kernel stores it through eager's layout in the
  // walk that sums it, so the product and its sum make one group with two outputs.
  auto graph = partitionedColumns(R"IR(
graph(%x : $X, %y : $X):
  %dims : int[] = prim::Constant[value=[0]]()
  %keep : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %p : $X = aten::mul(%x, %y)
  %s : $COL = aten::sum(%p, %dims, %keep, %none)
  return (%s, %p))IR");
  EXPECT_EQ(insideAndOutside(graph, c10::aten::sum), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(insideAndOutside(graph, c10::aten::mul), std::make_pair(size_t{1}, size_t{0}));
  const auto groups = collectFusionGroups(graph->block());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]->outputs().size(), 2u);
}

// The first node of `kind` in `block` (not its sub-blocks).
Node* firstOf(torch::jit::Block* block, c10::Symbol kind) {
  for (Node* node : block->nodes()) {
    if (node->kind() == kind) return node;
  }
  return nullptr;
}

TEST(ColumnPartition, ASoftmaxOverALeadingDimWalksColumns) {
  // Over dim 0 of a row-major [4, 6]: the kept dim is innermost, as in its contiguous
  // result, so the column kernel reads and stores both side by side.
  auto graph = partitionedColumns(R"IR(
graph(%x : $X):
  %half : float = prim::Constant[value=0.5]()
  %dim : int = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %a : $X = aten::mul(%x, %half)
  %s : $X = aten::softmax(%a, %dim, %none)
  return (%s))IR");
  EXPECT_EQ(insideAndOutside(graph, c10::aten::softmax), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(collectFusionGroups(graph->block()).size(), 1u);
  auto* sub = collectFusionGroups(graph->block())[0]->g(torch::jit::attr::Subgraph)->block();
  auto softmax = ops::rowReductionOf(firstOf(sub, c10::aten::softmax));
  ASSERT_TRUE(softmax.has_value());
  EXPECT_EQ(softmax->dims, std::vector<int64_t>{0});
}

// layer_norm over the last dim of a transposed [4, 6] (MLP-Mixer's residual stream):
// its rows are columns of the input, runs of its contiguous result.
GraphPtr transposedLayerNorm(const std::string& device) {
  const std::string t = "Float(4, 6, strides=[1, 4], requires_grad=0, device=" + device + ")";
  const std::string x = "Float(4, 6, strides=[6, 1], requires_grad=0, device=" + device + ")";
  auto graph = testing_helpers::parseWithTypes(R"IR(
graph(%x : $T, %y : $T):
  %one : int = prim::Constant[value=1]()
  %shape : int[] = prim::Constant[value=[6]]()
  %eps : float = prim::Constant[value=1e-5]()
  %none : NoneType = prim::Constant()
  %cudnn : bool = prim::Constant[value=0]()
  %a : $T = aten::add(%x, %y, %one)
  %n : $X = aten::layer_norm(%a, %shape, %none, %none, %eps, %cudnn)
  return (%n, %a))IR",
                                               {{"$X", x}, {"$T", t}});
  prepareGraph(graph);
  formFusionGroups(graph);
  return graph;
}

TEST(ColumnPartition, ANormalizationWhoseStoreTransposesJoinsItsGroup) {
  // The column kernel stores the result through its strides (the CPU through a tile of
  // each row's elements), beside the sum its rows read.
  for (const std::string device : {"cpu", "cuda:0"}) {
    auto graph = transposedLayerNorm(device);
    EXPECT_EQ(insideAndOutside(graph, c10::aten::layer_norm), std::make_pair(size_t{1}, size_t{0}));
    EXPECT_EQ(insideAndOutside(graph, c10::aten::add), std::make_pair(size_t{1}, size_t{0}));
    auto* sub = collectFusionGroups(graph->block())[0]->g(torch::jit::attr::Subgraph)->block();
    auto norm = ops::rowReductionOf(firstOf(sub, c10::aten::layer_norm));
    ASSERT_TRUE(norm.has_value());
    EXPECT_EQ(norm->dims, std::vector<int64_t>{1});  // named: its rows lie apart
  }
}

// sum(x * y) over the rows' strided elements, for either column printer.
codegen::Kernel columnSum(int vector) {
  codegen::Kernel k;
  codegen::TensorInput in{ScalarType::Float, codegen::Access::Strided};
  k.inputs = {in, in};
  codegen::IrBuilder b(k);
  const ExprId product = b.binary(IrOp::Mul, b.load(0, ScalarType::Float), b.load(1, ScalarType::Float));
  k.outputs.push_back({ScalarType::Float, b.reduce(ReduceKind::Sum, product)});
  k.outputs[0].per_row = true;
  k.name = "fuser_rows";
  k.columns = true;
  k.row_lanes = 1;
  k.row_vector = vector;
  return k;
}

TEST(ColumnPrinter, CpuWalksBlocksOfRowsInAVectorLoop) {
  const std::string source = codegen::printCppRowKernel(columnSum(1));
  EXPECT_NE(source.find("fx_off0[" + std::to_string(codegen::kCpuColumnBlock) + "]"),
            std::string::npos);
  EXPECT_NE(source.find("#pragma omp simd"), std::string::npos);
  EXPECT_NE(source.find("double fx_acc"), std::string::npos);  // float sums in double
}

TEST(ColumnPrinter, CudaThreadsReadVectorsOfRowsAndShareThemAcrossWarps) {
  const std::string source = codegen::printCudaRowKernel(columnSum(4));
  EXPECT_NE(source.find("FxVec<float, 4> fx_w0_7"), std::string::npos);  // 8 loads a step
  EXPECT_NE(source.find("__syncthreads()"), std::string::npos);
  EXPECT_NE(source.find("sizeof(double) * 1024"), std::string::npos);  // shared partials
  EXPECT_NE(source.find("double* const fx_red_d = reinterpret_cast<double*>(fx_smem)"),
            std::string::npos);
  // Threads per slice: whole blocks of 8 warps over 32 units of 4 rows.
  EXPECT_EQ(codegen::cudaColumnThreads(1024, 4), 2048);
  EXPECT_EQ(codegen::cudaColumnThreads(1, 4), 256);
}

// columnSum with whole outputs beside it, stored through their strides: the product
// (known in the summing walk) and, where `centred`, x minus the row's sum (known after).
codegen::Kernel columnSumWithWholeOutputs(int vector, bool centred) {
  codegen::Kernel k = columnSum(vector);
  k.strided_outputs = true;
  const ExprId product = k.exprs[k.outputs[0].value].args[0];
  k.outputs.push_back({ScalarType::Float, product});
  if (centred) {
    codegen::IrBuilder b(k);
    const ExprId x = b.load(0, ScalarType::Float);
    k.outputs.push_back({ScalarType::Float, b.binary(IrOp::Sub, x, k.outputs[0].value)});
  }
  return k;
}

TEST(ColumnPrinter, WholeOutputsGoOutInTheFirstWalkThatKnowsThem) {
  const codegen::Kernel k = columnSumWithWholeOutputs(4, /*centred=*/true);
  const codegen::RowSchedule s = codegen::scheduleRows(k);
  EXPECT_EQ(s.columnStoreWalk(k, 1), 0);  // the product: beside its sum
  EXPECT_EQ(s.columnStoreWalk(k, 2), 1);  // x - sum: the storing walk after the pass
  const std::string cpu = codegen::printCppRowKernel(k);
  // Side by side where the outputs' rows are too, else at each row's own offset.
  EXPECT_NE(cpu.find("out1[fx_ooff1[0] + fx_oeo1 + fx_j]"), std::string::npos);
  EXPECT_NE(cpu.find("out2[fx_ooff2[fx_j] + fx_oeo2]"), std::string::npos);
  EXPECT_NE(cpu.find("ost1[0] == 1"), std::string::npos);
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = cpu.find(text); at != std::string::npos; at = cpu.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("for (int64_t fx_e = "), 2u);
  // Each walk that stores has a tiled form too, for inputs side by side beside an output
  // whose rows are not: its values go to a tile, each row's stored as one run.
  EXPECT_EQ(count("for (int64_t fx_e0 = "), 2u);
  EXPECT_NE(cpu.find("fx_tile2[fx_t * fx_nb + fx_j] = "), std::string::npos);
  EXPECT_NE(cpu.find("fx_row[fx_toeo2[fx_t]] = fx_tile2[fx_t * fx_nb + fx_j]"), std::string::npos);
  // No output's rows lie apart where the runtime planned it (TensorOutput::rows_apart):
  // CUDA declares no tiles, and stores in vectors where a thread's rows lie side by side.
  const std::string cuda = codegen::printCudaRowKernel(k);
  EXPECT_EQ(cuda.find("fx_tile"), std::string::npos);
  EXPECT_NE(cuda.find("FxVec<float, 4> fx_ws1_7"), std::string::npos);  // 8 vectors a step
  // Every thread of a column launch is live: its stores test only rows past the last.
  EXPECT_NE(cuda.find("      *(FxVec<float, 4>*)(out1 + fx_ooff1[0] + fx_oeo1_7)"),
            std::string::npos);
  EXPECT_NE(cuda.find("if (fx_j < fx_nb) out2[fx_ooff2[fx_j] + fx_oeo2]"), std::string::npos);
  EXPECT_EQ(cuda.find("fx_live"), std::string::npos);
  // CUDA's tiled form, in the walk that stores an output whose rows lie apart: a block
  // whose threads all read their rows side by side puts its values of it in a tile in
  // shared memory, turned by the lane, and stores them a row per run.
  codegen::Kernel apart = k;
  apart.outputs[2].rows_apart = true;
  const std::string tiled = codegen::printCudaRowKernel(apart);
  auto countTiled = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = tiled.find(text); at != std::string::npos; at = tiled.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(countTiled("for (; fx_e0 + 64 <= fx_hi; fx_e0 += 64)"), 1u);
  EXPECT_NE(tiled.find("fx_tile2[(fx_lane * 4 + fx_j) * 32 + ((0 + fx_g) ^ (fx_lane & 31))] = "),
            std::string::npos);
  EXPECT_NE(tiled.find("out2[fx_trow2[fx_k] + fx_oeo2_t] = fx_tile2[fx_k * 32 + (fx_te ^ "
                       "((fx_k / 4) & 31))]"),
            std::string::npos);
  EXPECT_EQ(countTiled("if (__syncthreads_and(fx_side_in)) {"), 1u);  // the block's vote
  // Twice the rows a block: the tiles hold 16 elements of each, so that both fit.
  codegen::Kernel wider = columnSumWithWholeOutputs(8, true);
  wider.outputs[1].rows_apart = wider.outputs[2].rows_apart = true;
  const std::string wide = codegen::printCudaRowKernel(wider);
  EXPECT_NE(wide.find("fx_tile2[(fx_lane * 8 + fx_j) * 16 + ((8 + fx_g) ^ (fx_lane & 15))]"),
            std::string::npos);
}

TEST(ColumnPrinter, ALastStageWalksItsSliceOnlyForOutputsOfTheLastReductions) {
  for (bool centred : {false, true}) {
    codegen::Kernel k = columnSumWithWholeOutputs(4, centred);
    const codegen::RowSchedule s = codegen::scheduleRows(k);
    k.row_stage = codegen::splitStages(s) - 1;
    EXPECT_EQ(codegen::lastStagePerRow(k, s), !centred);
    const std::string source = codegen::printCppRowKernel(k);
    EXPECT_EQ(source.find("fx_len") != std::string::npos, centred);
    // Per-row values go out once per row, from the first slice's unit.
    EXPECT_EQ(source.find("if (fx_s == 0) {") != std::string::npos, centred);
  }
}

// var(x) as a one-pass variance lowers it (Kernel::one_pass_variance): the row's squared
// deviations and its size.
codegen::Kernel onePassVariance() {
  codegen::Kernel k;
  codegen::TensorInput in{ScalarType::Float, codegen::Access::Strided};
  in.inner_unit_stride = true;
  k.inputs = {in};
  k.device = c10::DeviceType::CUDA;
  k.one_pass_variance = true;
  codegen::IrBuilder b(k);
  const ExprId squares = b.reduce(ReduceKind::SquaredDeviations, b.load(0, ScalarType::Float));
  k.outputs.push_back({ScalarType::Float, b.binary(IrOp::Div, squares, b.rowSize(ScalarType::Float))});
  k.outputs[0].per_row = true;
  k.name = "fuser_rows";
  return k;
}

TEST(OnePassVariance, ReadsTheRowInOnePass) {
  const codegen::Kernel k = onePassVariance();
  EXPECT_EQ(codegen::scheduleRows(k).passes.size(), 1u);
  EXPECT_TRUE(codegen::isWelford(k.exprs[1]));
}

TEST(OnePassVariance, LanesAndBlocksCombineWelfordTriples) {
  codegen::Kernel k = onePassVariance();
  k.row_lanes = 256;  // rows of several warps meet in shared memory
  const std::string source = codegen::printCudaRowKernel(k);
  EXPECT_NE(source.find("fx_welford<float> fx_acc1 = {}"), std::string::npos);
  EXPECT_NE(source.find("fx_welford_add(fx_acc1, v0)"), std::string::npos);
  EXPECT_NE(source.find("fx_combine_welford<fx_welford<float>>"), std::string::npos);
  // The per-warp partials hold three values each.
  EXPECT_NE(source.find("__shared__ double fx_partd[24]"), std::string::npos);
  EXPECT_NE(source.find("(fx_welford<float>*)fx_partd"), std::string::npos);
}

TEST(OnePassVariance, SlicesPassTriplesThroughTheWorkspace) {
  codegen::Kernel k = onePassVariance();
  const std::vector<codegen::SplitBuffer> buffers = codegen::splitBuffers(k, codegen::scheduleRows(k));
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_TRUE(buffers[0].welford);
  EXPECT_EQ(buffers[0].elementBytes(), 12);
  k.row_stage = 0;
  EXPECT_NE(codegen::printCudaRowKernel(k).find("fx_buf0[fx_u] = fx_tot1"), std::string::npos);
  k.row_stage = 1;
  const std::string last = codegen::printCudaRowKernel(k);
  EXPECT_NE(last.find("fx_welford<float>* __restrict__ fx_buf0"), std::string::npos);
  EXPECT_NE(last.find("fx_welford<float> fx_fin1 = {}"), std::string::npos);
}

TEST(OnePassVariance, ColumnsShareTriplesAcrossWarps) {
  codegen::Kernel k = onePassVariance();
  k.inputs[0].inner_unit_stride = false;
  k.columns = true;
  k.row_lanes = 1;
  k.row_vector = 4;
  const std::string source = codegen::printCudaRowKernel(k);
  EXPECT_NE(source.find("sizeof(fx_welford<float>) * 1024"), std::string::npos);
  EXPECT_NE(source.find("fx_welford<float>* const fx_red_wf"), std::string::npos);
  EXPECT_NE(source.find("fx_acc1[fx_j] = fx_welford_add(fx_acc1[fx_j], v0)"), std::string::npos);
}

TEST(OnePassVariance, CpuKernelsTakeTwoPasses) {
  EXPECT_THROW(codegen::printCppRowKernel(onePassVariance()), c10::Error);
}

}  // namespace
}  // namespace fuser
