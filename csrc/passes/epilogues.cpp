// splitBiasEpilogues: a convolution or linear layer's bias joins the group that follows.
//
// After it runs, each aten::conv1d/conv2d/conv3d/linear with a bias whose result is read
// by a fusible node (or only by a permute that a fusible node reads) is the same op
// without bias followed by `aten::add(out, bias)` (the bias viewed as [C, 1, ...] for
// convolutions), typed as the original result. The
// add is an ordinary fusible node: partition merges it with the activation, residual
// add or scale after it, so the bias costs no pass of its own (cuDNN and ATen's
// convolutions add it in a separate kernel; nvFuser split linear the same way).
// Left alone: no bias, a bias without complete type, a result no fusible node reads
// (nothing would join; a batch_norm reads its input from outside its group), anything on the CPU that oneDNN Graph fuses (its post-op
// readers are refused by checkFusible), and float16/bfloat16 results where eager adds
// the bias before rounding (linear everywhere, convolutions on the CPU): the split
// would round twice. ATen's CUDA convolutions add the bias afterwards, as the split does.
// An op read only through a permute adds its bias after the permute, along the dim its
// bias's dim moved to, where the permute's reader is fusible: the same sums, which that
// reader's group then takes. ConvNeXt's depthwise convolutions, `permute(0, 2, 3, 1)`
// before the LayerNorm over their channels; its second linear, `permute(0, 3, 1, 2)`
// before the layer scale (its bias in cuBLAS's epilogue took a slower GEMM kernel on the
// H200: 1952 us a float32 call of ConvNeXt-T against the bare product's 1572).
#include <torch/csrc/jit/ir/constants.h>

#include <optional>
#include <string>
#include <vector>

#include "passes/fusibility.h"
#include "passes/pipeline.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Rank the op's input has beyond the channel dimension: 1, 2, 3 for conv1d/2d/3d; 0 for
// linear, whose bias broadcasts along the last dimension as it is.
std::optional<int64_t> spatialRank(const Node* node) {
  const std::string kind = node->kind().toQualString();
  if (kind == "aten::linear") return 0;
  if (kind == "aten::conv1d") return 1;
  if (kind == "aten::conv2d") return 2;
  if (kind == "aten::conv3d") return 3;
  return std::nullopt;
}

// `bias` as the op's output broadcasts it: [C] -> [C, 1, ..., 1] for convolutions.
Value* broadcastableBias(Value* bias, int64_t spatial, torch::jit::Graph& graph) {
  if (spatial == 0) return bias;
  auto type = bias->type()->expect<c10::TensorType>();
  std::vector<int64_t> shape = {*type->sizes()[0]};
  shape.resize(1 + spatial, 1);
  if (auto constant = torch::jit::toIValue(bias)) {
    at::Tensor viewed = constant->toTensor().reshape(shape);
    Value* out = graph.insertConstant(viewed);
    out->setType(c10::TensorType::create(viewed));
    return out;
  }
  Value* sizes = graph.insertConstant(c10::IValue(shape));
  Node* view = graph.insertNode(graph.create(c10::aten::view, {bias, sizes}));
  std::vector<int64_t> strides(shape.size(), 1);
  view->output()->setType(type->withSizesStrides(shape, strides));
  return view->output();
}

// The permute of constant dims that alone reads `node`'s result, or null.
Node* permuteAlone(const Node* node) {
  if (node->output()->uses().size() != 1) return nullptr;
  Node* permute = node->output()->uses()[0].user;
  if (permute->kind() != c10::aten::permute || permute->owningBlock() != node->owningBlock()) {
    return nullptr;
  }
  auto dims = torch::jit::toIValue(permute->input(1));
  return dims && dims->isIntList() ? permute : nullptr;
}

// Dims after the bias's in the result of `permute` (of an op whose result has `ndim`
// dims, its bias along dim `bias_dim`): how its view broadcasts it there.
std::optional<int64_t> dimsAfterBias(const Node* permute, int64_t ndim, int64_t bias_dim) {
  const std::vector<int64_t> dims = torch::jit::toIValue(permute->input(1))->toIntVector();
  if (static_cast<int64_t>(dims.size()) != ndim) return std::nullopt;
  for (int64_t p = 0; p < ndim; ++p) {
    if ((dims[p] + ndim) % ndim == bias_dim) return ndim - 1 - p;
  }
  return std::nullopt;
}

// Whether `bias` added after the op rounds as eager does (see the header comment).
bool roundsAsEager(const Node* node, const c10::TensorType& out) {
  const c10::ScalarType dtype = *out.scalarType();
  if (dtype != c10::kHalf && dtype != c10::kBFloat16) return true;
  const bool convolution = *spatialRank(node) > 0;
  return convolution && out.device()->is_cuda();
}

// `node` without bias, then the bias added to its result (or to `permute`'s, which alone
// reads it, with `after` dims after the bias's); `node`'s result is read by nothing after
// this.
void splitBias(Node* node, Node* permute, const c10::TensorTypePtr& permuted, int64_t after,
               int64_t spatial) {
  Value* bias = node->input(2);
  torch::jit::Graph& graph = *node->owningGraph();
  torch::jit::WithInsertPoint here(node);
  Value* no_bias = graph.insertConstant(c10::IValue());  // defined before its user
  Node* bare = graph.insertNode(graph.create(node->kind(), node->inputs()));
  bare->replaceInput(2, no_bias);
  bare->output()->setType(node->output()->type());
  if (permute) {
    permute->replaceInput(0, bare->output());
    torch::jit::WithInsertPoint next(permute->next());
    Value* viewed = broadcastableBias(bias, after, graph);
    Value* one = graph.insertConstant(1);
    Node* add = graph.insertNode(graph.create(c10::aten::add, {permute->output(), viewed, one}));
    add->output()->setType(permuted);
    permute->output()->replaceAllUsesAfterNodeWith(add, add->output());
    return;
  }
  Value* one = graph.insertConstant(1);
  Node* add = graph.insertNode(
      graph.create(c10::aten::add, {bare->output(), broadcastableBias(bias, spatial, graph), one}));
  add->output()->copyMetadata(node->output());
  node->output()->replaceAllUsesWith(add->output());
}

void splitIn(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) splitIn(sub);
    std::optional<int64_t> spatial = spatialRank(node);
    if (!spatial || node->inputs().size() < 3) continue;
    Value* bias = node->input(2);
    auto bias_type = bias->type()->cast<c10::TensorType>();
    auto out_type = node->output()->type()->cast<c10::TensorType>();
    if (!bias_type || !bias_type->isComplete() || bias_type->dim() != 1u || !out_type ||
        !out_type->isComplete() || bias_type->scalarType() != out_type->scalarType() ||
        !roundsAsEager(node, *out_type)) {
      continue;
    }
    const auto ndim = static_cast<int64_t>(*out_type->dim());
    Node* permute = permuteAlone(node);
    auto permuted = permute ? permute->output()->type()->cast<c10::TensorType>() : nullptr;
    // The bias lies along the last dim of a linear's result, and along the channels of a
    // convolution's, before its spatial dims (dim 0 of an unbatched input's).
    const std::optional<int64_t> after =
        permute ? dimsAfterBias(permute, ndim, ndim - 1 - *spatial) : std::nullopt;
    if (!after || !permuted || !permuted->isComplete() || !readByFusibleNode(permute->output())) {
      permute = nullptr;
    }
    if (!permute && !readByFusibleNode(node->output())) continue;
    splitBias(node, permute, permuted, after.value_or(0), *spatial);
    node->destroy();  // after every insert point guard is gone: they restore to `node`
  }
}

}  // namespace

void splitBiasEpilogues(GraphPtr& graph) { splitIn(graph->block()); }

}  // namespace fuser
