#include "runtime/kernel_graph.h"

namespace fuser::runtime {

KernelGraph makeKernelGraph(torch::jit::Graph& subgraph) {
  KernelGraph k;
  k.graph = subgraph.copy();
  torch::jit::Graph& g = *k.graph;
  for (size_t i = 0; i < g.inputs().size(); ++i) k.sources.push_back({i});

  for (auto it = g.nodes().begin(); it != g.nodes().end();) {
    torch::jit::Node* node = *it++;
    if (node->kind() != c10::prim::ConstantChunk || node->input()->node() != g.param_node()) {
      continue;
    }
    const size_t group_input = node->input()->offset();
    const int64_t chunks = node->i(c10::attr::chunks);
    const int64_t dim = node->i(c10::attr::dim);
    for (size_t c = 0; c < node->outputs().size(); ++c) {
      torch::jit::Value* view = g.addInput()->setType(node->output(c)->type());
      node->output(c)->replaceAllUsesWith(view);
      k.sources.push_back({group_input, chunks, dim, static_cast<int64_t>(c)});
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
