// runConvolutionsChannelsLast: frozen CUDA convolution networks run in channels-last.
//
// cuDNN runs a row-major (NCHW) convolution as an NHWC kernel between two layout
// transforms: on the H200 those transforms took 606 of resnet50 float32's 3521 us of
// device time per call (batch 32), and the network ran 1.3x faster (float16 1.5x) with
// its weights in channels-last. A convolution whose weight is channels-last gives a
// channels-last result whatever its input's layout (ATen asks cuDNN for the format
// either operand suggests), and the elementwise ops, pools and batch norms after it keep
// their operand's layout, so converting the weights makes the whole network
// channels-last: its input is converted once, by the first convolution.
//
// After it runs, in the graph's top block, every aten::conv2d (or a trace's
// aten::_convolution, not transposed) on CUDA whose weight is a
// constant row-major 4-D tensor reads a channels-last copy of it (a weight with size-1
// dims, in both orders already, a view with channels-last strides), provided at least
// kMinConvolutions of them gain from it (16-bit ones of padded channel counts do not) and
// few values leave the channels-last region at full size or come back into it (each
// such exit or re-entry is a layout copy). The region: the convolutions' results and
// what layout-keeping ops compute from them (elementwise ops whose other operands are
// broadcast over H and W, or laid out channels-last by eager before or after a full-size
// region operand in add, sub, mul and div, whose first operand sets the layout; pools,
// batch_norm, cat of region values). A region value permuted to NHWC (permutesToRows)
// and read only by LayerNorms (ConvNeXt's) is contiguous there, and stays so: a
// LayerNorm reads any layout through a contiguous copy, so its result is eager's. Every
// other reader
// of a region value (other ops, nested blocks, the graph's outputs) reads
// `fuser::restore_layout(value, reference)`: the value in the memory format eager gives
// it, which is the one its region's first input suggests (channels-last or row-major).
// Values, dtypes and shapes are unchanged; convolution algorithms may differ as cuDNN's
// choices do. FUSER_CHANNELS_LAST=0 leaves graphs alone; `all` converts CPU networks too
// (so that CI, without a GPU, runs the pass against eager).
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "ops/op_table.h"
#include "passes/fusibility.h"
#include "passes/pipeline.h"
#include "runtime/cuda/stream_capture.h"
#include "symbols.h"

namespace fuser {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Fewer convolutions gain less than the entry and exit conversions may cost.
constexpr int kMinConvolutions = 2;

std::optional<std::vector<int64_t>> sizesOf(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type) return std::nullopt;
  return type->sizes().concrete_sizes();
}

// CUDA, or any device where FUSER_CHANNELS_LAST=all.
bool onConvertedDevice(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  if (!type || !type->device()) return false;
  return type->device()->is_cuda() ? config().channels_last_cuda : config().channels_last_cpu;
}

// aten::conv2d, or the aten::_convolution traces record, not transposed; its weight's
// rank tells 2-D from 1-D and 3-D.
bool isConvolution2d(const Node* node) {
  if (node->kind() == c10::aten::conv2d) return true;
  if (node->kind() != c10::aten::_convolution) return false;
  auto transposed = torch::jit::toIValue(node->input(6));
  return transposed && transposed->isBool() && !transposed->toBool();
}

// The constant weight of a CUDA conv2d whose result eager lays out as its input suggests
// (a weight that does not itself suggest channels-last); float64 stays row-major in
// cuDNN.
std::optional<at::Tensor> constantWeight(const Node* node) {
  if (!isConvolution2d(node) || !onConvertedDevice(node->input(0))) return std::nullopt;
  auto weight = torch::jit::toIValue(node->input(1));
  if (!weight || !weight->isTensor()) return std::nullopt;
  const at::Tensor& w = weight->toTensor();
  // Converting the weight runs a copy, which a stream being captured into a CUDA graph
  // would record instead of run (runtime/cuda/stream_capture.h): such a graph stays
  // row-major.
  if (cuda::currentStreamCapturing(w.device())) return std::nullopt;
  if (w.dim() != 4 || w.device() != *node->input(0)->type()->expect<c10::TensorType>()->device() ||
      !at::isFloatingType(w.scalar_type()) ||
      w.scalar_type() == at::kDouble || !w.is_contiguous() ||
      w.suggest_memory_format() != at::MemoryFormat::Contiguous) {
    return std::nullopt;
  }
  return w;
}

// Whether running `conv` (a constant-weight convolution) channels-last saves its layout
// transforms. cuDNN's 16-bit channels-last convolutions run on tensor cores with channel
// counts in multiples of 8 and pad any other count around each call: ShuffleNet v2's
// convolutions of 58 and 116 channels, float16 on the H100 at batch 32, spent 280 us per
// call in cuDNN's padding and transform kernels channels-last, and the network 1293 us
// of device time against 1060 row-major.
bool gainsFromChannelsLast(const Node* conv, const at::Tensor& weight) {
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kHalf && dtype != at::kBFloat16) return true;
  auto in = sizesOf(conv->input(0));
  if (!in || in->size() != 4) return true;  // channels unknown: counted, as before
  return (*in)[1] % 8 == 0 && weight.size(0) % 8 == 0;
}

// An operand that does not take part in the result's layout: broadcast over H and W
// (a [C, 1, 1] bias, an [N, C, 1, 1] scale, a scalar).
bool broadcastOverPlane(const Value* v) {
  if (!v->type()->cast<c10::TensorType>()) return true;  // scalars, lists, None
  auto sizes = sizesOf(v);
  if (!sizes) return false;
  const size_t n = sizes->size();
  return (n < 1 || (*sizes)[n - 1] == 1) && (n < 2 || (*sizes)[n - 2] == 1);
}

bool isPool(const Node* node) {
  return node->kind() == c10::aten::max_pool2d || node->kind() == c10::aten::avg_pool2d ||
         node->kind() == c10::aten::adaptive_avg_pool2d;
}

// An elementwise op of the fuser's table whose result has the broadcast shape of its
// operands (ATen lays such a result out as its full-size operands are).
bool isElementwise(const Node* node) {
  const ops::OpEntry* entry = ops::findOp(node);
  if (!entry || entry->reduces || node->outputs().size() != 1) return false;
  // contiguous(), clone() and to() may set the result's layout: kept only where they
  // preserve it.
  const auto& args = node->schema().arguments();
  for (size_t i = 0; i < args.size() && i < node->inputs().size(); ++i) {
    if (args[i].name() != "memory_format") continue;
    auto format = torch::jit::toIValue(node->input(i));
    if (!format || (!format->isNone() &&
                    format->toInt() != static_cast<int64_t>(c10::MemoryFormat::Preserve))) {
      return false;
    }
  }
  auto sizes = sizesOf(node->output());
  return sizes && sizes->size() == 4;
}

// A sum, mean, amax or amin over exactly H and W of a 4-D tensor (timm's squeeze-excite
// `x.mean((2, 3), keepdim=True)`, a global pool written as a mean): ATen lays its result
// out row-major whatever its input's layout, so it reads a channels-last value as it is,
// with no copy (its values as the convolutions': sums taken in another order).
bool reducesThePlane(const Node* node) {
  const bool kind = node->kind() == c10::aten::sum || node->kind() == c10::aten::mean ||
                    node->kind() == c10::aten::amax || node->kind() == c10::aten::amin;
  if (!kind || node->inputs().size() < 2) return false;
  auto sizes = sizesOf(node->input(0));
  auto dims = torch::jit::toIValue(node->input(1));
  if (!sizes || sizes->size() != 4 || !dims || !dims->isIntList()) return false;
  std::vector<int64_t> plane = dims->toIntVector();
  for (int64_t& d : plane) d = d < 0 ? d + 4 : d;
  std::sort(plane.begin(), plane.end());
  return plane == std::vector<int64_t>{2, 3};
}

// A LayerNorm reads its input through a contiguous copy, so its result is laid out alike
// (contiguous) whatever the input's layout, and its values do not depend on it.
bool readsThroughACopy(const torch::jit::Use& use) {
  return use.user->kind() == c10::aten::layer_norm && use.offset == 0;
}

// A 4-D value that eager itself lays out channels-last (profiled so: ConvNeXt's MLP
// output permuted back from NHWC), in every dim of size over 1.
bool profiledChannelsLast(const Value* v) {
  auto type = v->type()->cast<c10::TensorType>();
  auto sizes = sizesOf(v);
  if (!type || !sizes || sizes->size() != 4) return false;
  auto strides = type->strides().concrete_sizes();
  if (!strides) return false;
  const std::vector<int64_t> want = c10::get_channels_last_strides_2d(*sizes);
  for (size_t d = 0; d < 4; ++d) {
    if ((*sizes)[d] != 1 && (*strides)[d] != want[d]) return false;
  }
  return true;
}

// Ops whose TensorIterator takes its operands in the node's order (self first): where
// self is a full-size region value, it sets the result's layout whatever the others'.
bool selfSetsTheLayout(const Node* node) {
  return node->kind() == c10::aten::add || node->kind() == c10::aten::sub ||
         node->kind() == c10::aten::mul || node->kind() == c10::aten::div;
}

// Readers of a tensor's metadata only, which its layout does not change.
bool readsNoElements(const Node* node) {
  static const c10::Symbol kinds[] = {
      c10::Symbol::fromQualString("aten::size"),  c10::Symbol::fromQualString("aten::dim"),
      c10::Symbol::fromQualString("aten::numel"), c10::Symbol::fromQualString("prim::device"),
      c10::Symbol::fromQualString("prim::dtype"), c10::Symbol::fromQualString("aten::len")};
  return std::find(std::begin(kinds), std::end(kinds), node->kind()) != std::end(kinds);
}

class Region {
 public:
  explicit Region(torch::jit::Block* block) : block_(block) {}

  // Follows the layout through the block; false when converting would not pay.
  bool analyse() {
    for (Node* node : block_->nodes()) {
      if (constantWeight(node)) {
        convolutions_.push_back(node);
        Value* in = node->input(0);
        if (!reference_.count(in)) entries_.insert(in);
        const Value* ref = reference_.count(in) ? reference_[in] : in;
        taint(node->output(), ref);
        continue;
      }
      if (const Value* ref = keptReference(node)) {
        taint(node->output(), ref);
        continue;
      }
      // A region value permuted to NHWC is contiguous here (in eager, strided unless the
      // input was channels-last): where only LayerNorms read it, it needs no restoring.
      if (permutesToRows(node) && reference_.count(node->input(0)) &&
          !node->output()->uses().empty() &&
          std::all_of(node->output()->uses().begin(), node->output()->uses().end(),
                      readsThroughACopy)) {
        row_permutes_.push_back(node);
      }
    }
    int gaining = 0;
    for (Node* conv : convolutions_) gaining += gainsFromChannelsLast(conv, *constantWeight(conv));
    if (gaining < kMinConvolutions) return false;
    int full_size_exits = 0;
    for (const auto& [value, ref] : reference_) {
      if (leaves(value) && !broadcastOverPlane(value)) ++full_size_exits;
    }
    // A convolution reading a row-major value from outside the region converts it to
    // channels-last first: the network's input once, but a value that left the region
    // and comes back (ShuffleNet's channel shuffle, `view`, `transpose`, `contiguous`
    // between the convolutions of every block) once per block.
    const int reentries = std::max(0, static_cast<int>(entries_.size()) - 1);
    // Each convolution that gains saves two layout transforms; each exit or re-entry
    // costs one copy.
    return (full_size_exits + reentries) * 2 <= gaining;
  }

  void convert(torch::jit::Graph& graph) {
    for (Node* conv : convolutions_) {
      const at::Tensor w = *constantWeight(conv);
      torch::jit::WithInsertPoint point(conv);
      // A weight of size-1 dims (1x1 kernels, depthwise [C, 1, k, k]) is in both orders;
      // only channels-last strides make it suggest channels-last, and without that a
      // depthwise convolution read a channels-last input row-major (mobilenet_v3_large
      // float32 ran 8% slower than all row-major; 1.2x faster with every weight so).
      const at::Tensor channels_last =
          w.is_contiguous(at::MemoryFormat::ChannelsLast)
              ? w.as_strided(w.sizes(), c10::get_channels_last_strides_2d(w.sizes()))
              : w.contiguous(at::MemoryFormat::ChannelsLast);
      Value* constant = graph.insertConstant(channels_last);
      constant->setType(c10::TensorType::create(channels_last));
      conv->replaceInput(1, constant);
    }
    for (Value* value : order_) {
      restoreExits(graph, value, const_cast<Value*>(reference_.at(value)));
      setChannelsLastType(value);
    }
    for (Node* permute : row_permutes_) {
      auto type = permute->output()->type()->cast<c10::TensorType>();
      auto sizes = sizesOf(permute->output());
      if (!type || !sizes) continue;
      permute->output()->setType(type->withSizesStrides(*sizes, c10::contiguous_strides(*sizes)));
    }
  }

 private:
  void taint(Value* v, const Value* ref) {
    reference_[v] = ref;
    order_.push_back(v);
  }

  // The region reference the node's result keeps, or null where the node leaves the
  // region (a reader of region values of two references, or of a full-size value from
  // outside, lays its result out as neither alone would).
  const Value* keptReference(const Node* node) {
    const bool pool = isPool(node);
    const bool batch_norm = node->kind() == c10::aten::batch_norm;
    const bool cat = node->kind() == c10::aten::cat;
    if (!pool && !batch_norm && !cat && !isElementwise(node)) return nullptr;
    std::vector<const Value*> operands;
    if (cat) {
      const Node* list = node->input(0)->node();
      if (list->kind() != c10::prim::ListConstruct || node->input(0)->uses().size() != 1) {
        return nullptr;
      }
      operands.assign(list->inputs().begin(), list->inputs().end());
    } else if (pool || batch_norm) {
      operands = {node->input(0)};  // the others are per channel, or not tensors
    } else {
      operands.assign(node->inputs().begin(), node->inputs().end());
    }
    // Region operands broadcast over H and W (a squeeze-excite gate, itself computed
    // channels-last) take no part in the layout of a result they are broadcast into.
    const Value* ref = nullptr;        // of the full-size operands
    const Value* plane_ref = nullptr;  // of region operands broadcast over H and W
    bool plane_refs_agree = true;
    // A full-size self from outside that eager lays out channels-last, read with region
    // values (torchvision's ConvNeXt block, `result += input`): the result is laid out as
    // self is, in eager as here; self is its own reference.
    if (selfSetsTheLayout(node) && !reference_.count(node->input(0)) &&
        !broadcastOverPlane(node->input(0)) && profiledChannelsLast(node->input(0))) {
      bool reads_region = false;
      for (size_t i = 1; i < node->inputs().size(); ++i) {
        const Value* in = node->input(i);
        if (broadcastOverPlane(in)) continue;
        if (!reference_.count(in)) return nullptr;
        reads_region = true;
      }
      return reads_region ? node->input(0) : nullptr;
    }
    // Channels-last operands from outside, and region operands of other references,
    // after a full-size region self (add, sub, mul, div): the result is laid out as self
    // is, in eager as here, and the operand needs no copy (a ConvNeXt block's residual
    // add of its MLP output permuted back). (A row-major one stays out: the op itself
    // restores the layout as it reads.)
    const bool self_decides = selfSetsTheLayout(node) && reference_.count(node->input(0)) &&
                              !broadcastOverPlane(node->input(0));
    for (const Value* in : operands) {
      const bool broadcast = !cat && broadcastOverPlane(in);
      auto it = reference_.find(in);
      if (it == reference_.end()) {
        if (broadcast || (self_decides && profiledChannelsLast(in))) continue;
        return nullptr;
      }
      if (broadcast) {
        plane_refs_agree = plane_refs_agree && (!plane_ref || plane_ref == it->second);
        plane_ref = it->second;
        continue;
      }
      // (Where self sets the layout, its reference is the result's whatever the others'.)
      if (ref && ref != it->second && !self_decides) return nullptr;
      if (!ref) ref = it->second;
    }
    if (!ref) {
      if (!plane_refs_agree) return nullptr;
      ref = plane_ref;
    }
    if (ref && cat) kept_lists_.insert(node->input(0)->node());
    return ref;
  }

  // Whether a reader outside the region reads `v`.
  bool leaves(const Value* v) const {
    for (const torch::jit::Use& use : v->uses()) {
      if (!keepsLayout(use.user)) return true;
    }
    return false;
  }

  bool keepsLayout(const Node* user) const {
    if (kept_lists_.count(user) || readsNoElements(user)) return true;
    if (std::find(row_permutes_.begin(), row_permutes_.end(), user) != row_permutes_.end()) {
      return true;
    }
    if (reducesThePlane(user) && user->owningBlock() == block_) return true;
    if (user->owningBlock() != block_) return false;
    for (const Value* out : user->outputs()) {
      if (reference_.count(out)) return true;
    }
    return false;
  }

  // Readers outside the region read the value restored to eager's memory format.
  void restoreExits(torch::jit::Graph& graph, Value* v, Value* ref) {
    std::vector<torch::jit::Use> exits;
    for (const torch::jit::Use& use : v->uses()) {
      if (!keepsLayout(use.user)) exits.push_back(use);
    }
    if (exits.empty()) return;
    torch::jit::WithInsertPoint point(v->node()->next());
    Node* restore = graph.insertNode(graph.create(restoreLayoutSymbol(), {v, ref}));
    restore->output()->setType(v->type());  // eager's layout: the profiled type
    for (const torch::jit::Use& use : exits) use.user->replaceInput(use.offset, restore->output());
  }

  static void setChannelsLastType(Value* v) {
    auto type = v->type()->cast<c10::TensorType>();
    auto sizes = sizesOf(v);
    if (!type || !sizes || sizes->size() != 4) return;
    v->setType(type->withSizesStrides(*sizes, c10::get_channels_last_strides_2d(*sizes)));
  }

  torch::jit::Block* block_;
  std::vector<Node*> convolutions_;
  std::unordered_set<const Value*> entries_;  // values from outside that convolutions read
  std::unordered_map<const Value*, const Value*> reference_;  // region value -> its input
  std::vector<Value*> order_;                                  // region values, in order
  std::unordered_set<const Node*> kept_lists_;  // a region cat's list of operands
  std::vector<Node*> row_permutes_;  // permutesToRows of region values, read by LayerNorms
};

}  // namespace

void runConvolutionsChannelsLast(GraphPtr& graph) {
  if (!config().channels_last_cuda && !config().channels_last_cpu) return;
  Region region(graph->block());
  if (region.analyse()) region.convert(*graph);
}

}  // namespace fuser
