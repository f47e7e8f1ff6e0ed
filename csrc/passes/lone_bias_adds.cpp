// foldLoneBiasAdds: on CUDA, a bias add after a matrix product that no group took goes
// back into the product, as aten::addmm.
//
// TorchScript decomposes addmm into mm + add so that the add may fuse with what follows.
// Where nothing fusible follows (GPT-2's c_attn: its product is viewed and split into
// query, key and value), the add stays a kernel of its own, a full read and write of the
// product, where eager's addmm adds the bias in cuBLAS's epilogue for free (GPT-2 on the
// H100: 12 of the elementwise kernels left per call). After grouping, such an add and the
// mm it reads become one addmm again: add(bias, mm(a, b), alpha) is addmm(bias, a, b,
// beta=1, alpha), and add(mm(a, b), bias, alpha) is addmm(bias, a, b, beta=alpha,
// alpha=1). Only where the profiled types say addmm computes the same: a 2-D CUDA product
// read by the add alone, a bias of its dtype and device broadcasting to the product's
// sizes (not beyond), a constant alpha. CPU graphs are left: ATen's CPU addmm copies the
// bias into the result before the product, the same traffic as the add, and oneDNN Graph
// may take the pair there.
#include <torch/csrc/jit/ir/ir.h>

#include "passes/fusibility.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether the mm producing `product` is a 2-D CUDA product read by `add` alone.
bool isLoneCudaProduct(const Value* product, const Node* add) {
  const Node* mm = product->node();
  if (mm->kind() != c10::aten::mm || mm->owningBlock() != add->owningBlock() ||
      product->uses().size() != 1) {
    return false;
  }
  auto type = completeTensorType(product);
  return type && type->device()->is_cuda() && *type->dim() == 2 &&
         c10::isFloatingType(*type->scalarType());
}

// Whether `bias` broadcasts to the product's sizes, no further, in its dtype and device.
bool isBiasOf(const Value* bias, const Value* product, const Value* sum) {
  auto b = completeTensorType(bias);
  auto p = completeTensorType(product);
  auto s = completeTensorType(sum);
  if (!b || !p || !s || *b->dim() > 2 || b->scalarType() != p->scalarType() ||
      s->scalarType() != p->scalarType() || *b->device() != *p->device()) {
    return false;
  }
  return *s->sizes().concrete_sizes() == *p->sizes().concrete_sizes();
}

bool foldInto(Node* add) {
  if (add->kind() != c10::aten::add || add->inputs().size() != 3) return false;
  auto alpha = torch::jit::toIValue(add->input(2));
  if (!alpha || !(alpha->isInt() || alpha->isDouble())) return false;
  for (size_t p = 0; p < 2; ++p) {
    Value* product = add->input(p);
    Value* bias = add->input(1 - p);
    if (!isLoneCudaProduct(product, add) || !isBiasOf(bias, product, add->output())) continue;
    torch::jit::Graph& graph = *add->owningGraph();
    Node* mm = product->node();
    torch::jit::WithInsertPoint before(add);
    Value* one = graph.insertConstant(1);
    // The scale the add puts on its second operand goes to the same operand of addmm.
    Value* beta = p == 1 ? one : add->input(2);
    Value* scale = p == 1 ? add->input(2) : one;
    Node* addmm = graph.insertNode(
        graph.create(c10::aten::addmm, {bias, mm->input(0), mm->input(1), beta, scale}));
    addmm->copyMetadata(add);
    addmm->output()->setType(add->output()->type());
    add->output()->replaceAllUsesWith(addmm->output());
    add->destroy();
    mm->destroy();
    return true;
  }
  return false;
}

void foldIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;  // the add may be destroyed
    for (torch::jit::Block* sub : node->blocks()) foldIn(sub);
    foldInto(node);
  }
}

}  // namespace

void foldLoneBiasAdds(GraphPtr& graph) { foldIn(graph->block()); }

}  // namespace fuser
