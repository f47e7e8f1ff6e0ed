#include "passes/unwritten.h"

#include <functional>

#include "passes/lone_writes.h"

namespace fuser {
namespace {

using torch::jit::Node;

// Ops whose schemas promise fresh results but that may hand back their input or views of
// it: type_as and the _cast ops of the same dtype, dropout in eval mode (aliasEvalDropouts
// makes the same alias), atleast_nd of a tensor with the dims, sum_to_size to the same
// sizes, dequantize of a float tensor, to_dense of a dense one, conj_physical of a real
// one, chalf of a complex32 one, lift, broadcast_tensors and meshgrid (expanded views),
// the unsafe splits and _unsafe_view (views).
bool mayReturnItsInput(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::aten::type_as, c10::aten::dropout, c10::aten::feature_dropout,
      c10::aten::alpha_dropout, c10::aten::feature_alpha_dropout, c10::aten::native_dropout,
      c10::aten::atleast_1d, c10::aten::atleast_2d, c10::aten::atleast_3d,
      c10::aten::sum_to_size, c10::aten::dequantize, c10::aten::to_dense,
      c10::aten::broadcast_tensors, c10::aten::meshgrid, c10::aten::_cast_Byte,
      c10::aten::_cast_Char, c10::aten::_cast_Double, c10::aten::_cast_Float,
      c10::aten::_cast_Int, c10::aten::_cast_Long, c10::aten::_cast_Short,
      c10::aten::_cast_Half, c10::aten::conj_physical, c10::aten::chalf, c10::aten::lift,
      c10::aten::unsafe_chunk, c10::aten::unsafe_split, c10::aten::unsafe_split_with_sizes,
      c10::aten::_unsafe_view};
  return kinds.count(node->kind()) > 0 && !node->inputs().empty();
}

}  // namespace

bool staysUnwritten(const std::vector<torch::jit::Value*>& tensors, torch::jit::AliasDb& aliases,
                    torch::jit::Graph& graph, const std::unordered_set<const Node*>& except) {
  if (tensors.empty()) return true;
  const torch::jit::ValueSet set(tensors.begin(), tensors.end());
  bool written = false;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* block) {
    for (Node* node : block->nodes()) {
      if (written) return;
      for (torch::jit::Block* sub : node->blocks()) visit(sub);
      if (except.count(node)) continue;
      if (aliases.writesToAlias(node, set)) written = true;
      if ((isFunctionalWrite(node) || mayReturnItsInput(node)) &&
          aliases.mayContainAlias(node->input(0), tensors)) {
        written = true;
      }
    }
  };
  visit(graph.block());
  return !written;
}

bool copyIndistinguishable(torch::jit::Value* source, torch::jit::Value* copy,
                           torch::jit::AliasDb& aliases, torch::jit::Graph& graph) {
  return !aliases.escapesScope({copy}) && staysUnwritten({source, copy}, aliases, graph);
}

std::vector<torch::jit::Node*> copiesIndistinguishable(
    const std::shared_ptr<torch::jit::Graph>& graph, const std::vector<torch::jit::Node*>& nodes) {
  std::vector<torch::jit::Node*> safe;
  if (nodes.empty()) return safe;
  try {
    torch::jit::AliasDb aliases(graph);
    for (torch::jit::Node* node : nodes) {
      if (copyIndistinguishable(node->input(0), node->output(), aliases, *graph)) {
        safe.push_back(node);
      }
    }
  } catch (const c10::Error&) {
    return {};
  }
  return safe;
}

}  // namespace fuser
