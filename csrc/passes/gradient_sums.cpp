// Autodiff's backward graphs sum the gradients of a value used twice with
// prim::AutogradAdd(a, b). Profiling runs that op, and the interpreter's AutogradAdd
// lays its result out as ATen's `b + a` would (measured on torch 2.13: a transposed `a`
// beside a row-major `b` gives a row-major sum). specializeAutogradZero then makes it
// `aten::add(a, b, 1)` with the profiled type, and that add (ATen's or a group's) lays
// the sum out with `a` first: a transposed sum. So the profiled strides of such a sum,
// and of every elementwise value computed from it, are not the strides the optimized
// graph meets. Decisions taken on them go wrong: a row group formed over what profiling
// saw as rows in memory meets rows apart in memory at every call and runs interpreted.
//
// After this pass, an `aten::add(a, b, 1)` whose profiled strides are those of `b + a`
// and not those of `a + b` has the strides of `a + b`; a non-reducing table op whose
// profiled strides followed eager's layout rule (the one flat groups replay,
// runtime/output_layout.h: TensorIterator's with CPU cast copies, a conversion's, a
// dropout backward's, ...) from its operands' old strides follows it from their new
// ones. Anything else keeps its profiled type (a reduction's or a view's layout rule is
// not replayed, and its callers check strides at run time anyway). Only strides change:
// sizes, dtype and device are as profiled.
#include "passes/gradient_sums.h"

#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <unordered_map>
#include <vector>

#include "ops/batch_norm.h"
#include "ops/op_table.h"
#include "runtime/output_layout.h"

namespace fuser {
namespace {

using runtime::Layout;
using torch::jit::Node;
using torch::jit::Value;

std::optional<Layout> layoutOf(const c10::TypePtr& type) {
  auto t = type->cast<c10::TensorType>();
  if (!t) return std::nullopt;
  auto sizes = t->sizes().concrete_sizes();
  auto strides = t->strides().concrete_sizes();
  if (!sizes || !strides || sizes->size() != strides->size()) return std::nullopt;
  Layout layout;
  layout.sizes.assign(sizes->begin(), sizes->end());
  layout.strides.assign(strides->begin(), strides->end());
  return layout;
}

// Whether the operands' sizes have a broadcast shape (iteratorLayout assumes they do).
bool broadcastTogether(const std::vector<runtime::TensorView>& operands) {
  std::vector<int64_t> shape;
  for (const runtime::TensorView& l : operands) {
    if (l.sizes.size() > shape.size()) {
      shape.insert(shape.begin(), l.sizes.size() - shape.size(), 1);
    }
    const size_t offset = shape.size() - l.sizes.size();
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      int64_t& n = shape[offset + d];
      if (l.sizes[d] == n || l.sizes[d] == 1) continue;
      if (n != 1) return false;
      n = l.sizes[d];
    }
  }
  return true;
}

bool sameLayout(const Layout& a, const Layout& b) {
  return a.sizes == b.sizes && a.strides == b.strides;
}

// Eager's layout of `node`'s result, each tensor operand read through `layout`: the
// node alone in a graph of its operands, replayed by the rules flat groups replay. None
// where an operand's layout is not known, the operands do not broadcast together
// (iteratorLayout assumes they do), or the rule reads more than layouts (batch_norm's
// backend choice).
template <typename LayoutOfValue>
std::optional<Layout> eagerLayoutOf(const Node* node, const LayoutOfValue& layout) {
  if (ops::isBatchNorm(node)) return std::nullopt;
  torch::jit::Graph alone;
  std::unordered_map<const Value*, Value*> inputs;
  std::vector<runtime::TensorView> views;
  for (const Value* in : node->inputs()) {
    if (inputs.count(in)) continue;
    inputs[in] = alone.addInput()->setType(in->type());
    auto t = in->type()->cast<c10::TensorType>();
    if (!t) continue;
    std::optional<Layout> l = layout(in);
    if (!l) return std::nullopt;
    runtime::TensorView view;
    view.sizes = std::move(l->sizes);
    view.strides = std::move(l->strides);
    views.push_back(std::move(view));
  }
  if (views.empty() || !broadcastTogether(views)) return std::nullopt;
  Node* copy = alone.createClone(const_cast<Node*>(node), [&](Value* v) { return inputs.at(v); });
  alone.insertNode(copy);
  alone.registerOutput(copy->output());
  std::vector<Layout> out;
  runtime::LayoutProgram(alone).run(views, out);
  return out.at(0);
}

bool sameDtypes(const Node* node) {
  std::optional<c10::ScalarType> dtype;
  for (const Value* in : node->inputs()) {
    auto t = in->type()->cast<c10::TensorType>();
    if (!t) continue;
    if (!t->scalarType() || (dtype && *dtype != *t->scalarType())) return false;
    dtype = t->scalarType();
  }
  return true;
}

// aten::add(a, b, 1) as specializeAutogradZero writes it. A user's `a + b` reads the
// same; its profile is ATen's `a + b`, which the caller tells from `b + a`.
bool isGradientSum(const Node* node) {
  if (node->kind() != c10::aten::add || node->inputs().size() != 3) return false;
  if (!node->input(0)->type()->cast<c10::TensorType>() ||
      !node->input(1)->type()->cast<c10::TensorType>()) {
    return false;
  }
  std::optional<c10::IValue> alpha = torch::jit::toIValue(node->input(2));
  return alpha && alpha->isInt() && alpha->toInt() == 1;
}

class Relayout {
 public:
  void run(torch::jit::Block* block) {
    for (Node* node : block->nodes()) {
      for (torch::jit::Block* sub : node->blocks()) run(sub);
      if (node->outputs().size() != 1) continue;
      Value* out = node->output();
      std::optional<Layout> profiled = layoutOf(out->type());
      if (!profiled) continue;
      std::optional<Layout> now = asItRuns(node, *profiled);
      if (!now || sameLayout(*now, *profiled)) continue;
      auto type = out->type()->expect<c10::TensorType>();
      old_[out] = *profiled;
      out->setType(type->withSizesStrides(now->sizes, now->strides));
    }
  }

 private:
  // The layout `node`'s result has at run time, where the pass can tell: a gradient sum
  // profiled as `b + a`, or an elementwise op of an operand re-laid above whose profile
  // followed TensorIterator's rule from the operands as profiled.
  std::optional<Layout> asItRuns(const Node* node, const Layout& profiled) const {
    bool relaid = false;
    for (const Value* in : node->inputs()) relaid = relaid || old_.count(in);
    const ops::OpEntry* entry = ops::findOp(node);
    const bool follows = relaid && entry && !entry->reduces;
    if (!follows && !isGradientSum(node)) return std::nullopt;
    auto profiled_layout = [&](const Value* v) -> std::optional<Layout> {
      auto it = old_.find(v);
      return it != old_.end() ? std::optional<Layout>(it->second) : layoutOf(v->type());
    };
    auto current = [](const Value* v) { return layoutOf(v->type()); };
    std::optional<Layout> rule_as_profiled = eagerLayoutOf(node, profiled_layout);
    if (!rule_as_profiled) return std::nullopt;
    if (sameLayout(*rule_as_profiled, profiled)) {
      return follows ? eagerLayoutOf(node, current) : std::nullopt;
    }
    // AutogradAdd's `b + a`, of operands of one dtype (no cast copies to replay).
    if (!isGradientSum(node) || !sameDtypes(node)) return std::nullopt;
    std::optional<Layout> a = profiled_layout(node->input(0));
    std::optional<Layout> b = profiled_layout(node->input(1));
    if (!a || !b) return std::nullopt;
    const Layout* b_first[] = {&*b, &*a};
    if (!sameLayout(runtime::iteratorLayout(b_first), profiled)) return std::nullopt;
    return eagerLayoutOf(node, current);
  }

  std::unordered_map<const Value*, Layout> old_;  // re-laid values: their profiled layout
};

}  // namespace

void layGradientSumsOutAsTheyRun(GraphPtr& graph) { Relayout().run(graph->block()); }

}  // namespace fuser
