#include "runtime/kernel_graph.h"

#include "passes/chunks.h"

namespace fuser::runtime {
namespace {

bool chunksGroupInputs(const torch::jit::Node* node, const torch::jit::Graph& g) {
  if (!isChunk(node)) return false;
  for (const torch::jit::Value* in : node->inputs()) {
    if (in->node() != g.param_node()) return false;
  }
  return true;
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
  // A chunked input the kernel no longer reads must not take part in its shape.
  for (size_t i = g.inputs().size(); i-- > 0;) {
    if (g.inputs()[i]->uses().empty() && k.sources[i].chunks == 0 &&
        g.inputs()[i]->type()->kind() == c10::TypeKind::TensorType) {
      g.eraseInput(i);
      k.sources.erase(k.sources.begin() + static_cast<long>(i));
    }
  }
  return k;
}

}  // namespace fuser::runtime
