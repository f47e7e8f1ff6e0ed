#include "runtime/fusion_executor.h"

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>

#include "codegen/cuda_printer.h"
#include "codegen/lowering.h"
#include "config.h"
#include "ops/batch_norm.h"
#include "passes/chunks.h"
#include "passes/strided_copies.h"
#include "runtime/interpreted_group.h"
#include "runtime/kernel_builder.h"
#include "runtime/output_allocation.h"
#include "stats.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

// CUDA flat kernels move 16 bytes per access when every tensor they stream allows it:
// inputs and cat slices (`tensors`); other outputs are freshly allocated, so aligned.
bool allowsVectorAccess(const IterationPlan& plan, c10::ArrayRef<TensorView> tensors,
                        c10::Device device) {
  if (!device.is_cuda() || !plan.flat) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (plan.inputs[i].access != codegen::Access::Flat) continue;
    if (reinterpret_cast<uintptr_t>(tensors[i].data) % 16 != 0) return false;
  }
  return true;
}

SpecKey makeKey(const IterationPlan& plan, c10::ArrayRef<bool> zero_dim,
                c10::ArrayRef<int32_t> out_slots, c10::Device device, bool vectorize) {
  SpecKey key;
  key.push_back(vectorize ? 1 : 0);
  key.push_back(static_cast<uint8_t>(device.type()));
  key.push_back(static_cast<uint8_t>(device.index() + 1));
  key.push_back(plan.flat ? 1 : 0);
  key.push_back(plan.flat ? 1 : static_cast<uint8_t>(plan.ndim));
  key.push_back(device.is_cuda() && plan.index32 ? 1 : 0);
  key.push_back(static_cast<uint8_t>(plan.transpose_tile));
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const codegen::TensorInput& in = plan.inputs[i];
    const bool scalar = i < zero_dim.size() && zero_dim[i];
    key.push_back(static_cast<uint8_t>(in.dtype));
    key.push_back(static_cast<uint8_t>(static_cast<int>(in.access) | (in.inner_unit_stride << 3) |
                                       (in.inner_zero_stride << 4) | (scalar << 5) |
                                       (in.transposed << 6)));
    key.push_back(static_cast<uint8_t>(in.same_strides_as + 1));
  }
  for (int32_t slot : out_slots) key.push_back(static_cast<uint8_t>(slot + 1));
  return key;
}

bool hasShape(const codegen::FixedShape& shape, const IterationPlan& plan) {
  return shape.numel == plan.numel &&
         std::equal(shape.sizes.begin(), shape.sizes.end(), plan.sizes.begin(), plan.sizes.end()) &&
         std::equal(shape.strides.begin(), shape.strides.end(), plan.strides.begin(),
                    plan.strides.end()) &&
         std::equal(shape.pointer_base.begin(), shape.pointer_base.end(),
                    plan.pointer_base.begin(), plan.pointer_base.end()) &&
         std::equal(shape.pointer_delta.begin(), shape.pointer_delta.end(),
                    plan.pointer_delta.begin(), plan.pointer_delta.end());
}

// The group input a chunk is taken from, broadcast with `source.broadcast_with`: new
// leading dimensions and stretched size-1 dimensions are read at stride 0. Throws
// eager's error when those do not broadcast.
TensorView broadcastView(const KernelInputSource& source, c10::ArrayRef<c10::IValue> inputs) {
  const at::Tensor& whole = inputs[source.group_input].toTensor();
  TensorView view = TensorView::of(whole);
  if (source.broadcast_with.empty()) return view;
  at::DimVector shape(whole.sizes().begin(), whole.sizes().end());
  for (size_t other : source.broadcast_with) {
    shape = at::infer_size_dimvector(shape, inputs[other].toTensor().sizes());
  }
  const int64_t lead = static_cast<int64_t>(shape.size()) - whole.dim();
  view.sizes.assign(shape.begin(), shape.end());
  view.strides.assign(shape.size(), 0);
  for (int64_t d = 0; d < whole.dim(); ++d) {
    view.strides[lead + d] = whole.size(d) == shape[lead + d] ? whole.stride(d) : 0;
  }
  return view;
}

// `channels` ([C]) placed along dim 1 of `x`: [C, 1, ..., 1] with x.dim() - 2 ones. False
// when C is not x.size(1), where eager refuses the call.
bool alongChannels(TensorView& channels, const c10::IValue& x) {
  if (!x.isTensor() || !x.toTensor().defined()) return false;
  const at::Tensor& t = x.toTensor();
  if (channels.dim() != 1 || t.dim() < 2 || channels.sizes[0] != t.size(1)) return false;
  for (int64_t d = 2; d < t.dim(); ++d) {
    channels.sizes.push_back(1);
    channels.strides.push_back(1);
  }
  return true;
}

// Whether eager allocates batch_norm `site`'s result in x's suggested memory format (else
// like x); nullopt when an operand is not a whole group input. Where the answer turns on
// CUDA's backend choice, which reads cuDNN's flags as well as the inputs, the call is
// not `repeatable`.
std::optional<bool> batchNormSuggestedFormat(const BatchNormSite& site, const KernelGraph& kernel,
                                             c10::ArrayRef<c10::IValue> inputs,
                                             bool& repeatable) {
  std::array<at::Tensor, 5> operands;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (site.inputs[i] < 0) continue;  // None
    const KernelInputSource& source = kernel.sources[size_t(site.inputs[i])];
    if (source.chunks != 0) return std::nullopt;
    const c10::IValue& v = inputs[source.group_input];
    if (v.isTensor()) operands[i] = v.toTensor();
  }
  const at::Tensor& x = operands[0];
  if (!x.defined()) return std::nullopt;
  if (!x.is_cuda()) return true;
  Layout self;
  self.sizes.assign(x.sizes().begin(), x.sizes().end());
  self.strides.assign(x.strides().begin(), x.strides().end());
  if (preservedLayout(self).strides == suggestedFormatLayout(self).strides) return true;
  repeatable = false;
  return ops::batchNormAllocatesInSuggestedFormat(x, operands[1], operands[2], operands[3],
                                                  operands[4], site.eps);
}

// Chunk `source.index` of `whole`, sized as eager's chunk (ceil(size / chunks), the
// last smaller).
TensorView chunkOf(const TensorView& whole, const KernelInputSource& source) {
  TensorView view = whole;
  const int64_t dim = c10::maybe_wrap_dim(source.dim, whole.dim());
  const int64_t size = (whole.sizes[dim] + source.chunks - 1) / source.chunks;
  const int64_t start = std::min(whole.sizes[dim], size * source.index);
  view.sizes[dim] = std::min(size, whole.sizes[dim] - start);
  view.data = static_cast<char*>(whole.data) +
              start * whole.strides[dim] * static_cast<int64_t>(c10::elementSize(whole.dtype));
  return view;
}

// Piece `target.piece` of a cat buffer, as narrow() would give it.
TensorView catSlice(const at::Tensor& whole, const KernelOutputTarget& target) {
  TensorView view = TensorView::of(whole);
  const int64_t dim = c10::maybe_wrap_dim(target.dim, whole.dim());
  const int64_t size = whole.size(dim) / target.pieces;
  view.data = static_cast<char*>(view.data) +
              size * target.piece * whole.stride(dim) * static_cast<int64_t>(whole.element_size());
  view.sizes[dim] = size;
  return view;
}

// The buffer a cat output is written into: eager's cat of `pieces` pieces of `shape`,
// contiguous.
at::Tensor allocateCat(const KernelOutputTarget& target, std::vector<int64_t> shape,
                       c10::ScalarType dtype, c10::Device device) {
  const int64_t dim = c10::maybe_wrap_dim(target.dim, static_cast<int64_t>(shape.size()));
  shape[dim] *= target.pieces;
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
}

}  // namespace

FusionExecutor::FusionExecutor(const torch::jit::Node* node)
    : subgraph_(node->g(c10::attr::Subgraph)),
      kernel_graph_(makeKernelGraph(*subgraph_)),
      layouts_(*kernel_graph_.graph),
      num_inputs_(node->inputs().size()),
      num_outputs_(node->outputs().size()),
      interpreted_(subgraph_) {
  for (const KernelOutputTarget& target : kernel_graph_.targets) {
    writes_cat_ = writes_cat_ || target.pieces > 0;
  }
  for (const torch::jit::Node* node : subgraph_->nodes()) {
    draws_random_ = draws_random_ || node->kind() == philoxDropoutSymbol();
  }
  philox_offsets_ = philoxOffsetInputs(*subgraph_);
  copied_inputs_ = copiedInputs(*subgraph_).value_or(std::vector<size_t>{});
  for (const torch::jit::Value* in : kernel_graph_.graph->inputs()) {
    const bool tensor = in->type()->kind() == c10::TypeKind::TensorType;
    is_tensor_.push_back(tensor);
    scalar_kinds_.push_back(tensor ? codegen::ScalarArgKind::Double : codegen::scalarArgKindOf(in->type()));
  }
}

const FusionExecutor::Specialization& FusionExecutor::specialize(const SpecKey& key,
                                                                 const IterationPlan& plan,
                                                                 const KernelShape& shape,
                                                                 c10::Device device,
                                                                 bool vectorize) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool by_shape = device.is_cuda() && !plan.flat && plan.numel > 0;
  const Specialization* any_shape = nullptr;
  for (const auto& s : specializations_) {
    if (s->key != key) continue;
    if (s->shape.empty()) {
      any_shape = s.get();
    } else if (by_shape && hasShape(s->shape, plan)) {
      return *s;
    }
  }
  if (by_shape && shape_kernels_ < config().shape_kernels) {
    ++shape_kernels_;
    return compile(key, plan, shape, device, vectorize, /*fix_shape=*/true);
  }
  if (any_shape) return *any_shape;
  return compile(key, plan, shape, device, vectorize, /*fix_shape=*/false);
}

const FusionExecutor::Specialization& FusionExecutor::compile(const SpecKey& key,
                                                              const IterationPlan& plan,
                                                              const KernelShape& shape,
                                                              c10::Device device, bool vectorize,
                                                              bool fix_shape) {
  auto spec = std::make_unique<Specialization>();
  spec->key = key;
  spec->kernel = buildOrRunUnfused([&]() -> std::shared_ptr<CompiledKernel> {
    std::vector<c10::ScalarType> dtypes;
    for (const TensorView& v : shape.tensors) dtypes.push_back(v.dtype);
    const std::vector<codegen::InputDesc> descs = codegen::inputDescs(
        is_tensor_, scalar_kinds_, dtypes,
        std::vector<bool>(shape.zero_dim.begin(), shape.zero_dim.end()), plan.inputs);
    codegen::Kernel kernel =
        codegen::lowerSubgraph(*kernel_graph_.graph, descs, plan.flat ? 1 : plan.ndim, plan.flat,
                               device.type());
    // Cat slices and outputs laid out otherwise than the iteration follow the tensor
    // inputs in the plan, in kernel output order.
    for (size_t o = 0; o < kernel.outputs.size(); ++o) {
      const int32_t slot = shape.out_slots[o];
      if (slot < 0) continue;
      const codegen::TensorInput& target = plan.inputs[slot];
      codegen::TensorOutput& out = kernel.outputs[o];
      if (target.access == codegen::Access::Strided) {
        out.access = codegen::Access::Strided;
        out.stride_slot = slot;
        out.inner_unit_stride = target.inner_unit_stride;
      }
    }
    kernel.name = "fuser_kernel";
    kernel.index32 = device.is_cuda() && plan.index32;
    kernel.transpose_tile = plan.transpose_tile;
    kernel.tile_group = config().tile_group > 0 ? config().tile_group
                                                : codegen::transposeTileGroup(plan.transpose_tile);
    kernel.min_blocks_per_sm = config().tile_min_blocks > 0 && plan.transpose_tile > 0
                                   ? config().tile_min_blocks
                                   : codegen::minBlocksPerSm(kernel);
    kernel.vectorize = vectorize;
    if (fix_shape) {
      kernel.fixed.sizes.assign(plan.sizes.begin(), plan.sizes.end());
      kernel.fixed.strides.assign(plan.strides.begin(), plan.strides.end());
      kernel.fixed.numel = plan.numel;
      kernel.fixed.pointer_base.assign(plan.pointer_base.begin(), plan.pointer_base.end());
      kernel.fixed.pointer_delta.assign(plan.pointer_delta.begin(), plan.pointer_delta.end());
      spec->shape = kernel.fixed;
    }
    for (const auto& out : kernel.outputs) spec->out_dtypes.push_back(out.dtype);
    std::shared_ptr<CompiledKernel> built = buildKernel(kernel, device);
    return built;
  }, warned_);
  specializations_.push_back(std::move(spec));
  return *specializations_.back();
}

void FusionExecutor::runInterpreted(torch::jit::Stack& stack, const char* why) {
  interpreted_.run(stack, why);
}

bool FusionExecutor::signatureOf(c10::ArrayRef<c10::IValue> inputs,
                                 InputSignature& signature) const {
  for (const c10::IValue& v : inputs) {
    if (!v.isTensor()) {
      signature.key.push_back(-1);
      signature.data.push_back(nullptr);
      continue;
    }
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return false;
    char* data = static_cast<char*>(t.data_ptr());
    const c10::Device device = t.device();
    signature.key.push_back(static_cast<int64_t>(t.scalar_type()) |
                            static_cast<int64_t>(device.type()) << 8 |
                            static_cast<int64_t>(device.index() + 1) << 16 | t.dim() << 24 |
                            static_cast<int64_t>(reinterpret_cast<uintptr_t>(data) % 16) << 40);
    signature.key.append(t.sizes().begin(), t.sizes().end());
    signature.key.append(t.strides().begin(), t.strides().end());
    signature.data.push_back(data);
  }
  return true;
}

void FusionExecutor::gatherScalars(c10::ArrayRef<c10::IValue> inputs,
                                   c10::SmallVector<double, 8>& dargs,
                                   c10::SmallVector<int64_t, 8>& iargs) const {
  for (size_t i = 0; i < is_tensor_.size(); ++i) {
    if (is_tensor_[i]) continue;
    const c10::IValue& v = inputs[kernel_graph_.sources[i].group_input];
    if (scalar_kinds_[i] == codegen::ScalarArgKind::Double) {
      dargs.push_back(v.toDouble());
    } else if (scalar_kinds_[i] == codegen::ScalarArgKind::Bool) {
      iargs.push_back(v.toBool());
    } else {
      iargs.push_back(v.toInt());
    }
  }
}

void FusionExecutor::launch(const Specialization& spec, const IterationPlan& plan,
                            c10::ArrayRef<void*> ptrs, c10::ArrayRef<double> dargs,
                            c10::ArrayRef<int64_t> iargs, size_t num_tensors,
                            c10::Device device) const {
  if (plan.numel == 0) return;
  LaunchArgs args{ptrs.data(),  plan.sizes.data(),  plan.strides.data(),
                  dargs.data(), iargs.data(),       plan.ndim,
                  static_cast<int>(num_tensors), static_cast<int>(kernel_graph_.targets.size()),
                  plan.numel,   device};
  spec.kernel->launch(args);
  stats().kernel_launches++;
  if (plan.transpose_tile > 0) stats().tiled_launches++;
}

void FusionExecutor::runPrepared(const Prepared& prepared, const InputSignature& signature,
                                 c10::ArrayRef<c10::IValue> inputs, torch::jit::Stack& stack) {
  stats().repeated_calls++;
  c10::SmallVector<void*, 24> ptrs;
  for (const auto& [input, offset] : prepared.views) ptrs.push_back(signature.data[input] + offset);
  c10::SmallVector<double, 8> dargs;
  c10::SmallVector<int64_t, 8> iargs;
  gatherScalars(inputs, dargs, iargs);
  c10::SmallVector<at::Tensor, 4> outputs(num_outputs_);
  const auto& targets = kernel_graph_.targets;
  for (size_t o = 0; o < targets.size(); ++o) {
    at::Tensor& out = outputs[targets[o].group_output];
    const Layout& layout = prepared.out_layouts[o];
    out = allocateStrided(layout.sizes, layout.strides, prepared.spec->out_dtypes[o],
                          prepared.device);
    ptrs.push_back(out.data_ptr());
  }
  launch(*prepared.spec, prepared.plan, ptrs, dargs, iargs, prepared.views.size(),
         prepared.device);
  torch::jit::drop(stack, num_inputs_);
  for (auto& out : outputs) stack.emplace_back(std::move(out));
}

namespace {

// Equal layouts, but for the strides of size-1 dimensions, which no element uses.
bool sameMemoryOrder(const Layout& a, const Layout& b) {
  if (a.sizes != b.sizes) return false;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] != 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

TensorView viewOf(const Layout& layout, c10::Device device) {
  TensorView v;
  v.device = device;
  v.sizes = layout.sizes;
  v.strides = layout.strides;
  return v;
}

}  // namespace

void FusionExecutor::run(torch::jit::Stack& stack) {
  if (config().use_interpreter) return runInterpreted(stack, "FUSER_EXECUTOR=interpreter");
  if (kernel_graph_.interpret_only) return runInterpreted(stack, "the group has no kernel form");
  if (masksDrawnByAten(stack, num_inputs_, philox_offsets_)) {
    return runInterpreted(stack, "ATen draws its dropout masks");
  }
  auto inputs = torch::jit::last(stack, num_inputs_);
  for (size_t i : copied_inputs_) {
    // Eager's x.contiguous() of a row-major x is x itself: ATen's answers so.
    const c10::IValue& v = inputs[i];
    if (!v.isTensor() || v.toTensor().is_contiguous()) {
      return runInterpreted(stack, "contiguous() of a row-major tensor is the tensor itself");
    }
  }

  // A call whose inputs have the last call's dtypes, devices, sizes, strides and
  // alignment repeats its preparation (views, layouts, plan, kernel). Groups that write
  // a cat plan their output slices too, so they always take the full path.
  InputSignature signature;
  bool repeatable = !writes_cat_ && signatureOf(inputs, signature);
  if (repeatable) {
    std::shared_ptr<const Prepared> last;
    {
      std::lock_guard<std::mutex> lock(prepared_mutex_);
      last = prepared_;
    }
    if (last && last->signature == signature.key) {
      return runPrepared(*last, signature, inputs, stack);
    }
  }

  // Tensor inputs as the kernel reads them (chunks as views of their group input).
  const size_t num_kernel_inputs = kernel_graph_.sources.size();
  c10::SmallVector<TensorView, 24> views;
  c10::SmallVector<int32_t, 24> view_inputs;   // per view: its group input
  const KernelInputSource* chunked = nullptr;  // the chunks of one input come together:
  TensorView chunked_whole;                    // their broadcast view is made once
  c10::SmallVector<int32_t, 24> first_chunk;   // per view: the first chunk of its tensor
  for (size_t i = 0; i < num_kernel_inputs; ++i) {
    if (!is_tensor_[i]) continue;
    const KernelInputSource& source = kernel_graph_.sources[i];
    const c10::IValue& v = inputs[source.group_input];
    if (!v.isTensor() || !v.toTensor().defined()) {
      return runInterpreted(stack, "an undefined tensor input");
    }
    view_inputs.push_back(static_cast<int32_t>(source.group_input));
    if (source.chunks == 0) {
      first_chunk.push_back(static_cast<int32_t>(views.size()));
      views.push_back(TensorView::of(v.toTensor()));
      if (source.channels_of && !alongChannels(views.back(), inputs[*source.channels_of])) {
        return runInterpreted(stack, "sizes on which eager raises");
      }
      continue;
    }
    if (!chunked || chunked->group_input != source.group_input ||
        chunked->broadcast_with != source.broadcast_with) {
      chunked_whole = broadcastView(source, inputs);
      chunked = &source;
      first_chunk.push_back(static_cast<int32_t>(views.size()));
    } else {
      first_chunk.push_back(first_chunk.back());
    }
    views.push_back(chunkOf(chunked_whole, source));
  }
  if (views.empty()) return runInterpreted(stack, "no tensor input");
  const size_t num_tensors = views.size();
  const c10::Device device = views[0].device;
  for (const TensorView& t : views) {
    // Mixed devices (a CPU 0-dim tensor with CUDA tensors) run as eager would.
    if (t.device != device) return runInterpreted(stack, "inputs on different devices");
  }
  c10::SmallVector<double, 8> dargs;
  c10::SmallVector<int64_t, 8> iargs;
  gatherScalars(inputs, dargs, iargs);

  // Eager's layout of every output. An input read only for its dtype is planned as a
  // 0-dim tensor: it takes no part in the shape (its kernel never loads it).
  c10::SmallVector<bool, 2> suggested_format;
  for (const BatchNormSite& site : layouts_.batchNorms()) {
    auto suggested = batchNormSuggestedFormat(site, kernel_graph_, inputs, repeatable);
    if (!suggested) return runInterpreted(stack, "batch_norm's layout not decided");
    suggested_format.push_back(*suggested);
  }
  std::vector<Layout> out_layouts;
  layouts_.run(views, out_layouts, suggested_format);
  c10::SmallVector<bool, 24> zero_dim;
  for (size_t t = 0; t < num_tensors; ++t) {
    zero_dim.push_back(views[t].dim() == 0);
    if (!layouts_.readsElements()[t]) {
      views[t].sizes.clear();
      views[t].strides.clear();
    }
  }
  const std::vector<int64_t> shape = broadcastShape(c10::ArrayRef<TensorView>(views));
  // Nothing to compute: eager's empty results have strides by rules of ATen's own (a
  // zero stride past an empty dim, batch_norm's clone), which the interpreter gives.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    return runInterpreted(stack, "a zero-size result");
  }
  for (const Layout& layout : out_layouts) {
    if (c10::IntArrayRef(layout.sizes) != c10::IntArrayRef(shape)) {
      stats().layout_fallbacks++;
      return runInterpreted(stack, "an output of another shape than the iteration's");
    }
  }

  // The iteration walks the lead output (the first fresh one) in memory order. Cat
  // buffers are allocated first: the plan addresses their slices, and the slices of
  // outputs laid out otherwise, like inputs. A cat's dtype is the profiled one, which
  // the guard fixes; the kernel's is checked below.
  const auto& targets = kernel_graph_.targets;
  std::vector<at::Tensor> outputs(num_outputs_);
  c10::SmallVector<int32_t, 8> out_slots(targets.size(), -1);
  const Layout* lead = nullptr;
  for (size_t o = 0; o < targets.size() && !lead; ++o) {
    if (targets[o].pieces == 0) lead = &out_layouts[o];
  }
  for (size_t o = 0; o < targets.size(); ++o) {
    const KernelOutputTarget& target = targets[o];
    if (target.pieces == 0) {
      if (sameMemoryOrder(out_layouts[o], *lead)) continue;
      out_slots[o] = static_cast<int32_t>(views.size());
      views.push_back(viewOf(out_layouts[o], device));
      continue;
    }
    at::Tensor& whole = outputs[target.group_output];
    if (!whole.defined()) {
      auto type = subgraph_->outputs()[target.group_output]->type()->cast<c10::TensorType>();
      if (!type || !type->scalarType()) return runInterpreted(stack, "a cat output of no profiled dtype");
      whole = allocateCat(target, shape, *type->scalarType(), device);
    }
    out_slots[o] = static_cast<int32_t>(views.size());
    views.push_back(catSlice(whole, target));
  }

  IterationPlan plan =
      planIteration(views, lead ? c10::IntArrayRef(lead->strides) : c10::IntArrayRef());
  if (config().transpose_tiles && !(draws_random_ && device.is_cuda())) {
    chooseTransposeTiles(plan, num_tensors, config().tile_side);
  }
  if (device.is_cuda()) {
    shareEqualStrides(plan, num_tensors);
    for (size_t t = 0; t < num_tensors; ++t) {
      const TensorView& base = views[first_chunk[t]];
      const int64_t bytes = static_cast<char*>(views[t].data) - static_cast<char*>(base.data);
      plan.pointer_base.push_back(first_chunk[t]);
      plan.pointer_delta.push_back(bytes / static_cast<int64_t>(c10::elementSize(base.dtype)));
    }
  }
  const bool vectorize = allowsVectorAccess(plan, views, device);
  const KernelShape kernel_shape{c10::ArrayRef<TensorView>(views).slice(0, num_tensors), zero_dim,
                                 out_slots};
  const Specialization& spec = specialize(makeKey(plan, zero_dim, out_slots, device, vectorize),
                                          plan, kernel_shape, device, vectorize);
  if (!spec.kernel) return runInterpreted(stack, "the kernel did not build");

  c10::SmallVector<void*, 24> ptrs;
  for (size_t t = 0; t < num_tensors; ++t) ptrs.push_back(views[t].data);
  for (size_t o = 0; o < targets.size(); ++o) {
    if (targets[o].pieces > 0) {
      const TensorView& slice = views[out_slots[o]];
      if (slice.dtype != spec.out_dtypes[o]) {
        return runInterpreted(stack, "a cat piece of another dtype");
      }
      ptrs.push_back(slice.data);
      continue;
    }
    at::Tensor& out = outputs[targets[o].group_output];
    out = allocateStrided(out_layouts[o].sizes, out_layouts[o].strides, spec.out_dtypes[o],
                          device);
    ptrs.push_back(out.data_ptr());
  }
  launch(spec, plan, ptrs, dargs, iargs, num_tensors, device);
  if (repeatable) {
    auto prepared = std::make_shared<Prepared>();
    prepared->signature = std::move(signature.key);
    for (size_t t = 0; t < num_tensors; ++t) {
      prepared->views.emplace_back(
          view_inputs[t], static_cast<char*>(views[t].data) - signature.data[view_inputs[t]]);
    }
    prepared->out_layouts = std::move(out_layouts);
    prepared->plan = std::move(plan);
    prepared->spec = &spec;
    prepared->device = device;
    std::lock_guard<std::mutex> lock(prepared_mutex_);
    prepared_ = std::move(prepared);
  }
  torch::jit::drop(stack, num_inputs_);
  for (auto& out : outputs) stack.emplace_back(std::move(out));
}

}  // namespace fuser::runtime
