// writeLoneWritesInPlace: an in-place write that prepareGraph made functional
// (inplace.cpp: the node carries the like_self attribute, or is
// fuser::masked_fill_like_self) and that no group took is written in place again.
//
// Made functional, the write runs as ATen's functional op, which allocates its result
// through TensorIterator: where self has a size-1 dim, that result can have other
// strides there than self (a contiguous [1, 40] of strides (1, 1) comes out (40, 1)),
// and those strides decide what later ops allocate (suggest_memory_format reads them).
// A group's kernel keeps self's strides; outside a group only the in-place op does, as
// eager's does, and it needs no new tensor.
//
// Only where nothing can observe the difference: the write's result has self's dtype
// (no cast back after it), and every other reader of self runs before the write (the
// partition may have moved a reader of the old value behind it) and returns no alias of
// self (a fuser::FusionGroup, or a node whose schema gives its results no alias
// annotation). A write left to oneDNN Graph (a convolution's post-op) stays functional:
// its partitions take functional ops.
//
// The same holds inside a group's subgraph where the interpreter runs it (a fallback
// graph, a group its kernel cannot serve): writeFunctionalWritesInPlace on the copy the
// interpreter runs, where a write to a subgraph input stays functional (the caller's
// tensor).
#include "passes/lone_writes.h"

#include <string>

#include "passes/nesting.h"
#include "passes/onednn_beside.h"
#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

c10::Symbol inPlaceKindOf(const Node* node) {
  if (node->kind() == maskedFillLikeSelfSymbol()) return c10::aten::masked_fill_;
  return c10::Symbol::fromQualString(std::string(node->kind().toQualString()) + "_");
}

// Whether `reader`'s results are fresh tensors, never an alias of what it reads.
bool returnsFreshResults(const Node* reader) {
  if (reader->kind() == fusionGroupSymbol()) return true;
  const c10::FunctionSchema* schema = reader->maybeSchema();
  if (!schema) return false;
  for (const c10::Argument& ret : schema->returns()) {
    if (ret.alias_info()) return false;
  }
  return true;
}

// Whether every reader of `self` but `write` runs before it (in `write`'s block, through
// the node that holds it where it lies in a sub-block) and returns no alias of self.
bool otherReadersRunBefore(const Value* self, const Node* write) {
  for (const torch::jit::Use& use : self->uses()) {
    if (use.user == write) continue;
    if (!returnsFreshResults(use.user)) return false;
    const Node* reader = holderIn(use.user, write->owningBlock());
    if (!reader || !reader->isBefore(write)) return false;
  }
  return true;
}

bool sameDtype(const Value* a, const Value* b) {
  auto ta = a->type()->cast<c10::TensorType>();
  auto tb = b->type()->cast<c10::TensorType>();
  return ta && tb && ta->scalarType() && ta->scalarType() == tb->scalarType();
}

void writeInPlace(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) writeInPlace(sub);
    if (!isFunctionalWrite(node) || isLeftToOneDnn(node)) continue;
    Value* self = node->input(0);
    if (self->node()->kind() == c10::prim::Param || !sameDtype(node->output(), self) ||
        !otherReadersRunBefore(self, node)) {
      continue;
    }
    Node* write = block->owningGraph()->create(inPlaceKindOf(node), node->inputs(), 1);
    write->insertBefore(node);
    if (!write->maybeSchema()) {
      write->destroy();
      continue;
    }
    write->copyMetadata(node);
    write->output()->setType(node->output()->type());
    node->output()->replaceAllUsesWith(write->output());
    node->destroy();
  }
}

}  // namespace

bool isFunctionalWrite(const Node* node) {
  return node->kind() == maskedFillLikeSelfSymbol() || node->hasAttribute(likeSelfAttr());
}

void writeFunctionalWritesInPlace(torch::jit::Block* block) { writeInPlace(block); }

void writeLoneWritesInPlace(GraphPtr& graph) { writeInPlace(graph->block()); }

}  // namespace fuser
