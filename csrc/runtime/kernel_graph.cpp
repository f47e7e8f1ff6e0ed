#include "runtime/kernel_graph.h"

#include "ops/batch_norm.h"
#include "passes/chunks.h"
#include "passes/concat.h"

namespace fuser::runtime {
namespace {

bool chunksGroupInputs(const torch::jit::Node* node, const torch::jit::Graph& g) {
  if (!isChunk(node)) return false;
  for (const torch::jit::Value* in : node->inputs()) {
    if (in->node() != g.param_node()) return false;
  }
  return true;
}

// Replaces each cat group output by its pieces, as kernel outputs. The cat and its list
// leave the kernel graph: the partition keeps them out of reach of any other node.
void splitCatOutputs(KernelGraph& k) {
  torch::jit::Graph& g = *k.graph;
  std::vector<torch::jit::Value*> outputs;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    torch::jit::Value* out = g.outputs()[o];
    if (!isCat(out->node())) {
      outputs.push_back(out);
      k.targets.push_back({o});
      continue;
    }
    const torch::jit::Node* list = out->node()->input(0)->node();
    const auto pieces = static_cast<int64_t>(list->inputs().size());
    for (int64_t p = 0; p < pieces; ++p) {
      outputs.push_back(list->input(p));
      k.targets.push_back({o, pieces, *catDim(out->node()), p});
    }
  }
  while (!g.outputs().empty()) g.eraseOutput(g.outputs().size() - 1);
  for (torch::jit::Value* out : outputs) g.registerOutput(out);
  std::vector<torch::jit::Node*> cats;
  for (torch::jit::Node* node : g.nodes()) {
    if (isCat(node)) cats.push_back(node);
  }
  for (torch::jit::Node* cat : cats) {
    torch::jit::Node* list = cat->input(0)->node();
    cat->destroy();
    list->destroy();
  }
}

// Gives each batch_norm operand read per channel a kernel input of its own (the same
// [C] tensor may be read elsewhere along the last dim, as broadcasting reads it).
void readChannelOperands(KernelGraph& k) {
  torch::jit::Graph& g = *k.graph;
  auto isPlainInput = [&](const torch::jit::Value* v) {
    return v->node() == g.param_node() && k.sources[v->offset()].chunks == 0 &&
           !k.sources[v->offset()].channels_of;
  };
  for (torch::jit::Node* node : g.nodes()) {
    if (!ops::isBatchNorm(node)) continue;
    const torch::jit::Value* x = node->input(ops::kBatchNormInput);
    if (!isPlainInput(x)) {
      k.interpret_only = true;
      return;
    }
    for (size_t slot : ops::kBatchNormChannelOperands) {
      const torch::jit::Value* operand = node->input(slot);
      if (operand->type()->kind() != c10::TypeKind::TensorType) continue;  // None
      if (!isPlainInput(operand)) {
        k.interpret_only = true;
        return;
      }
      KernelInputSource source{k.sources[operand->offset()].group_input};
      source.channels_of = k.sources[x->offset()].group_input;
      node->replaceInput(slot, g.addInput()->setType(operand->type()));
      k.sources.push_back(source);
    }
  }
}

}  // namespace

KernelGraph makeKernelGraph(torch::jit::Graph& subgraph) {
  KernelGraph k;
  k.graph = subgraph.copy();
  torch::jit::Graph& g = *k.graph;
  for (size_t i = 0; i < g.inputs().size(); ++i) k.sources.push_back({i});

  for (auto it = g.nodes().begin(); it != g.nodes().end();) {
    torch::jit::Node* node = *it++;
    if (!chunksGroupInputs(node, g)) continue;
    const int64_t chunks = node->i(c10::attr::chunks);
    const int64_t dim = node->i(c10::attr::dim);
    std::vector<size_t> broadcast_with;
    if (node->kind() != c10::prim::ConstantChunk) {
      for (const torch::jit::Value* in : node->inputs()) broadcast_with.push_back(in->offset());
    }
    // Outputs are input-major: output j * chunks + c is chunk c of input j.
    for (size_t o = 0; o < node->outputs().size(); ++o) {
      // An unread chunk gets no view: it might be empty, which would not broadcast.
      if (node->output(o)->uses().empty()) continue;
      torch::jit::Value* view = g.addInput()->setType(node->output(o)->type());
      node->output(o)->replaceAllUsesWith(view);
      const size_t group_input = node->input(o / chunks)->offset();
      k.sources.push_back(
          {group_input, chunks, dim, static_cast<int64_t>(o % chunks), broadcast_with});
    }
    node->destroy();
  }
  readChannelOperands(k);
  // An input the kernel no longer reads itself (chunked, or read per channel) must not
  // take part in its shape.
  for (size_t i = g.inputs().size(); i-- > 0;) {
    if (g.inputs()[i]->uses().empty() && k.sources[i].chunks == 0 &&
        g.inputs()[i]->type()->kind() == c10::TypeKind::TensorType) {
      g.eraseInput(i);
      k.sources.erase(k.sources.begin() + static_cast<long>(i));
    }
  }
  splitCatOutputs(k);
  return k;
}

}  // namespace fuser::runtime
