// fillScalarWrites: `x[i:j] = 3` writes its number with a fill, not by copying in a host
// tensor.
//
// TorchScript compiles an assignment of a number to a slice or an element into
// `aten::copy_(view, aten::tensor(number, dtype=prim::dtype(view), device=prim::device(view)))`:
// a 0-dim tensor made on the host, then copied to the view's device. From pageable host
// memory to CUDA that copy synchronizes the stream, so the host waits for every kernel
// queued before it: torchvision's Swin builds its shifted-window mask from nine such
// writes in each of its five shifted blocks, 45 waits per call. After this pass each such
// pair is fuser::fill_with_scalar_(view, number) (symbols.h), which writes the same
// values: the number converted as aten::tensor converts it, then to the view's dtype
// (runtime/fill_with_scalar_op.cpp).
//
// Only that form is rewritten: the tensor's dtype and device are the view's own (so the
// values written and the device written to are the copy's), it records no gradient, and
// nothing else reads it.
#include <torch/csrc/jit/ir/ir.h>

#include <vector>

#include "passes/pipeline.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// aten::tensor.int / .float / .bool(t, *, dtype, device, requires_grad)'s inputs.
constexpr size_t kNumberInput = 0, kDtypeInput = 1, kDeviceInput = 2, kRequiresGradInput = 3;

bool readsMetadataOf(const Value* v, c10::Symbol kind, const Value* view) {
  return v->node()->kind() == kind && v->node()->input(0) == view;
}

bool isFalse(const Value* v) {
  auto constant = torch::jit::toIValue(v);
  return constant && constant->isBool() && !constant->toBool();
}

// The host tensor `copy` copies into its view, where it is such a number; null otherwise.
Node* hostNumberCopiedBy(const Node* copy) {
  if (copy->kind() != c10::aten::copy_ || copy->inputs().size() != 3) return nullptr;
  const Value* view = copy->input(0);
  Node* made = copy->input(1)->node();
  if (made->kind() != c10::aten::tensor || made->inputs().size() != 4 ||
      made->output()->uses().size() != 1) {
    return nullptr;
  }
  const c10::TypeKind number = made->input(kNumberInput)->type()->kind();
  if (number != c10::TypeKind::IntType && number != c10::TypeKind::FloatType &&
      number != c10::TypeKind::BoolType) {
    return nullptr;
  }
  if (!readsMetadataOf(made->input(kDtypeInput), c10::prim::dtype, view) ||
      !readsMetadataOf(made->input(kDeviceInput), c10::prim::device, view) ||
      !isFalse(made->input(kRequiresGradInput))) {
    return nullptr;
  }
  return made;
}

void collectCopies(torch::jit::Block* block, std::vector<Node*>& copies) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) collectCopies(sub, copies);
    if (hostNumberCopiedBy(node)) copies.push_back(node);
  }
}

}  // namespace

void fillScalarWrites(GraphPtr& graph) {
  std::vector<Node*> copies;
  collectCopies(graph->block(), copies);
  for (Node* copy : copies) {
    Node* made = hostNumberCopiedBy(copy);
    torch::jit::WithInsertPoint here(copy);
    Node* fill = graph->insertNode(
        graph->create(fillWithScalarSymbol(), {copy->input(0), made->input(kNumberInput)}));
    fill->output()->setType(copy->output()->type());
    copy->output()->replaceAllUsesWith(fill->output());
    copy->destroy();
    made->destroy();  // its dtype and device reads go with the clean-up's DCE
  }
}

}  // namespace fuser
