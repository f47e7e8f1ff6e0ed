// cachePerShapeValues: tensors a graph builds from sizes and constants alone are built
// once per sizes, not on every call.
//
// Models rebuild such tensors per call: torchvision's Swin makes its shifted-window mask
// in each shifted block (new_zeros, nine slice fills, a view, a permute, a reshape, a
// subtraction, two masked_fills: a dozen kernel launches and a hundred interpreter
// steps), transformers models their position ids and causal masks. Their values depend
// only on numbers (sizes, shifts), on constants and on the dtype, device and sizes of
// tensors whose data they never read (`x.new_zeros(...)`). After this pass each such
// piece of the graph is a fuser::PerShapeValues node (symbols.h) holding it as its
// subgraph; the node runs it at the first call with given numbers and tensor metadata,
// and hands back the same tensors at later calls with them
// (runtime/per_shape_values_op.cpp).
//
// A node belongs to such a piece when it is deterministic (draws no random numbers),
// has no side effects and no blocks, makes no tensor that records gradients, reads only
// the piece's values, constants, numbers (int, float, bool, None, their lists, Device),
// or outside tensors as a metadata-only argument (self of new_zeros/new_ones/new_full,
// zeros_like/ones_like/full_like), and makes a tensor or reads one of the piece's. It
// may write in place only to tensors the piece itself made. A piece is cached only
// where what it hands out is never written afterwards (in place, or by a write
// prepareGraph made functional and that may be made in place again), never leaves the
// graph (an output, a container that does), where the lists and tensors it reads are
// never written (it now reads them after its last node), where every reader outside
// comes after its last node, and where no write or side effect lies between its first
// and last node (its errors would now come after it); otherwise it stays. It reads no
// uninitialized memory and runs no product or convolution (settings outside the key
// decide their values), and it hands out tensors and numbers, never lists.
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/nesting.h"
#include "passes/order_barriers.h"
#include "passes/piece_subgraph.h"
#include "passes/pipeline.h"
#include "passes/unwritten.h"
#include "symbols.h"
#include "value_types.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool isKeyType(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::NoneType:
    case c10::TypeKind::DeviceObjType:
      return true;
    case c10::TypeKind::ListType: {
      const c10::TypeKind element = type->expectRef<c10::ListType>().getElementType()->kind();
      return element == c10::TypeKind::IntType || element == c10::TypeKind::FloatType ||
             element == c10::TypeKind::BoolType;
    }
    case c10::TypeKind::OptionalType:
      return isKeyType(type->expectRef<c10::OptionalType>().getElementType());
    default:
      return false;
  }
}

// Ops whose first argument contributes only its dtype, device, layout and sizes (and,
// for the *_like ones, strides) to the result.
bool readsOnlyMetadataOfSelf(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::aten::new_zeros, c10::aten::new_ones,  c10::aten::new_full,
      c10::aten::zeros_like, c10::aten::ones_like, c10::aten::full_like};
  return kinds.count(node->kind()) > 0;
}

bool isAllowedPrim(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::prim::ListConstruct, c10::prim::ListUnpack, c10::prim::TupleConstruct,
      c10::prim::TupleUnpack,   c10::prim::dtype,      c10::prim::device};
  return kinds.count(node->kind()) > 0;
}

// Ops whose values depend on settings outside the graph that the key does not hold:
// uninitialized memory (filled per call where deterministic algorithms ask it), and
// products and convolutions (TF32, reduced-precision reductions).
bool readsGlobalSettings(const Node* node) {
  static const std::unordered_set<c10::Symbol> kinds = {
      c10::aten::empty,  c10::aten::empty_like, c10::aten::new_empty, c10::aten::empty_strided,
      c10::aten::new_empty_strided, c10::aten::mm, c10::aten::bmm, c10::aten::matmul,
      c10::aten::addmm, c10::aten::baddbmm, c10::aten::linear, c10::aten::einsum,
      c10::aten::conv1d, c10::aten::conv2d, c10::aten::conv3d, c10::aten::_convolution,
      c10::aten::convolution};
  return kinds.count(node->kind()) > 0;
}

bool isTensorList(const Value* v) {
  return v->type()->kind() == c10::TypeKind::ListType &&
         v->type()->expectRef<c10::ListType>().getElementType()->kind() ==
             c10::TypeKind::TensorType;
}

// The argument `node` writes in place (schema `Tensor(a!)`), or -1.
int writtenArgument(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return -1;
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
    if (alias && alias->isWrite()) return static_cast<int>(i);
  }
  return -1;
}

// Whether `node`'s first result aliases its first argument (a view, or the in-place
// op's self).
bool resultAliasesSelf(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema && !schema->returns().empty() && schema->returns()[0].alias_info() &&
         node->inputs().size() > 0 && isTensor(node->input(0));
}

// Whether `node` draws random numbers (an in-place uniform_ is no "nondeterministic" op
// to TorchScript, but takes a generator as every random op does), or makes a tensor
// that records gradients: a cached one would gather them across calls.
bool drawsOrRecordsGradients(const Node* node) {
  if (node->kind() == c10::aten::requires_grad_) return true;
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    const c10::Argument& argument = schema->arguments()[i];
    if (argument.type()->kind() == c10::TypeKind::OptionalType &&
        argument.type()->expectRef<c10::OptionalType>().getElementType()->kind() ==
            c10::TypeKind::GeneratorType) {
      return true;
    }
    if (argument.type()->kind() == c10::TypeKind::GeneratorType) return true;
    if (argument.name() == "requires_grad" && i < node->inputs().size()) {
      auto constant = torch::jit::toIValue(node->input(i));
      if (!constant || !(constant->isNone() || (constant->isBool() && !constant->toBool()))) {
        return true;
      }
    }
  }
  return false;
}

// One block's pieces: which nodes belong, and the tensor each piece value views.
class PieceFinder {
 public:
  explicit PieceFinder(torch::jit::Block* block) {
    for (Node* node : block->nodes()) {
      if (belongs(node)) add(node);
    }
  }
  const std::vector<Node*>& nodes() const { return nodes_; }
  bool inPiece(const Value* v) const { return root_.count(v) > 0; }
  bool inPiece(const Node* n) const { return members_.count(n) > 0; }

 private:
  bool belongs(const Node* node) const {
    if (!node->blocks().empty() || node->hasSideEffects() || node->isNondeterministic() ||
        node->kind() == c10::prim::Constant || node->hasAttribute(c10::attr::Subgraph)) {
      return false;
    }
    if (node->kind().is_prim() ? !isAllowedPrim(node) : !node->maybeSchema()) return false;
    if (readsGlobalSettings(node)) return false;
    if (drawsOrRecordsGradients(node)) return false;
    for (const Value* out : node->outputs()) {
      if (!isTensor(out) && !isKeyType(out->type()) && !isTensorList(out)) return false;
    }
    bool reads_piece = false;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* in = node->input(i);
      if (inPiece(in)) {
        reads_piece = true;
      } else if (in->node()->kind() == c10::prim::Constant) {
        continue;
      } else if (isTensor(in)) {
        if (!(i == 0 && readsOnlyMetadataOfSelf(node))) return false;
      } else if (!isKeyType(in->type())) {
        return false;
      }
    }
    const bool makes_tensor = std::any_of(node->outputs().begin(), node->outputs().end(),
                                          [](const Value* v) { return isTensor(v); });
    if (!makes_tensor && !reads_piece) return false;  // arithmetic on sizes: a key
    const int written = writtenArgument(node);
    if (written >= 0) {
      const Value* self = node->input(written);
      auto root = root_.find(self);
      if (root == root_.end() || !root->second) return false;  // not a tensor it made
    }
    return true;
  }

  void add(Node* node) {
    nodes_.push_back(node);
    members_.insert(node);
    const bool aliases = resultAliasesSelf(node);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* out = node->output(i);
      // A view's root is its base's; null where it may not be written: a view of a
      // constant, an element taken out of a list (whose source may be a constant's
      // views), anything not a tensor.
      const bool from_list = std::any_of(node->inputs().begin(), node->inputs().end(),
                                         [](const Value* in) { return isTensorList(in); });
      const Value* root = node->maybeSchema() && !from_list ? out : nullptr;
      if (i == 0 && aliases) {
        auto base = root_.find(node->input(0));
        root = base == root_.end() ? nullptr : base->second;
      }
      root_[out] = isTensor(out) ? root : nullptr;
    }
  }

  std::vector<Node*> nodes_;
  std::unordered_set<const Node*> members_;
  std::unordered_map<const Value*, const Value*> root_;
};

struct Piece {
  std::vector<Node*> nodes;  // in graph order
  std::vector<Value*> outputs;
};

// Splits the block's piece nodes into connected pieces, each with the values read after.
std::vector<Piece> connectedPieces(const PieceFinder& finder) {
  std::unordered_map<const Node*, const Node*> parent;
  std::function<const Node*(const Node*)> find = [&](const Node* n) {
    while (parent[n] != n) n = parent[n] = parent[parent[n]];
    return n;
  };
  for (Node* node : finder.nodes()) parent[node] = node;
  for (Node* node : finder.nodes()) {
    for (const Value* in : node->inputs()) {
      if (finder.inPiece(in)) parent[find(node)] = find(in->node());
    }
  }
  std::unordered_map<const Node*, size_t> index;
  std::vector<Piece> pieces;
  for (Node* node : finder.nodes()) {
    auto [it, fresh] = index.emplace(find(node), pieces.size());
    if (fresh) pieces.emplace_back();
    Piece& piece = pieces[it->second];
    piece.nodes.push_back(node);
    for (Value* out : node->outputs()) {
      const bool read_after = std::any_of(
          out->uses().begin(), out->uses().end(),
          [&](const torch::jit::Use& use) { return !finder.inPiece(use.user); });
      if (read_after) piece.outputs.push_back(out);
    }
  }
  return pieces;
}

bool launchesWork(const Piece& piece) {
  return std::any_of(piece.nodes.begin(), piece.nodes.end(), [](const Node* node) {
    return node->maybeSchema() && !node->outputs().empty() && isTensor(node->output(0)) &&
           !resultAliasesSelf(node);
  });
}

// Whether the piece's outputs may be handed out again: none is a list, every reader
// outside comes after its last node, and nothing outside writes them, lets them leave
// the graph (AliasDb's escape: a graph output, an attribute, a list or a Python call) or
// hands them on through an op alias analysis takes for a copy.
bool outputsStayUnwritten(const Piece& piece, const std::unordered_set<const Node*>& members,
                          torch::jit::AliasDb& aliases, torch::jit::Graph& graph) {
  const Node* last = piece.nodes.back();
  std::vector<Value*> tensors;
  for (Value* out : piece.outputs) {
    // A list handed out would be the same list at every call: anyone may append to it.
    if (out->type()->kind() == c10::TypeKind::ListType) return false;
    for (const torch::jit::Use& use : out->uses()) {
      if (members.count(use.user)) continue;
      const Node* reader = holderIn(use.user, last->owningBlock());
      if (!reader || !reader->isAfter(last)) return false;
    }
    if (isTensor(out)) tensors.push_back(out);
  }
  if (tensors.empty()) return true;
  if (aliases.escapesScope(tensors)) return false;  // an output, an attribute, a list
  return staysUnwritten(tensors, aliases, graph, members);
}

// Whether no order barrier (order_barriers.h) lies among the piece's nodes: once the
// piece runs after its last node, its errors would come after that write or effect.
bool crossesNoBarrier(const Piece& piece, const std::unordered_set<const Node*>& members) {
  for (const Node* node = piece.nodes.front(); node != piece.nodes.back(); node = node->next()) {
    if (!members.count(node) && isOrderBarrier(node)) return false;
  }
  return true;
}

// Whether the values the piece reads from before it (its key: lists, tensors read for
// their metadata) are never written: the piece now reads them after its last node.
bool keysStayUnwritten(const Piece& piece, const std::unordered_set<const Node*>& members,
                       torch::jit::AliasDb& aliases) {
  for (const Node* node : piece.nodes) {
    for (const Value* in : node->inputs()) {
      if (members.count(in->node()) || in->node()->kind() == c10::prim::Constant) continue;
      if ((isTensor(in) || in->type()->kind() == c10::TypeKind::ListType) &&
          aliases.hasWriters(in)) {
        return false;
      }
    }
  }
  return true;
}

bool isCudaTensorOrDevice(const Value* v) {
  if (auto type = v->type()->cast<c10::TensorType>()) {
    return type->device() && type->device()->is_cuda();
  }
  if (v->type()->kind() == c10::TypeKind::DeviceObjType) {
    auto constant = torch::jit::toIValue(v);
    return constant && constant->toDevice().is_cuda();
  }
  return false;
}

// Whether the piece makes or reads CUDA tensors as far as the graph says (their types,
// a constant device): its values then belong to the current CUDA device and stream.
bool touchesCuda(const Piece& piece) {
  for (const Node* node : piece.nodes) {
    for (const Value* v : node->inputs()) {
      if (isCudaTensorOrDevice(v)) return true;
    }
    for (const Value* v : node->outputs()) {
      if (isCudaTensorOrDevice(v)) return true;
    }
  }
  return false;
}

// Replaces the piece by a fuser::PerShapeValues node after its last node.
void cachePiece(const Piece& piece) {
  torch::jit::Graph& graph = *piece.nodes.front()->owningGraph();
  auto [subgraph, keys] = copyPiece(piece.nodes, piece.outputs);

  Node* cached = graph.create(perShapeValuesSymbol(), keys, piece.outputs.size());
  cached->g_(c10::attr::Subgraph, subgraph);
  if (touchesCuda(piece)) cached->i_(perShapeValuesCudaAttr(), 1);
  cached->insertAfter(piece.nodes.back());
  for (size_t i = 0; i < piece.outputs.size(); ++i) {
    cached->output(i)->setType(piece.outputs[i]->type());
    piece.outputs[i]->replaceAllUsesWith(cached->output(i));
  }
  for (auto it = piece.nodes.rbegin(); it != piece.nodes.rend(); ++it) (*it)->destroy();
}

void cacheIn(torch::jit::Block* block, torch::jit::AliasDb& aliases, std::vector<Piece>& found) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) cacheIn(sub, aliases, found);
  }
  PieceFinder finder(block);
  for (Piece& piece : connectedPieces(finder)) {
    if (piece.outputs.empty() || !launchesWork(piece)) continue;
    std::unordered_set<const Node*> members(piece.nodes.begin(), piece.nodes.end());
    if (!outputsStayUnwritten(piece, members, aliases, *block->owningGraph()) ||
        !keysStayUnwritten(piece, members, aliases) || !crossesNoBarrier(piece, members)) {
      continue;
    }
    found.push_back(std::move(piece));
  }
}

}  // namespace

void cachePerShapeValues(GraphPtr& graph) {
  std::vector<Piece> found;
  try {
    torch::jit::AliasDb aliases(graph);
    cacheIn(graph->block(), aliases, found);
  } catch (const c10::Error&) {
    return;  // alias analysis refuses the graph (a node with no schema): nothing cached
  }
  for (const Piece& piece : found) cachePiece(piece);
}

}  // namespace fuser
