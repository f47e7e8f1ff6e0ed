// output_layout.cpp replays ATen's allocation rules; these tests ask ATen itself, over
// pairs of the layouts a group meets (contiguous, transposed, permuted, channels-last,
// expanded, sliced, size-1 dimensions, 0-dim, empty): sizes and every stride must agree.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/output_layout.h"

namespace fuser::runtime {
namespace {

std::vector<std::pair<std::string, at::Tensor>> layouts() {
  const at::Tensor base = at::randn({4, 6, 5});
  return {
      {"contiguous", base},
      {"transposed", base.transpose(0, 2).contiguous().transpose(0, 2)},
      {"permuted", at::randn({6, 5, 4}).permute({2, 0, 1})},
      {"view_transposed", at::randn({5, 6, 4}).transpose(0, 2)},
      {"expanded", at::randn({6, 1}).expand({4, 6, 5})},
      {"sliced_inner", at::randn({4, 6, 9}).slice(2, 1, 6)},
      {"every_other", at::randn({8, 6, 5}).slice(0, 0, 8, 2)},
      {"row", at::randn({5})},
      {"column", at::randn({6, 1})},
      {"size_one_odd_stride", at::randn({4, 6, 5}).slice(0, 1, 2)},
      {"zero_dim", at::randn({})},
  };
}

std::vector<std::pair<std::string, at::Tensor>> layouts4d() {
  const at::Tensor x = at::randn({2, 3, 4, 5});
  return {
      {"nchw", x},
      {"nhwc", x.contiguous(at::MemoryFormat::ChannelsLast)},
      {"bias", at::randn({3, 1, 1})},
      {"nc11", at::randn({2, 3, 1, 1})},
      {"nc11_channels_last", at::randn({2, 3, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast)},
      {"n1hw", at::randn({2, 1, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast)},
      {"permuted", at::randn({5, 4, 3, 2}).permute({3, 2, 1, 0})},
  };
}

Layout layoutOf(const at::Tensor& t) {
  Layout l;
  l.sizes.assign(t.sizes().begin(), t.sizes().end());
  l.strides.assign(t.strides().begin(), t.strides().end());
  return l;
}

void expectLayout(const Layout& ours, const at::Tensor& eager, const std::string& what) {
  EXPECT_EQ(c10::IntArrayRef(ours.sizes), eager.sizes()) << what;
  EXPECT_EQ(c10::IntArrayRef(ours.strides), eager.strides()) << what;
}

void expectBinaryMatches(const std::vector<std::pair<std::string, at::Tensor>>& cases) {
  for (const auto& [a_name, a] : cases) {
    for (const auto& [b_name, b] : cases) {
      if (!at::infer_size(a.sizes(), b.sizes()).size() && a.dim() + b.dim() > 0) continue;
      const Layout la = layoutOf(a), lb = layoutOf(b);
      const Layout* operands[] = {&la, &lb};
      expectLayout(iteratorLayout(operands), at::add(a, b), a_name + " + " + b_name);
      // A Python scalar is a 0-dim operand to ATen.
      const Layout* with_scalar[] = {&la, nullptr};
      expectLayout(iteratorLayout(with_scalar), at::add(a, 1.5), a_name + " + 1.5");
    }
  }
}

TEST(OutputLayout, ElementwiseResultsMatchATen) { expectBinaryMatches(layouts()); }

TEST(OutputLayout, FourDimensionalResultsMatchATen) { expectBinaryMatches(layouts4d()); }

TEST(OutputLayout, UnaryResultsMatchATen) {
  for (const auto& cases : {layouts(), layouts4d()}) {
    for (const auto& [name, t] : cases) {
      const Layout l = layoutOf(t);
      const Layout* operands[] = {&l};
      expectLayout(iteratorLayout(operands), at::exp(t), "exp " + name);
    }
  }
}

TEST(OutputLayout, ThreeOperandsMatchATen) {
  const at::Tensor cond = at::randn({4, 6, 5}).transpose(0, 1).gt(0);
  for (const auto& [name, t] : layouts()) {
    const at::Tensor other = at::randn({5});
    const Layout lc = layoutOf(cond.transpose(0, 1)), lt = layoutOf(t), lo = layoutOf(other);
    const Layout* operands[] = {&lc, &lt, &lo};
    expectLayout(iteratorLayout(operands), at::where(cond.transpose(0, 1), t, other),
                 "where(cond, " + name + ", row)");
  }
}

TEST(OutputLayout, ConversionsPreserveAsATenDoes) {
  for (const auto& cases : {layouts(), layouts4d()}) {
    for (const auto& [name, t] : cases) {
      expectLayout(preservedLayout(layoutOf(t)), t.to(at::kDouble), "to(double) " + name);
    }
  }
}

TEST(OutputLayout, BatchNormAllocatesAsATenDoes) {
  std::vector<std::pair<std::string, at::Tensor>> cases = layouts4d();
  for (auto& c : layouts()) {
    if (c.second.dim() >= 2) cases.push_back(c);
  }
  const at::Tensor x5 = at::randn({2, 3, 4, 2, 3});
  cases.emplace_back("ncdhw", x5);
  cases.emplace_back("ndhwc", x5.contiguous(at::MemoryFormat::ChannelsLast3d));
  cases.emplace_back("nc_transposed", at::randn({3, 2}).t());
  for (const auto& [name, x] : cases) {
    const int64_t c = x.size(1);
    const at::Tensor y = at::batch_norm(x, at::ones({c}), at::zeros({c}), at::zeros({c}),
                                        at::ones({c}), false, 0.1, 1e-5, true);
    expectLayout(suggestedFormatLayout(layoutOf(x)), y, "batch_norm " + name);
  }
}

TEST(OutputLayout, ProgramGivesEachOutputItsOwnShape) {
  // t = exp(a); u = t - b: t keeps a's shape although the kernel iterates over b's.
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Value* a = graph->addInput()->setType(c10::TensorType::get());
  torch::jit::Value* b = graph->addInput()->setType(c10::TensorType::get());
  torch::jit::Value* t = graph->insert(c10::aten::exp, {a});
  torch::jit::Value* u = graph->insert(c10::aten::sub, {t, b});
  torch::jit::Value* c = graph->insert(c10::aten::type_as, {a, b});
  graph->registerOutput(t);
  graph->registerOutput(u);
  graph->registerOutput(c);
  const LayoutProgram program(*graph);
  const at::Tensor ta = at::randn({7}), tb = at::randn({5, 7}).t().contiguous().t();
  std::vector<Layout> outs;
  program.run({TensorView::of(ta), TensorView::of(tb)}, outs);
  ASSERT_EQ(outs.size(), 3u);
  expectLayout(outs[0], at::exp(ta), "t");
  expectLayout(outs[1], at::exp(ta) - tb, "u");
  expectLayout(outs[2], ta.type_as(tb), "type_as");
  // Both inputs are read by u; an input read only as type_as's `other` would not be.
  EXPECT_EQ(program.readsElements(), (std::vector<bool>{true, true}));
}

TEST(OutputLayout, DtypeOnlyInputsAreNotRead) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Value* a = graph->addInput()->setType(c10::TensorType::get());
  torch::jit::Value* b = graph->addInput()->setType(c10::TensorType::get());
  graph->registerOutput(graph->insert(c10::aten::exp, {graph->insert(c10::aten::type_as, {a, b})}));
  const LayoutProgram program(*graph);
  EXPECT_EQ(program.readsElements(), (std::vector<bool>{true, false}));
  std::vector<Layout> outs;
  const at::Tensor ta = at::randn({3}), tb = at::randn({4, 5}, at::kDouble);
  program.run({TensorView::of(ta), TensorView::of(tb)}, outs);
  expectLayout(outs[0], ta.type_as(tb).exp(), "exp(type_as)");
}

TEST(OutputLayout, GivenNodesTakeTheCallersLayouts) {
  // s = sum(a, [1], keepdim) (its layout given); u = a + s; v = s * 2. With a a
  // transposed [40, 1] ([1, 40] of strides (1, 1)), eager's u keeps a's size-1 stride.
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Value* a = graph->addInput()->setType(c10::TensorType::get());
  torch::jit::Value* dims = graph->insertConstant(std::vector<int64_t>{1});
  torch::jit::Value* keep = graph->insertConstant(true);
  torch::jit::Value* s = graph->insert(c10::aten::sum, {a, dims, keep});
  torch::jit::Value* u = graph->insert(c10::aten::add, {a, s});
  torch::jit::Value* v = graph->insert(c10::aten::mul, {s, 2.0});
  graph->registerOutput(u);
  graph->registerOutput(v);
  graph->registerOutput(s);
  const LayoutProgram program(*graph, [](const torch::jit::Node* n) {
    return n->kind() == c10::aten::sum;
  });
  ASSERT_EQ(program.givenValues(), (std::vector<const torch::jit::Value*>{s}));
  const at::Tensor ta = at::randn({40, 1}).t();
  const at::Tensor ts = ta.sum({1}, true);
  std::vector<Layout> outs;
  program.run({TensorView::of(ta)}, outs, {}, {contiguousLayout(ts.sizes())});
  ASSERT_EQ(outs.size(), 3u);
  expectLayout(outs[0], ta + ts, "a + sum");
  expectLayout(outs[1], ts * 2.0, "sum * 2");
  expectLayout(outs[2], ts, "sum");
  EXPECT_EQ(c10::IntArrayRef(outs[0].strides), c10::IntArrayRef({1, 1}));
}

}  // namespace
}  // namespace fuser::runtime
