// makeInPlaceOpsFunctional: `x.add_(y)`, `x.relu_()`, `x += y`, ... (every in-place
// variant whose functional form is in the op table) become `x1 = x.add(y)` etc., and
// the reads of x after the write read x1, so they fuse like out-of-place code
// (`x.masked_fill_(m, v)` becomes fuser::masked_fill_like_self, which keeps x's strides
// where ATen's masked_fill would clone x row-major).
//
// A write may be dropped only if nothing else can see it. Like TorchScript's
// RemoveTensorMutation (whose conditions we follow), we require that:
// - x is made in the same block by an ordinary node (no sub-blocks, subgraph or side
//   effects) that returns fresh memory: x may not alias any of that node's inputs
//   (views, list elements, attributes) and is not a graph or block input nor a
//   constant (a frozen weight: in eager the write would persist across calls); or x
//   is a prim::If output whose value in each branch is such a value, read nowhere else;
// - x's producer can move right before the write (alias analysis), or every reader of x
//   between them only reads the old value (same block, no sub-block or side effect, no
//   output that may alias x: `t.masked_fill_(t > 0.5, 0.0)`'s mask), so no alias made
//   before the write observes it;
// and, unlike it, that the functional result is the tensor the in-place op writes:
// - same dtype: an in-place op keeps self's dtype. Where the functional form promotes
//   to another dtype that eager can cast back (float16 += float32, float.lt_(...)),
//   the result is cast to self's dtype (aten::_to_copy, a fresh value); where eager
//   raises (int += float, int.sigmoid_()), the op stays;
// - same shape and layout: other operands may not have a higher rank than self; where
//   self has a size-1 dimension (so TensorIterator may take the layout from another
//   operand), the other tensors must share self's strides.
// We do not use RemoveTensorMutation itself: it cannot insert that cast, and we want
// to say why each write that stays, stays.
//
// After it runs, every rewritten node's result carries self's profiled type (dtype,
// device, sizes); under FUSER_DUMP=reasons each in-place table op left has one line
// saying why.
#include "passes/inplace.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <algorithm>
#include <memory>
#include <string>

#include "passes/reasons.h"
#include "passes/type_propagation.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::AliasDb;
using torch::jit::Node;
using torch::jit::Value;

std::string name(const Value* v) { return "%" + v->debugName(); }

std::string dtypeName(c10::ScalarType t) { return c10::toString(t); }

// The functional form of an in-place node: its name without the trailing underscore,
// but for masked_fill_, whose functional form clones self row-major where the write
// keeps self's strides: fuser::masked_fill_like_self (symbols.h).
c10::Symbol functionalKindOf(const Node* node) {
  const std::string& inplace_name = node->schema().name();
  if (inplace_name == "aten::masked_fill_") return maskedFillLikeSelfSymbol();
  return c10::Symbol::fromQualString(inplace_name.substr(0, inplace_name.size() - 1));
}

class InPlaceRewriter {
 public:
  explicit InPlaceRewriter(const GraphPtr& graph) : graph_(graph) {}

  void run() {
    rewriteBlock(graph_->block());
    log_.flush();
  }

 private:
  AliasDb& aliasDb() {
    if (!alias_db_) alias_db_ = std::make_unique<AliasDb>(graph_);
    return *alias_db_;
  }

  void rewriteBlock(torch::jit::Block* block) {
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
      Node* node = *it++;
      for (torch::jit::Block* sub : node->blocks()) rewriteBlock(sub);
      const ops::OpEntry* entry = functionalEntryOf(node);
      if (!entry) continue;
      if (FusionDecision d = tryRewrite(node, *entry); !d) {
        log_.record(node, "in-place op not made functional: " + d.reason());
      }
    }
  }

  // What the functional form computes into: self's dtype, or the dtype to cast from.
  FusionDecision checkDtype(const Node* node, const ops::OpEntry& entry,
                            c10::ScalarType self_dtype, c10::ScalarType* result) {
    for (const Value* in : node->inputs()) {
      auto type = in->type()->cast<c10::TensorType>();
      if (type && (!type->scalarType() || !type->dim())) {
        return FusionDecision::no(name(in) + " has no profiled dtype or rank");
      }
    }
    std::optional<c10::ScalarType> dtype = eagerResultDtype(entry, node);
    if (!dtype) return FusionDecision::no("its functional form refuses these operands");
    if (*dtype != self_dtype && !c10::canCast(*dtype, self_dtype)) {
      return FusionDecision::no("eager raises here: result type " + dtypeName(*dtype) +
                                " can't be cast to self's " + dtypeName(self_dtype));
    }
    *result = *dtype;
    return FusionDecision::yes();
  }

  static FusionDecision checkShapeAndLayout(const Node* node, const c10::TensorType& self) {
    const size_t rank = *self.dim();
    auto sizes = self.sizes().concrete_sizes();
    const bool has_unit_dim =
        !sizes || std::any_of(sizes->begin(), sizes->end(), [](int64_t s) { return s == 1; });
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      auto other = node->input(i)->type()->cast<c10::TensorType>();
      if (!other) continue;
      if (!other->dim()) return FusionDecision::no(name(node->input(i)) + " has no known rank");
      if (*other->dim() > rank) {
        return FusionDecision::no(name(node->input(i)) + " has a higher rank than self; the "
                                  "functional form would broadcast self");
      }
      if (has_unit_dim && *other->dim() > 0 &&
          !(other->strides() == self.strides() && other->strides().isComplete())) {
        return FusionDecision::no("self has a size-1 dimension and " + name(node->input(i)) +
                                  " other strides: the functional result's layout could "
                                  "follow " + name(node->input(i)) + ", the in-place one keeps self's");
      }
    }
    return FusionDecision::yes();
  }

  // Whether `v` is memory its producer made: no input, constant, or alias of an input.
  FusionDecision checkFresh(Value* v) {
    Node* producer = v->node();
    if (producer->kind() == c10::prim::Param) {
      return FusionDecision::no("writes to a graph or block input " + name(v) +
                                ", which the caller or the next iteration sees");
    }
    if (producer->kind() == c10::prim::Constant) {
      return FusionDecision::no("writes to the constant " + name(v) +
                                " (a frozen weight): the write would persist across calls");
    }
    if (!producer->blocks().empty() || producer->hasAttribute(torch::jit::attr::Subgraph) ||
        producer->hasSideEffects()) {
      return FusionDecision::no(name(v) + " comes from " + producer->kind().toQualString() +
                                ", whose aliasing is not known");
    }
    for (Value* in : producer->inputs()) {
      if (aliasDb().mayContainAlias(in, v)) {
        return FusionDecision::no("writes to " + name(v) + ", which may alias " + name(in) +
                                  " (a view, list element or attribute): another alias may "
                                  "observe the write");
      }
    }
    return FusionDecision::yes();
  }

  // `self` from a prim::If: fresh when each branch's value is fresh and read only there.
  FusionDecision checkFreshIfOutput(Value* self) {
    for (torch::jit::Block* branch : self->node()->blocks()) {
      Value* v = branch->outputs()[self->offset()];
      // A branch that never ran keeps its prim::profile nodes (they read nothing now).
      const auto readers = std::count_if(v->uses().begin(), v->uses().end(), [](const auto& u) {
        return u.user->kind() != c10::prim::profile;
      });
      if (readers > 1) {
        return FusionDecision::no(name(self) + " comes from a prim::If whose branch value " +
                                  name(v) + " is read elsewhere too");
      }
      if (auto d = checkFresh(v); !d) return d;
    }
    return FusionDecision::yes();
  }

  FusionDecision checkMadeFreshHere(Node* node, Value* self) {
    Node* producer = self->node();
    if (producer->owningBlock() != node->owningBlock() && producer->kind() != c10::prim::Param) {
      return FusionDecision::no(name(self) + " is made outside the write's block");
    }
    return producer->kind() == c10::prim::If ? checkFreshIfOutput(self) : checkFresh(self);
  }

  // Whether `reader`, a node of the write's block before it, only reads self's old value:
  // no sub-block or side effect, and no output that may alias self (a view, a list
  // holding it), so nothing it makes sees the write.
  FusionDecision checkPlainReader(Node* reader, Value* self) {
    const bool plain = reader->owningBlock() == self->node()->owningBlock() &&
                       reader->blocks().empty() && !reader->hasSideEffects() &&
                       std::none_of(reader->outputs().begin(), reader->outputs().end(),
                                    [&](Value* out) {
                                      return aliasDb().mayContainAlias(out, self);
                                    });
    if (plain) return FusionDecision::yes();
    return FusionDecision::no(name(self) + " is read before the write by " +
                              describeNode(reader) +
                              ", which may be or make another alias that reads it later");
  }

  // No reader or alias of self between its making and the write sees the written value:
  // self's making moves next to the write where alias analysis allows, else every reader
  // in between only reads the old value (`t.masked_fill_(t > 0.5, 0.0)`: the mask reads t
  // before the write, as eager's does).
  FusionDecision checkUnobserved(Node* node, Value* self) {
    Node* producer = self->node();
    if (aliasDb().moveBeforeTopologicallyValid(producer, node)) return FusionDecision::yes();
    if (producer->kind() == c10::prim::If) {
      return FusionDecision::no("alias analysis cannot bring the making of " + name(self) +
                                " next to the write");
    }
    for (const torch::jit::Use& use : self->uses()) {
      if (use.user == node || !use.user->isBefore(node)) continue;
      if (auto d = checkPlainReader(use.user, self); !d) return d;
    }
    return FusionDecision::yes();
  }

  FusionDecision tryRewrite(Node* node, const ops::OpEntry& entry) {
    Value* self = node->input(0);
    if (auto d = checkMadeFreshHere(node, self); !d) return d;
    auto self_type = self->type()->cast<c10::TensorType>();
    if (!self_type || !self_type->scalarType() || !self_type->device()) {
      return FusionDecision::no(name(self) + " has no profiled dtype or device");
    }
    if (!self_type->dim()) {
      // Profiling records no sizes for tensors without strides (MKLDNN, sparse, ...).
      return FusionDecision::no(name(self) + " has no profiled rank (not a strided tensor?)");
    }
    c10::ScalarType result_dtype = *self_type->scalarType();
    if (auto d = checkDtype(node, entry, *self_type->scalarType(), &result_dtype); !d) return d;
    if (auto d = checkShapeAndLayout(node, *self_type); !d) return d;
    if (auto d = checkUnobserved(node, self); !d) return d;

    Node* functional = graph_->create(functionalKindOf(node), node->inputs(), 1);
    functional->copyMetadata(node);
    functional->i_(likeSelfAttr(), 1);
    functional->insertBefore(node);
    functional->output()->setType(self_type->withScalarType(result_dtype));
    const c10::FunctionSchema* schema = functional->maybeSchema();
    const ops::OpEntry* made = schema ? ops::findOp(functional) : nullptr;
    if (!made || made->lower != entry.lower) {
      functional->destroy();
      return FusionDecision::no("its functional form does not match the same inputs");
    }
    Value* result = functional->output();
    if (result_dtype != *self_type->scalarType()) {
      torch::jit::WithInsertPoint guard(node);
      result = graph_->insert(c10::aten::_to_copy, {result},
                              {torch::jit::NamedValue("dtype", *self_type->scalarType())});
      result->node()->copyMetadata(node);
    }
    result->setType(self_type);
    self->replaceAllUsesAfterNodeWith(node, result);
    node->output()->replaceAllUsesWith(result);
    node->destroy();
    alias_db_.reset();  // rebuilt on the next question: the graph changed
    return FusionDecision::yes();
  }

  GraphPtr graph_;
  std::unique_ptr<AliasDb> alias_db_;
  ReasonLog log_;
};

}  // namespace

void makeInPlaceOpsFunctional(GraphPtr& graph) { InPlaceRewriter(graph).run(); }

}  // namespace fuser
