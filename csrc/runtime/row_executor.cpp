#include "runtime/row_executor.h"
#include "value_types.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <unordered_map>

#include "codegen/lowering.h"
#include "codegen/row_printer.h"
#include "ops/op_table.h"
#include "config.h"
#include "runtime/column_partials.h"
#include "runtime/cuda/driver_library.h"
#include "runtime/cuda/stream_capture.h"
#include "runtime/kernel_builder.h"
#include "runtime/output_allocation.h"
#include "runtime/tensor_view.h"
#include "runtime/variant_timing.h"
#include "stats.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

using Sizes = std::vector<int64_t>;

// Why this thread's last plan() gave no kernel: FUSER_DUMP=interpreted prints it beside
// the calls that then run interpreted.
thread_local const char* t_refusal = nullptr;

std::nullptr_t refuse(const char* why) {
  t_refusal = why;
  return nullptr;
}

// The longest CPU row read across strides (each element a cache line of its own, kept
// for the next row's elements beside it): `t + layer_norm(x)` of a transposed t ran
// 0.69x the interpreted time at rows of 256, level with eager at 512, and 2.8x eager's
// at 1024 (`y - y.mean(-1)` of a transposed product).
constexpr int64_t kCpuRowAcrossStrides = 512;
// Rows of fewer elements than this share a CPU thread with others.
constexpr int64_t kCpuElementsPerThread = 32768;
// Rows cut in slices (codegen/split_rows.h): a slice's least elements (CUDA, CPU), the
// units of work wanted per multiprocessor or thread, and the CUDA lanes per unit.
constexpr int64_t kMinCudaSlice = 4096;
constexpr int64_t kMinCpuSlice = kCpuElementsPerThread;
constexpr int64_t kCudaUnitsPerSm = 4;
constexpr int64_t kCpuUnitsPerThread = 2;
constexpr int kSliceLanes = 256;
constexpr int64_t kColumnThreadsPerSm = 2048;
// Column slices of 512 elements at least (H100, device time of sums over dim 0 of
// [8192, C] to [C], a bias's gradient: 64 slices of 128 took 39.9, 34.2 and 17.1 us in
// float16 for C = 3072, 2304 and 768, and 50.5, 43.2, 18.1 in float32; 16 slices of
// 512 took 29.7, 25.7, 16.9 and 42.7, 36.7, 17.2; 32768 x 1024 keeps its 64 slices).
constexpr int64_t kMinColumnSlice = 512;
// A thread of the last stage combines its rows' partials one slice after another: 1056
// slices of a column sum of 32768 x 1024 floats took 440 us there, 3.4x the whole walk.
constexpr int64_t kMaxColumnSlices = 64;

// The strides of `t` read over `shape` (it broadcasts to it): 0 along new and stretched
// dims, and along dims of size 1, which no element steps over.
Sizes expandedStrides(const at::Tensor& t, const Sizes& shape) {
  Sizes strides(shape.size(), 0);
  const int64_t lead = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) != 1) strides[lead + d] = t.stride(d);
  }
  return strides;
}

// Whether `t` is a row-major tensor expanded along some dims (autograd's gradient of a
// sum or mean, `grad.expand(sizes)`): its other dims step as a contiguous tensor of
// their sizes would. Eager's TensorIterator orders dims by the strides that are not 0,
// so such an input leaves its results row-major, as a contiguous one does.
bool expandedRowMajor(const at::Tensor& t) {
  int64_t step = 1;
  for (int64_t d = t.dim(); d-- > 0;) {
    if (t.size(d) == 1 || t.stride(d) == 0) continue;
    if (t.stride(d) != step) return false;
    step *= t.size(d);
  }
  return true;
}

// The subgraph's ops and values without the profiled sizes and strides of its types
// (the first call's shape): part of the variant keys, which take the shape class apart.
std::string opsText(torch::jit::Graph& subgraph) {
  auto copy = subgraph.copy();
  torch::jit::removeTensorTypeSpecializations(copy->block());
  return copy->toString(false);
}

// Whether a tensor walks a row (the dims from `outer_ndim` on) as one unit-stride run:
// element e of the row at offset e.
bool oneRun(c10::ArrayRef<int64_t> sizes, c10::ArrayRef<int64_t> strides, int outer_ndim) {
  int64_t step = 1;
  for (size_t d = sizes.size(); d-- > static_cast<size_t>(outer_ndim);) {
    if (strides[d] != step) return false;
    step *= sizes[d];
  }
  return true;
}

// Dim 1 of sizes (or of the strides over them) as two: (groups, per_group) sizes; the
// strides of a dim of stride s split into (s * per_group, s).
Sizes splitDim1(const Sizes& v, int64_t groups, int64_t per_group, bool strides) {
  Sizes out(v.begin(), v.begin() + 1);
  if (strides) {
    out.push_back(v[1] * per_group);
    out.push_back(v[1]);
  } else {
    out.push_back(groups);
    out.push_back(per_group);
  }
  out.insert(out.end(), v.begin() + 2, v.end());
  return out;
}

// Dims [begin, end) of `shape` without those of size 1, neighbours merged where every
// tensor steps across them as across one dim; appended to `sizes` and, per tensor, to
// `strides[t]`. Returns the number of dims appended (at least 1).
int collapse(const Sizes& shape, const std::vector<Sizes>& tensor_strides, int64_t begin,
             int64_t end, c10::SmallVector<int64_t, 8>& sizes,
             std::vector<c10::SmallVector<int64_t, 8>>& strides) {
  const size_t first = sizes.size();
  for (int64_t d = begin; d < end; ++d) {
    if (shape[d] == 1) continue;
    bool merge = sizes.size() > first;
    for (size_t t = 0; merge && t < tensor_strides.size(); ++t) {
      merge = strides[t].back() == tensor_strides[t][d] * shape[d];
    }
    if (merge) {
      sizes.back() *= shape[d];
      for (size_t t = 0; t < tensor_strides.size(); ++t) strides[t].back() = tensor_strides[t][d];
      continue;
    }
    sizes.push_back(shape[d]);
    for (size_t t = 0; t < tensor_strides.size(); ++t) strides[t].push_back(tensor_strides[t][d]);
  }
  if (sizes.size() == first) {
    sizes.push_back(1);
    for (auto& s : strides) s.push_back(0);
  }
  return static_cast<int>(sizes.size() - first);
}

// The slices each of `rows` rows of `n` elements is cut in; 1: whole rows. Rows fewer
// than the multiprocessors (CPU threads) leave some idle: their rows are cut so that
// each has kCudaUnitsPerSm units (kCpuUnitsPerThread), slices of a least length.
int64_t rowSplits(int64_t rows, int64_t n, c10::Device device) {
  if (config().row_splits > 0) return std::min<int64_t>(config().row_splits, std::max<int64_t>(n, 1));
  const bool cuda = device.is_cuda();
  const int64_t workers =
      cuda ? cuda::deviceInfo(device.index()).sm_count : at::get_num_threads();
  if (rows >= workers) return 1;
  const int64_t wanted = (cuda ? kCudaUnitsPerSm : kCpuUnitsPerThread) * workers;
  const int64_t longest = n / (cuda ? kMinCudaSlice : kMinCpuSlice);
  return std::max<int64_t>(1, std::min((wanted + rows - 1) / rows, longest));
}

// The last stage of CUDA columns cut in slices walks no slice: it combines each row's
// partials and stores the per-row outputs. It takes one row per thread rather than the
// walking stages' vector of rows, so that its loads spread over 4x (float32) to 8x
// (16-bit) the threads (a float16 column variance of 32768 x 1024 on the H100: the last
// stage 15.9 us with 8 rows per thread, on 4 of 132 multiprocessors; 2.9 with one).
bool cudaColumnsLastStage(const codegen::Kernel& k, const codegen::RowSchedule& schedule) {
  return k.columns && k.device == c10::DeviceType::CUDA && codegen::lastStagePerRow(k, schedule);
}

// Columns (Kernel::columns) of `units` units (CUDA: threads, codegen::cudaColumnThreads;
// CPU: rows) per slice: on CUDA, cut in slices until the threads would fill every
// multiprocessor (kColumnThreadsPerSm), slices of at least kMinColumnSlice elements of
// each row (a row is a column: for a sum over dim 0 of [N, C], elements of the N), at
// most kMaxColumnSlices of them. On CPU, blocks of rows (codegen::kCpuColumnBlock) fewer
// than kCpuUnitsPerThread per thread are cut, each block's slice at least
// kCpuElementsPerThread elements: a block as wide as the tensor streams through
// memory, where narrower blocks of the same rows read each cache line several times
// over (a column sum of 8192 x 768 floats took 2.0 ms as one block of 768 rows, 3.1 as
// eight of 96).
int64_t columnSplits(int64_t units, int64_t n, c10::Device device) {
  if (config().row_splits > 0) return std::min<int64_t>(config().row_splits, std::max<int64_t>(n, 1));
  if (!device.is_cuda()) {
    const int64_t blocks = (units + codegen::kCpuColumnBlock - 1) / codegen::kCpuColumnBlock;
    const int64_t wanted = kCpuUnitsPerThread * at::get_num_threads();
    if (blocks >= wanted) return 1;
    const int64_t longest =
        n * std::min<int64_t>(units, codegen::kCpuColumnBlock) / kCpuElementsPerThread;
    return std::max<int64_t>(1, std::min((wanted + blocks - 1) / blocks, longest));
  }
  const int64_t wanted = kColumnThreadsPerSm * cuda::deviceInfo(device.index()).sm_count;
  if (units * 2 >= wanted) return 1;
  const int64_t longest = std::min(n / kMinColumnSlice, kMaxColumnSlices);
  return std::max<int64_t>(1, std::min((wanted + units - 1) / units, longest));
}

// The group's reduction over trailing dims (the rows of its kernel), if any.
std::optional<ops::RowReduction> trailingRowReduction(const torch::jit::Graph& subgraph) {
  for (const torch::jit::Node* n : subgraph.nodes()) {
    auto r = ops::rowReductionOf(n);
    if (r && r->dims.empty() && r->groups == 0) return r;
  }
  return std::nullopt;
}

}  // namespace

bool RowExecutor::reduces(const torch::jit::Graph& subgraph) {
  for (const torch::jit::Node* node : subgraph.nodes()) {
    const ops::OpEntry* entry = ops::findOp(node);
    if (entry && entry->reduces) return true;
  }
  return false;
}

RowExecutor::RowExecutor(const torch::jit::Node* node)
    : subgraph_(node->g(c10::attr::Subgraph)),
      subgraph_text_(opsText(*subgraph_)),
      num_inputs_(node->inputs().size()),
      num_outputs_(node->outputs().size()),
      interpreted_(subgraph_) {
  takeColumnSumsOut();
  philox_offsets_ = philoxOffsetInputs(*subgraph_);
  for (const torch::jit::Value* in : subgraph_->inputs()) {
    is_tensor_.push_back(isTensor(in));
    scalar_kinds_.push_back(codegen::scalarArgKindOf(in->type()));
    num_int_args_ += !is_tensor_.back() && scalar_kinds_.back() != codegen::ScalarArgKind::Double;
  }
  // What the partition guarantees (fusibility.h: checkRowGroup), checked again: a
  // kernel that broke it would compute something else than the graph.
  for (const torch::jit::Node* n : subgraph_->nodes()) {
    reductions_.push_back(ops::rowReductionOf(n));
    const auto& r = reductions_.back();
    const ops::OpEntry* entry = ops::findOp(n);
    if (n->kind() != c10::prim::Constant && !entry) runnable_ = false;
    if (entry && entry->reduces && !r) runnable_ = false;
    if (r && r->result == ops::RowReduction::Result::DropDims) {
      for (const torch::jit::Value* out : n->outputs()) {
        for (const auto& use : out->uses()) {
          if (use.user->kind() != c10::prim::Return) runnable_ = false;
        }
      }
    }
    if (!r) continue;
    if (rank_ == 0) {
      rank_ = r->rank;
      reduced_ = r->reduced;
      groups_ = r->groups;
      reduced_dims_ = r->dims;
    } else if (!groupReduction(r->result).sameDims(*r)) {
      runnable_ = false;
    }
  }
  // Inputs read only as the input of layer_norm, rms_norm, softmax or log_softmax may
  // have any strides: eager makes them contiguous first and returns a contiguous result.
  // Those read so at all are read as runs or not at all (RowExecutor::plan).
  normalized_only_.assign(subgraph_->inputs().size(), false);
  normalized_.assign(subgraph_->inputs().size(), false);
  for (const torch::jit::Value* in : subgraph_->inputs()) {
    bool only = !in->uses().empty(), some = false;
    for (const auto& use : in->uses()) {
      const c10::Symbol kind = use.user->kind();
      const bool normalized = use.offset == 0 && (ops::isShapeNormalization(use.user) ||
                                                  kind == c10::aten::softmax ||
                                                  kind == c10::aten::log_softmax);
      only = only && normalized;
      some = some || normalized;
    }
    normalized_only_[in->offset()] = only;
    normalized_[in->offset()] = some;
  }
  // group_norm's weight and bias: group inputs read per channel, and nowhere else.
  channel_tensors_.assign(subgraph_->inputs().size(), false);
  for (const torch::jit::Node* n : subgraph_->nodes()) {
    if (n->kind() != c10::aten::group_norm) continue;
    for (size_t slot : {ops::kGroupNormWeight, ops::kGroupNormBias}) {
      const torch::jit::Value* v = n->input(slot);
      if (v->type()->kind() == c10::TypeKind::NoneType) continue;
      if (v->node() != subgraph_->param_node() || v->uses().size() != 1) {
        runnable_ = false;
        continue;
      }
      channel_tensors_[v->offset()] = true;
    }
  }
  runnable_ = runnable_ && rank_ > 0;
  try {
    layouts_.emplace(*subgraph_, [](const torch::jit::Node* n) {
      const ops::OpEntry* entry = ops::findOp(n);
      return ops::rowReductionOf(n).has_value() || (entry && entry->reduces);
    });
  } catch (const c10::Error&) {
    layouts_.reset();
  }
}

void RowExecutor::takeColumnSumsOut() {
  column_sums_.assign(num_outputs_, std::nullopt);
  column_dtypes_.assign(num_outputs_, c10::ScalarType::Undefined);
  column_targets_.assign(num_outputs_, std::nullopt);
  auto row = trailingRowReduction(*subgraph_);
  if (!row) return;
  auto kernel_graph = subgraph_->copy();
  bool any = false;
  auto returned_only = [](const torch::jit::Value* v) {
    return !v->uses().empty() &&
           std::all_of(v->uses().begin(), v->uses().end(), [](const torch::jit::Use& use) {
             return use.user->kind() == c10::prim::Return;
           });
  };
  for (auto it = kernel_graph->nodes().begin(); it != kernel_graph->nodes().end();) {
    torch::jit::Node* n = *it++;
    if (!ops::isColumnSumBeside(n, *row)) continue;
    // The sum's result, or its conversion (a 16-bit weight's gradient summed in float),
    // as the partition let it join (fusibility.h: checkRowGroup).
    auto* result = const_cast<torch::jit::Value*>(ops::columnSumResult(n));
    if (!returned_only(result)) continue;
    torch::jit::Node* conversion = result == n->output() ? nullptr : result->node();
    for (const auto& use : result->uses()) {
      column_sums_[use.offset] = ops::rowReductionOf(n);
      column_targets_[use.offset] = ops::gradSumTarget(n);
      // isFloatingConversion checked the profiled type's dtype.
      if (conversion) {
        column_dtypes_[use.offset] = *result->type()->expect<c10::TensorType>()->scalarType();
      }
    }
    result->replaceAllUsesWith(n->input(0));
    if (conversion) {
      if (*it == conversion) ++it;
      conversion->destroy();
    }
    n->destroy();
    any = true;
  }
  if (any) subgraph_ = kernel_graph;
}

void RowExecutor::runInterpreted(torch::jit::Stack& stack, const char* why) {
  interpreted_.run(stack, why);
}

ops::RowReduction RowExecutor::groupReduction(ops::RowReduction::Result result) const {
  ops::RowReduction r;
  r.rank = rank_;
  r.reduced = reduced_;
  r.dims = reduced_dims_;
  r.result = result;
  r.groups = groups_;
  return r;
}

const RowExecutor::Specialization& RowExecutor::specialize(
    const c10::SmallVector<uint8_t, 32>& key, const std::vector<codegen::TensorInput>& accesses,
    const std::vector<bool>& zero_dim, const std::vector<bool>& per_row,
    const std::vector<bool>& rows_apart, int outer_ndim, int inner_ndim,
    const codegen::CudaRowShape& row_shape,
    const std::vector<codegen::CudaRowShape>& cross_shapes, c10::Device device, bool staged,
    bool strided_outputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& s : specializations_) {
    if (s->key == key) return *s;
  }
  auto spec = std::make_unique<Specialization>();
  spec->key = key;
  spec->kernel = buildOrRunUnfused([&]() -> std::shared_ptr<CompiledKernel> {
    std::vector<c10::ScalarType> dtypes;
    for (const auto& a : accesses) dtypes.push_back(a.dtype);
    const std::vector<codegen::InputDesc> descs =
        codegen::inputDescs(is_tensor_, scalar_kinds_, dtypes, zero_dim, accesses);
    // A kernel for `shape` on `on`. A CUDA row walked from memory in every pass (too
    // long to hold, cut in slices, or columns) takes its variances in one pass.
    auto lower = [&](c10::DeviceType on, const codegen::CudaRowShape& shape) {
      // (Columns in shared memory read it there: two passes cost no second read.)
      const bool one_pass = on == c10::DeviceType::CUDA && !shape.in_shared &&
                            (staged || shape.columns || shape.chunks == 0);
      const bool cuda_held =
          on == c10::DeviceType::CUDA && !staged && !shape.columns && shape.chunks > 0;
      codegen::Kernel k = codegen::lowerSubgraph(*subgraph_, descs, outer_ndim + inner_ndim,
                                                 /*flat=*/false, on, one_pass);
      TORCH_CHECK(k.rows, "fuser: a reducing group lowered without reductions");
      k.name = "fuser_rows";
      k.outer_ndim = outer_ndim;
      k.inner_ndim = inner_ndim;
      k.row_lanes = shape.lanes;
      k.row_chunks = shape.chunks;
      k.row_vector = shape.vector;
      k.row_vector_in_last_dim = shape.vector_in_last_dim;
      k.columns = shape.columns;
      k.columns_in_shared = shape.in_shared;
      k.column_blocks = shape.column_blocks;
      k.strided_outputs = strided_outputs;
      for (size_t o = 0; o < k.outputs.size(); ++o) {
        k.outputs[o].per_row = per_row[o];
        k.outputs[o].rows_apart = rows_apart[o];
      }
      // Column sums of float values summed in registers where the rows are held and
      // the sums' registers fit beside the held values.
      const auto sums = static_cast<int>(std::count_if(
          column_sums_.begin(), column_sums_.end(), [](const auto& r) { return r.has_value(); }));
      bool partials = sums > 0 && cuda_held && codegen::cudaRowsHeld(k) &&
                      codegen::cudaColumnPartialsFit(k, sums);
      for (size_t o = 0; o < k.outputs.size(); ++o) {
        if (!column_sums_[o]) continue;
        partials = partials && !k.outputs[o].per_row &&
                   k.exprs[k.outputs[o].value].type == c10::ScalarType::Float;
      }
      for (size_t o = 0; partials && o < k.outputs.size(); ++o) {
        k.outputs[o].column_partial = column_sums_[o].has_value();
      }
      if (codegen::hasWelford(k)) stats().one_pass_variance_kernels++;
      return k;
    };
    // Stage kernels: one per stage of a row cut in slices (split_rows.h).
    auto stages = [&](codegen::Kernel k, const std::function<void(const codegen::Kernel&)>& each) {
      k.row_lanes = row_shape.columns ? 1 : kSliceLanes;  // the vector width: row_shape's
      k.row_chunks = 0;
      const codegen::RowSchedule schedule = codegen::scheduleRows(k);
      for (int stage = 0; stage < codegen::splitStages(schedule); ++stage) {
        k.row_stage = stage;
        if (cudaColumnsLastStage(k, schedule)) k.row_vector = 1;
        each(k);
      }
    };
    // On a CPU machine with FUSER_CROSS_COMPILE: the CUDA forms of the kernel, as CUDA
    // lowers them (buildKernel checks the CPU-lowered one, which has no one-pass
    // variances); `also_two_pass`: those without one-pass variances too.
    const bool cross = config().cross_compile_arch && !device.is_cuda();
    auto cross_compile = [&](const codegen::CudaRowShape& shape, bool also_two_pass) {
      codegen::Kernel k;
      try {
        k = lower(c10::DeviceType::CUDA, shape);
      } catch (const std::exception& e) {
        stats().cuda_cross_compiles++;
        stats().cuda_cross_compile_failures++;
        TORCH_WARN("fuser: FUSER_CROSS_COMPILE: the CUDA lowering of a kernel failed: ", e.what());
        return;
      }
      if (!also_two_pass && !codegen::hasWelford(k)) return;
      if (!staged) return crossCompileForCuda(k);
      stages(k, [](const codegen::Kernel& s) { crossCompileForCuda(s); });
    };
    codegen::Kernel kernel = lower(device.type(), row_shape);
    for (const auto& out : kernel.outputs) spec->out_dtypes.push_back(out.dtype);
    spec->column_partials = codegen::hasColumnPartials(kernel);
    if (staged) {
      spec->buffers = codegen::splitBuffers(kernel, codegen::scheduleRows(kernel));
      stages(kernel, [&](const codegen::Kernel& s) {
        spec->stages.push_back(buildKernel(s, device));
        spec->last_stage_per_row = codegen::lastStagePerRow(s, codegen::scheduleRows(s));
      });
      if (cross) cross_compile(row_shape, /*also_two_pass=*/false);
      return spec->stages.back();
    }
    std::shared_ptr<CompiledKernel> built = buildKernel(kernel, device);
    // The CUDA kernel's other variants (lane counts) too.
    for (size_t v = 0; cross && v < cross_shapes.size(); ++v) cross_compile(cross_shapes[v], v > 0);
    return built;
  }, warned_);
  specializations_.push_back(std::move(spec));
  return *specializations_.back();
}

int cudaColumnsInSharedBlocks(int device_index, int64_t bytes, bool tiles) {
  const cuda::DeviceInfo device = cuda::deviceInfo(device_index);
  if (device.arch.major < 8 || bytes > codegen::kCudaColumnSharedBytes ||
      bytes + codegen::kCudaColumnStaticBytes > device.max_shared_per_block) {
    return 0;
  }
  // (Each block's static arrays are a few KiB but where it tiles; counted as 8.)
  auto fit = [&](int blocks) { return blocks * (bytes + 8 * 1024) <= device.max_shared_per_sm; };
  if (tiles && fit(4)) return 4;
  return fit(codegen::kColumnBlocks) ? codegen::kColumnBlocks : 0;
}

// A random dropout's kernels number the elements in the iteration's order, the
// interpreter's fuser::philox_dropout in its output's memory order: with permuted inputs
// the two would draw other masks from one state.
bool RowExecutor::drawsRandomDropout() const {
  for (const torch::jit::Node* n : subgraph_->nodes()) {
    if (n->kind() == philoxDropoutSymbol()) return true;
  }
  return false;
}

bool RowExecutor::stridedOutputs(const std::vector<at::Tensor>& tensors,
                                 const std::vector<size_t>& params, Plan& p) const {
  if (groups_ != 0 || !reduced_dims_.empty()) return false;
  if (drawsRandomDropout()) return false;
  auto concrete = [](const torch::jit::Value* v) -> std::optional<std::pair<Sizes, Sizes>> {
    auto type = v->type()->cast<c10::TensorType>();
    if (!type) return std::nullopt;
    auto sizes = type->sizes().concrete_sizes();
    auto strides = type->strides().concrete_sizes();
    if (!sizes || !strides) return std::nullopt;
    return std::make_pair(*sizes, *strides);
  };
  for (size_t t = 0; t < tensors.size(); ++t) {
    auto profiled = concrete(subgraph_->inputs()[params[t]]);
    if (!profiled || c10::IntArrayRef(profiled->first) != tensors[t].sizes() ||
        c10::IntArrayRef(profiled->second) != tensors[t].strides()) {
      return false;
    }
  }
  for (size_t o = 0; o < p.out_sizes.size(); ++o) {
    // A column sum's operand is only summed: it stays contiguous.
    if (column_sums_[o]) continue;
    auto profiled = concrete(subgraph_->outputs()[o]);
    if (!profiled || profiled->first != p.out_sizes[o]) return false;
    // Eager's results never overlap; a value typed otherwise (strides of an expanded
    // operand) would have its elements written over one another.
    TensorView layout;
    layout.sizes.assign(profiled->first.begin(), profiled->first.end());
    layout.strides.assign(profiled->second.begin(), profiled->second.end());
    if (!layout.isNonOverlappingAndDense()) return false;
    p.out_strides[o] = profiled->second;
  }
  return true;
}

bool RowExecutor::eagerOutputLayouts(
    const std::vector<at::Tensor>& tensors,
    const std::unordered_map<const torch::jit::Value*, std::vector<int64_t>>& shapes,
    Plan& p, bool through_strides) const {
  if (!layouts_) return !through_strides;
  std::vector<TensorView> views;
  for (const at::Tensor& t : tensors) views.push_back(TensorView::of(t));
  // ATen allocates reductions' and normalizations' results contiguous (the inputs here
  // are contiguous or read only by normalizations).
  std::vector<Layout> given;
  for (const torch::jit::Value* v : layouts_->givenValues()) {
    auto it = shapes.find(v);
    if (it == shapes.end()) return true;
    given.push_back(contiguousLayout(it->second));
  }
  std::vector<Layout> eager;
  layouts_->run(views, eager, {}, given);
  for (size_t o = 0; o < p.out_sizes.size(); ++o) {
    if (column_sums_[o]) continue;  // summed by ATen, its result contiguous
    const Layout& layout = eager[o];
    if (c10::IntArrayRef(layout.sizes) != c10::IntArrayRef(p.out_sizes[o])) return false;
    if (through_strides) {
      if (!isNonOverlappingAndDense(layout)) return false;
      p.out_strides[o].assign(layout.strides.begin(), layout.strides.end());
      continue;
    }
    for (size_t d = 0; d < layout.sizes.size(); ++d) {
      if (layout.sizes[d] != 1 && layout.strides[d] != p.out_strides[o][d]) return false;
    }
    p.out_strides[o].assign(layout.strides.begin(), layout.strides.end());
  }
  return true;
}

std::shared_ptr<RowExecutor::Plan> RowExecutor::plan(c10::ArrayRef<c10::IValue> inputs,
                                                     c10::SmallVector<int64_t, 32> signature) {
  // Every value's sizes, as eager would give them.
  std::unordered_map<const torch::jit::Value*, Sizes> shapes;
  std::vector<at::Tensor> tensors;
  std::vector<bool> per_channel;  // per tensor: group_norm's weight or bias
  std::vector<bool> normalized_only;  // per tensor: read only by normalizations
  std::vector<bool> normalized;       // per tensor: read by a normalization
  std::vector<size_t> tensor_param;  // per tensor: its subgraph input
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_tensor_[i]) continue;
    const at::Tensor& t = inputs[i].toTensor();
    tensor_param.push_back(i);
    shapes.emplace(subgraph_->inputs()[i], t.sizes().vec());
    tensors.push_back(t);
    per_channel.push_back(channel_tensors_[i]);
    normalized_only.push_back(normalized_only_[i]);
    normalized.push_back(normalized_[i]);
  }
  // Eager's adaptive_avg_pool2d gives a channels-last input's [N, C, 1, 1] result
  // channels-last strides; per-row outputs are contiguous, so such calls run interpreted
  // (what the layout rules below decide for them too, checked here by name).
  for (const torch::jit::Node* node : subgraph_->nodes()) {
    if (node->kind() != c10::aten::adaptive_avg_pool2d) continue;
    for (const at::Tensor& t : tensors) {
      if (t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
        return refuse("eager gives a channels-last input's adaptive_avg_pool2d its strides");
      }
    }
  }
  std::optional<Sizes> shape;  // what every reduction reads
  size_t n = 0;
  try {
    for (const torch::jit::Node* node : subgraph_->nodes()) {
      const auto& reduction = reductions_[n++];
      if (node->kind() == c10::prim::Constant) continue;
      if (!reduction) {
        // type_as and the conversions read their other tensor for its dtype only.
        const bool keeps_self = node->kind() == c10::aten::type_as || node->kind() == c10::aten::to;
        Sizes out;
        for (const torch::jit::Value* in : node->inputs()) {
          auto it = shapes.find(in);
          if (it != shapes.end()) out = at::infer_size(out, it->second);
          if (keeps_self) break;
        }
        // Every output (native_dropout's result and mask) has the broadcast shape.
        for (const torch::jit::Value* result : node->outputs()) shapes.emplace(result, out);
        continue;
      }
      const Sizes& in = shapes.at(node->input(0));
      if (static_cast<int64_t>(in.size()) != rank_ || (shape && *shape != in)) {
        return refuse("the reductions read values of different shapes");
      }
      shape = in;
      if (node->kind() == c10::aten::group_norm) {
        // Eager raises for channels the groups do not split, and for a weight or bias
        // that is not one element per channel.
        if (in.size() < 2 || in[1] % groups_ != 0) {
          return refuse("group_norm's groups do not split the channels (eager raises)");
        }
        for (size_t w : {ops::kGroupNormWeight, ops::kGroupNormBias}) {
          auto it = shapes.find(node->input(w));
          if (it != shapes.end() && it->second != Sizes{in[1]}) {
            return refuse("group_norm's weight or bias is not one per channel (eager raises)");
          }
        }
      }
      if (node->kind() == c10::aten::_grad_sum_to_size) {
        // The guard pins the size, not the gradient's sizes: eager raises where the
        // size does not expand to the gradient's (the sum would give another shape).
        auto size = ops::gradSumTarget(node);
        if (!size || ops::reducedSizes(in, *reduction) != *size) {
          return refuse("_grad_sum_to_size's size does not match the gradient's (eager raises)");
        }
      }
      if (ops::isShapeNormalization(node)) {
        // The guard fixes ranks, not sizes: eager raises for a normalized shape or a
        // weight that is not the row's (rms_norm has no bias).
        const Sizes row(in.end() - reduced_, in.end());
        auto normalized = torch::jit::toIValue(node->namedInput("normalized_shape"));
        if (!normalized || normalized->toIntVector() != row) {
          return refuse("a normalized shape that is not the row's (eager raises)");
        }
        for (size_t w : {2, 3}) {
          if (w == 3 && !ops::isLayerNorm(node)) continue;
          auto it = shapes.find(node->input(w));
          if (it != shapes.end() && it->second != row) {
            return refuse("a normalization's weight or bias of another shape (eager raises)");
          }
        }
      }
      if (ops::isLayerNormInputGrad(node)) {
        // The kernel broadcasts what eager reads flat: the input must be the gradient's
        // shape, the mean and rstd one per row (the forward's, normalized dims kept),
        // the weight the row's.
        const Sizes row(in.end() - reduced_, in.end());
        auto normalized = torch::jit::toIValue(node->namedInput("normalized_shape"));
        if (!normalized || normalized->toIntVector() != row) {
          return refuse("layer_norm's backward: its normalized shape is not the row's");
        }
        const Sizes per_row = ops::reducedSizes(in, groupReduction(ops::RowReduction::Result::KeepDims));
        const std::pair<size_t, const Sizes*> expected[] = {{ops::kInputGradInput, &in},
                                                            {ops::kInputGradMean, &per_row},
                                                            {ops::kInputGradRstd, &per_row},
                                                            {ops::kInputGradWeight, &row}};
        for (const auto& [input, sizes] : expected) {
          auto it = shapes.find(node->input(input));
          if (it != shapes.end() && it->second != *sizes) {
            return refuse("layer_norm's backward: its operands' shapes are not the row's");
          }
        }
      }
      shapes.emplace(node->output(0), ops::reducedSizes(in, *reduction));
      // native_layer_norm's mean and rstd: one per row, the normalized dims kept;
      // var_mean's and std_mean's mean: the first output's shape.
      const ops::RowReduction statistics =
          ops::isLayerNorm(node) ? groupReduction(ops::RowReduction::Result::KeepDims) : *reduction;
      for (size_t o = 1; o < node->outputs().size(); ++o) {
        shapes.emplace(node->output(o), ops::reducedSizes(in, statistics));
      }
    }
  } catch (const c10::Error&) {
    return refuse("shapes that do not broadcast (eager raises)");
  }
  if (!shape) return refuse("no reduction's input shape");
  int64_t numel = 1;
  for (int64_t s : *shape) numel *= s;
  if (numel == 0) return refuse("a zero-size iteration");

  // Column sums read values of the iteration shape (the guard pins ranks, not sizes: a
  // value of one element per row would be a per-row output), and a _grad_sum_to_size
  // gives its pinned size (eager raises otherwise).
  for (size_t o = 0; o < num_outputs_; ++o) {
    if (!column_sums_[o]) continue;
    auto it = shapes.find(subgraph_->outputs()[o]);
    if (it == shapes.end() || it->second != *shape) {
      return refuse("a column sum over a value of another shape than the iteration's");
    }
    if (column_targets_[o] && ops::reducedSizes(*shape, *column_sums_[o]) != *column_targets_[o]) {
      return refuse("a column sum whose size is not the gradient's (eager raises)");
    }
  }
  // Whole outputs have the iteration shape, per-row ones the reduced shape (over other
  // dims than the trailing ones, where the two can be one shape, an output of it is
  // per row).
  auto p = std::make_shared<Plan>();
  const int64_t lead = rank_ - reduced_;
  const Sizes kept = ops::reducedSizes(*shape, groupReduction(ops::RowReduction::Result::KeepDims));
  const Sizes dropped = ops::reducedSizes(*shape, groupReduction(ops::RowReduction::Result::DropDims));
  std::vector<bool> per_row;
  bool whole_beside_other_dims = false;
  for (const torch::jit::Value* out : subgraph_->outputs()) {
    auto it = shapes.find(out);
    if (it == shapes.end()) return refuse("an output of unknown shape");
    const bool reduced_shape = it->second == kept || it->second == dropped;
    if (it->second == *shape && reduced_dims_.empty()) {
      per_row.push_back(false);
    } else if (groups_ == 0 && reduced_shape) {
      per_row.push_back(true);
    } else if (groups_ == 0 && it->second == *shape) {
      per_row.push_back(false);
      whole_beside_other_dims = true;
    } else {
      return refuse("an output neither whole nor one element per row");
    }
    p->out_sizes.push_back(it->second);
    const c10::DimVector strides = c10::contiguous_strides(it->second);
    p->out_strides.emplace_back(strides.begin(), strides.end());
  }

  // Contiguous inputs (or row-major ones expanded: expandedRowMajor), one of the
  // iteration shape: eager's outputs are contiguous too.
  // (Inputs only normalized may have other strides, with rows of unit stride below:
  // eager's results of those are contiguous.) Other inputs (a transposed activation)
  // give outputs eager's layout of each (stridedOutputs).
  // Reductions over other dims read their permuted inputs of the iteration shape
  // (layer_norm's weight gradient over a transposed activation) in place below
  // (columns: neighbouring rows must stay neighbours in memory). Their per-row outputs
  // eager allocates contiguous whatever its inputs' layout; whole ones beside them are
  // stored through eager's layout of each (eagerOutputLayouts), which the iteration's
  // order of dims does not follow.
  bool full = false;
  bool strided = false;
  std::vector<bool> read_in_place(tensors.size(), false);
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_contiguous()) continue;
    read_in_place[t] = !reduced_dims_.empty() && groups_ == 0 &&
                       tensors[t].sizes() == c10::IntArrayRef(*shape);
    if (normalized_only[t]) continue;
    strided = strided || (!read_in_place[t] && !expandedRowMajor(tensors[t]));
  }
  if (whole_beside_other_dims) {
    if (!eagerOutputLayouts(tensors, shapes, *p, /*through_strides=*/true)) {
      return refuse("eager's layout of a whole output beside a reduction over other dims");
    }
    strided = true;
  } else if (strided) {
    // Eager's layout from the profiled types where the call's inputs are laid out as
    // profiled; else, for rows over the trailing dims, as ATen's rules give it for this
    // call (a gradient that arrives transposed against its profile), but for random
    // dropout (stridedOutputs).
    const bool trailing_rows = groups_ == 0 && reduced_dims_.empty();
    if (!stridedOutputs(tensors, tensor_param, *p) &&
        (!trailing_rows || drawsRandomDropout() ||
         !eagerOutputLayouts(tensors, shapes, *p, /*through_strides=*/true))) {
      return refuse("eager's layout of the outputs of strided inputs");
    }
  } else if (!eagerOutputLayouts(tensors, shapes, *p, /*through_strides=*/false)) {
    return refuse("eager's layout of the outputs");
  }
  std::vector<Sizes> tensor_strides;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (per_channel[t]) {  // [C] along dim 1 (its size was checked above)
      Sizes st(shape->size(), 0);
      if (tensors[t].size(0) != 1) st[1] = tensors[t].stride(0);
      tensor_strides.push_back(std::move(st));
      continue;
    }
    if (at::infer_size(tensors[t].sizes(), *shape) != *shape) {
      return refuse("an input that does not broadcast to the iteration shape");
    }
    full = full || tensors[t].sizes() == c10::IntArrayRef(*shape);
    tensor_strides.push_back(expandedStrides(tensors[t], *shape));
  }
  if (!full) return refuse("no input of the iteration shape");

  // group_norm: dim 1 of C channels becomes (groups, C / groups); a row is one group.
  Sizes iteration = *shape;
  int64_t row_begin = lead;
  if (groups_ > 0) {
    const int64_t per_group = (*shape)[1] / groups_;
    iteration = splitDim1(*shape, groups_, per_group, /*strides=*/false);
    for (Sizes& st : tensor_strides) st = splitDim1(st, groups_, per_group, /*strides=*/true);
    row_begin = 2;
  }
  // Strided outputs take part in merging dims as the inputs do (after them); a per-row
  // output's strides over the iteration's dims are 0 along the reduced ones.
  if (strided) {
    for (size_t o = 0; o < p->out_sizes.size(); ++o) {
      Sizes st(shape->size(), 0);
      if (per_row[o] && !reduced_dims_.empty()) {
        const bool keeps = p->out_sizes[o].size() == shape->size();
        size_t j = 0;  // the output's dim
        for (int64_t d = 0; d < rank_; ++d) {
          if (std::binary_search(reduced_dims_.begin(), reduced_dims_.end(), d)) {
            j += keeps;
            continue;
          }
          if (p->out_sizes[o][j] != 1) st[d] = p->out_strides[o][j];
          ++j;
        }
        tensor_strides.push_back(std::move(st));
        continue;
      }
      for (size_t d = 0; d < p->out_sizes[o].size() && d < st.size(); ++d) {
        const bool reduced = per_row[o] && static_cast<int64_t>(d) >= lead;
        if (p->out_sizes[o][d] != 1 && !reduced) st[d] = p->out_strides[o][d];
      }
      tensor_strides.push_back(std::move(st));
    }
  }
  // Reductions over other dims: the kept dims first (rows), the reduced ones after. The
  // first input read in place with a layout of its own (a channels-last activation; not
  // an expanded one) orders the reduced dims as its memory does and says whether rows
  // are neighbours; the kept dims keep their order, which numbers the per-row outputs.
  bool columns = false;
  if (!reduced_dims_.empty()) {
    std::optional<Sizes> layout;  // its strides, in the logical order of dims
    for (size_t t = 0; t < tensors.size() && !layout; ++t) {
      bool expanded = false;
      for (int64_t d = 0; d < rank_; ++d) {
        expanded = expanded || ((*shape)[d] != 1 && tensor_strides[t][d] == 0);
      }
      if (read_in_place[t] && !expanded) layout = tensor_strides[t];
    }
    Sizes reduced = reduced_dims_;
    if (layout) {
      auto memory_stride = [&](int64_t d) { return (*shape)[d] == 1 ? 0 : (*layout)[d]; };
      std::stable_sort(reduced.begin(), reduced.end(), [&](int64_t a, int64_t b) {
        return memory_stride(a) > memory_stride(b);
      });
    }
    Sizes order;
    for (int64_t d = 0; d < rank_; ++d) {
      if (!std::binary_search(reduced_dims_.begin(), reduced_dims_.end(), d)) order.push_back(d);
    }
    order.insert(order.end(), reduced.begin(), reduced.end());
    auto permuted = [&](const Sizes& v) {
      Sizes out;
      for (int64_t d : order) out.push_back(v[d]);
      return out;
    };
    iteration = permuted(iteration);
    for (Sizes& st : tensor_strides) st = permuted(st);
    // Rows are neighbours in memory when the innermost dim that is not of size 1 is kept
    // (innermost in the layout's memory, or else the last).
    int64_t innermost = -1;
    for (int64_t d = rank_ - 1; d >= 0; --d) {
      if ((*shape)[d] == 1) continue;
      if (innermost < 0 || (layout && (*layout)[d] < (*layout)[innermost])) innermost = d;
      if (!layout) break;
    }
    columns = innermost >= 0 &&
              !std::binary_search(reduced_dims_.begin(), reduced_dims_.end(), innermost);
  }
  // Whole outputs beside such reductions: column kernels store them element by element,
  // row kernels each row as one run (checked below with the other strided outputs).
  std::vector<c10::SmallVector<int64_t, 8>> strides(tensor_strides.size());
  const int outer_ndim = collapse(iteration, tensor_strides, 0, row_begin, p->sizes, strides);
  const int inner_ndim = collapse(iteration, tensor_strides, row_begin,
                                  static_cast<int64_t>(iteration.size()), p->sizes, strides);
  p->rows = 1;
  for (int d = 0; d < outer_ndim; ++d) p->rows *= p->sizes[d];
  p->row_size = numel / p->rows;
  p->device = tensors[0].device();
  // How CUDA lanes share a row (CPU kernels ignore it; FUSER_CROSS_COMPILE prints the
  // CUDA form with it). Vectors need every streamed input aligned to 16 bytes with row
  // offsets in whole vectors (of at most 16 bytes of the widest element, and at most 8
  // elements: cudaRowShape).
  int widest = 1;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (!oneRun(p->sizes, strides[t], outer_ndim)) continue;
    widest = std::max(widest, static_cast<int>(tensors[t].element_size()));
  }
  const int64_t longest_vector = std::min(8, 16 / widest);
  bool aligned = true;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto& st = strides[t];
    if (!oneRun(p->sizes, st, outer_ndim)) continue;
    aligned = aligned && reinterpret_cast<uintptr_t>(tensors[t].data_ptr()) % 16 == 0;
    for (int d = 0; d < outer_ndim; ++d) aligned = aligned && st[d] % longest_vector == 0;
  }
  // Strided outputs: a whole one's rows are stored as runs starting at whole vectors,
  // or, where eager's layout does not make a row one run (a gradient of a permuted
  // activation beside its bias's sum over N, H and W), element by element through the
  // row's strides (TensorOutput::rows_apart).
  std::vector<bool> rows_apart(p->out_sizes.size(), false);
  for (size_t o = 0; strided && o < p->out_sizes.size(); ++o) {
    const auto& st = strides[tensors.size() + o];
    if (per_row[o] || columns) continue;  // column kernels store element by element
    if (!oneRun(p->sizes, st, outer_ndim)) {
      rows_apart[o] = true;
      continue;
    }
    for (int d = 0; d < outer_ndim; ++d) aligned = aligned && st[d] % longest_vector == 0;
  }
  // Variants (runtime/variant_timing.h): CUDA kernels of other lane counts, each its
  // own kernel; one CPU kernel run at other rows per task. The first is the heuristic's;
  // with FUSER_AUTOTUNE=0 (and nothing forced), or a small problem on CUDA, it is the
  // only one.
  const bool worth_timing =
      !p->device.is_cuda() || p->rows * p->row_size >= kMinCudaElementsToTime;
  const bool variants = (config().autotune && worth_timing) || config().force_variant >= 0;
  std::vector<codegen::CudaRowShape> row_shapes =
      p->device.is_cuda() && variants ? codegen::cudaRowShapeCandidates(p->row_size, widest, aligned)
                                      : std::vector<codegen::CudaRowShape>{
                                            codegen::cudaRowShape(p->row_size, widest, aligned)};
  // Column sums: the heuristic's lanes hold at most kColumnPartialHeld elements each, so
  // that their running sums fit in registers beside them (codegen::cudaColumnPartialsFit;
  // a float16 row of 1024 takes 64 lanes, not 32). Timing still tries the others.
  const bool column_sums = std::any_of(column_sums_.begin(), column_sums_.end(),
                                      [](const auto& r) { return r.has_value(); });
  auto fewer_held = [&](std::vector<codegen::CudaRowShape>& shapes) {
    if (!column_sums || shapes.empty()) return;
    codegen::CudaRowShape first = shapes[0];
    while (first.chunks * first.vector > codegen::kColumnPartialHeld && first.lanes < 1024) {
      first = codegen::cudaRowShapeWithLanes(p->row_size, widest, aligned, first.lanes * 2);
    }
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                [&](const auto& s) { return s.lanes == first.lanes; }),
                 shapes.end());
    shapes.insert(shapes.begin(), first);
  };
  fewer_held(row_shapes);
  // On CPU, FUSER_CROSS_COMPILE compiles the CUDA form of every lane variant.
  std::vector<codegen::CudaRowShape> cross_shapes =
      p->device.is_cuda() || !config().cross_compile_arch
          ? std::vector<codegen::CudaRowShape>{}
          : codegen::cudaRowShapeCandidates(p->row_size, widest, aligned);
  fewer_held(cross_shapes);
  // Columns (codegen::printColumnKernel): on CUDA a thread takes a vector of neighbouring
  // rows, eight warps of a block sharing them; on CPU a task walks blocks of neighbouring
  // rows together. CUDA times the vector's widths (codegen::cudaColumnShapeCandidates).
  int widest_input = 1;
  for (const at::Tensor& t : tensors) widest_input = std::max(widest_input, static_cast<int>(t.element_size()));
  // Untimed (a small problem), a CUDA block of the widest vector that leaves some
  // multiprocessor without a block takes the narrowest instead: at the widest, a batch-2
  // Mixer LayerNorm's 98 rows were walked by one block on one multiprocessor (H200:
  // 129.6 us in float16, eager 32.4).
  auto untimed_column_shape = [&] {
    const std::vector<codegen::CudaRowShape> shapes =
        codegen::cudaColumnShapeCandidates(widest_input);
    if (!p->device.is_cuda()) return shapes.front();
    const int64_t blocks = codegen::cudaColumnBlocks(p->rows, shapes.front().vector);
    return blocks >= cuda::deviceInfo(p->device.index()).sm_count ? shapes.front() : shapes.back();
  };
  if (columns) {
    row_shapes = p->device.is_cuda() && variants ? codegen::cudaColumnShapeCandidates(widest_input)
                                                 : std::vector{untimed_column_shape()};
    // (Columns in shared memory join both lists below.)
    if (!cross_shapes.empty()) cross_shapes = codegen::cudaColumnShapeCandidates(widest_input);
  }
  // The units of work of a slice: rows, except for CUDA columns (threads, each of a
  // vector of rows; CPU kernels take their blocks of rows within a task).
  auto units_of = [&](const codegen::CudaRowShape& shape) {
    return columns && p->device.is_cuda() ? codegen::cudaColumnThreads(p->rows, shape.vector)
                                          : p->rows;
  };
  // Whether a shape's vectors lie within the row's last dim (its size a multiple).
  auto mark_last_dim = [&](codegen::CudaRowShape& shape) {
    shape.vector_in_last_dim = p->sizes.back() % shape.vector == 0;
  };
  for (auto* shapes : {&row_shapes, &cross_shapes}) {
    for (auto& shape : *shapes) mark_last_dim(shape);
  }
  std::vector<int64_t> grains = {
      std::max<int64_t>(1, kCpuElementsPerThread / std::max<int64_t>(p->row_size, 1))};
  // Columns: a task takes whole blocks of neighbouring rows (codegen::kCpuColumnBlock).
  if (columns) grains = {codegen::kCpuColumnBlock};
  if (!p->device.is_cuda() && variants && !columns) {
    for (int64_t g : {grains[0] * 8, grains[0] / 8}) {
      if (g >= 1 && g < p->rows && std::find(grains.begin(), grains.end(), g) == grains.end()) {
        grains.push_back(g);
      }
    }
  }

  // Rows too few to fill the machine are cut in slices: that variant first, the whole
  // rows' as candidates beside it (none where FUSER_ROW_SPLITS forces the cut). (Rows
  // that fill the machine a few times over gain little cut: a batch-32 GroupNorm, 256
  // rows on 132 multiprocessors, took 242 us whole and 231-246 at 2 to 8 slices.)
  // (Strided outputs of row kernels take whole rows: the stages of rows store them
  // contiguously. Column kernels store through strides in every stage.)
  // (Columns: counted in the units of the widest vector, the heuristic's.)
  const int64_t splits = columns   ? columnSplits(units_of(row_shapes[0]), p->row_size, p->device)
                         : strided ? 1
                                   : rowSplits(p->rows, p->row_size, p->device);
  if (splits > 1 && (!variants || config().row_splits > 1)) {
    row_shapes.clear();
    grains.resize(1);
  }

  c10::SmallVector<uint8_t, 32> key;
  key.push_back(static_cast<uint8_t>(p->device.type()));
  key.push_back(static_cast<uint8_t>(p->device.index() + 1));
  key.push_back(static_cast<uint8_t>(outer_ndim));
  key.push_back(static_cast<uint8_t>(inner_ndim));
  std::vector<codegen::TensorInput> accesses;
  std::vector<bool> zero_dim;
  // Inputs of the whole shape whose rows fit the walk, and those read in place whose
  // rows do not.
  int fitting = 0, misfits = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    codegen::TensorInput in{};
    in.dtype = tensors[t].scalar_type();
    in.access = codegen::Access::Strided;
    const auto& st = strides[t];
    in.inner_unit_stride = oneRun(p->sizes, st, outer_ndim);
    // An input a normalization reads must still have unit-stride runs for rows (a slice
    // of rows, x[:, 0]): rows read across strides (a permuted NCHW activation) ran 1.55x
    // slower than eager's copy-then-normalize on CPU. Other operands whose rows lie
    // across strides (an addend that arrives transposed against its profile) are read
    // through them: eager's ops one by one move more. Reductions over other dims read
    // their permuted inputs in place where a block's rows lie side by side (columns), or
    // share their elements (an expanded gradient: `out.sum().backward()` hands a bias
    // gradient ones of stride 0), or where each row's innermost elements are a run (the
    // walk's order follows the input's memory: MLP-Mixer's bias gradients over
    // transposed activations).
    // Beside such an input, another whose rows fit neither walk (a transposed gradient
    // beside a slice of rows, EfficientViT's attention backward) is read through its
    // strides, each row at its own offset: ATen's ops one by one cost more.
    // An input broadcast along its rows holds one value per row wherever it lies (the
    // gradient of a row mean, `grad.expand(...) / n`, is [rows, n] of strides [1, 0]).
    in.inner_zero_stride = std::all_of(st.begin() + outer_ndim, st.end(),
                                       [](int64_t s) { return s == 0; });
    const int64_t run = outer_ndim - 1;  // a block's rows lie in one run of this dim
    const bool neighbouring_rows = columns && run >= 0 && (st[run] == 1 || st[run] == 0);
    const bool rows_of_runs = !columns && (st.back() == 1 || in.inner_zero_stride);
    const bool fits = neighbouring_rows || rows_of_runs;
    if (read_in_place[t]) {
      (fits ? fitting : misfits)++;
    } else if (normalized[t] && !tensors[t].is_contiguous() && !in.inner_unit_stride &&
               !in.inner_zero_stride) {
      return refuse("a normalization's input whose rows are not runs: ATen copies it first");
    } else if (!p->device.is_cuda() && p->row_size > kCpuRowAcrossStrides &&
               !tensors[t].is_contiguous() && !in.inner_unit_stride && !in.inner_zero_stride) {
      return refuse("a CPU row read across strides, too long for its lines to stay cached");
    } else if (fits && tensors[t].sizes() == c10::IntArrayRef(*shape)) {
      fitting++;  // a contiguous input of the whole shape, whose rows fit
    }
    in.row_last_zero_stride = st.back() == 0;
    in.row_last_unit_stride = st.back() == 1;
    in.outer_zero_stride = columns && run >= 0 && st[run] == 0;
    accesses.push_back(in);
    zero_dim.push_back(tensors[t].dim() == 0);
    key.push_back(static_cast<uint8_t>(in.dtype));
    key.push_back(static_cast<uint8_t>(in.inner_unit_stride | in.inner_zero_stride << 1 |
                                       in.row_last_zero_stride << 3 |
                                       in.row_last_unit_stride << 4 | zero_dim.back() << 2 |
                                       in.outer_zero_stride << 5));
    p->strides.append(st.begin(), st.end());
  }
  if (misfits > 0 && fitting == 0) {
    return refuse("inputs whose rows fit neither walk, and none that fits");
  }
  // A whole output stored apart: a row's elements lie one per cache line, beside those
  // of the neighbouring rows; two threads storing neighbouring rows at once passed the
  // lines back and forth (`t + layer_norm(x)` over 49 rows of 768, t transposed: 8 ms
  // on two threads, 41 us on one).
  if (std::find(rows_apart.begin(), rows_apart.end(), true) != rows_apart.end()) {
    p->task_align = 64;
  }
  for (bool r : per_row) key.push_back(r);
  key.push_back(strided);
  for (size_t o = 0; strided && o < p->out_sizes.size(); ++o) {
    const auto& st = strides[tensors.size() + o];
    p->strides.append(st.begin(), st.end());
    // Column kernels: whole outputs whose rows do not lie side by side (CUDA tiles them).
    if (columns) rows_apart[o] = outer_ndim >= 1 && !per_row[o] && st[outer_ndim - 1] != 1;
    key.push_back(rows_apart[o]);
  }
  if (splits > 1) {
    // Slices load vectors of the row's vector width (its alignment allowing).
    codegen::CudaRowShape slice_shape =
        columns ? codegen::cudaColumnShape(widest_input)
                : codegen::cudaRowShape(p->row_size, widest, aligned);
    mark_last_dim(slice_shape);
    c10::SmallVector<uint8_t, 32> staged = key;
    staged.push_back(0xff);
    staged.push_back(static_cast<uint8_t>(slice_shape.vector | slice_shape.vector_in_last_dim << 7));
    staged.push_back(static_cast<uint8_t>(slice_shape.columns));
    const Specialization& spec =
        specialize(staged, accesses, zero_dim, per_row, rows_apart, outer_ndim, inner_ndim,
                   slice_shape, {}, p->device, /*staged=*/true, strided);
    if (!spec.kernel) return refuse("the sliced kernel did not build");
    p->out_dtypes = spec.out_dtypes;
    // The heuristic's count alone. On the H100 it timed best of the counts tried (a
    // whole-tensor mean: 198 us at its 528 slices, 215 at 264, 223 at 1056; batch-1
    // GroupNorm: 50 at 66, 54 at 33, 62 at 132; softmax over 16 long rows: 32 at 33, 65
    // at 132), and timing twice it beside it at first run picked the slower one.
    Plan::Variant v;
    v.stages = spec.stages;
    v.splits = splits;
    v.last_stage_per_row = spec.last_stage_per_row;
    v.units_per_slice = units_of(slice_shape);
    // CUDA columns' last stage, where it stores per-row outputs only, takes one row per
    // thread (cudaColumnsLastStage).
    v.last_stage_units = columns && p->device.is_cuda() ? codegen::cudaColumnThreads(p->rows, 1)
                                                        : v.units_per_slice;
    std::vector<BufferNeed> needs;
    for (const codegen::SplitBuffer& b : spec.buffers) {
      const int64_t elements =
          b.kind == codegen::SplitBuffer::Kind::Partials ? p->rows * splits : p->rows;
      needs.push_back({elements * b.elementBytes(), b.written, b.last_read});
    }
    v.workspace = planWorkspace(needs);
    v.name = "slices=" + std::to_string(splits);
    p->variants.push_back(std::move(v));
  }
  // CUDA columns copied into shared memory (codegen::Kernel::columns_in_shared), timed
  // beside the walks from memory where the device takes their copies, in place of the
  // narrowest of those (it won no row of the H200's column rows; rows in shared memory
  // are as narrow). FUSER_CROSS_COMPILE's CUDA forms follow the same rule, as on an H100.
  if (columns && outer_ndim >= 1 && !row_shapes.empty()) {
    const bool tiles = std::find(rows_apart.begin(), rows_apart.end(), true) != rows_apart.end();
    const int vector = codegen::cudaColumnInSharedShape(widest_input, 0).vector;
    const int64_t bytes = codegen::cudaColumnSharedBytes(accesses, vector, p->row_size);
    auto take = [&](std::vector<codegen::CudaRowShape>& shapes, int blocks) {
      if (blocks == 0) return;
      if (shapes.size() > 2) shapes.pop_back();
      shapes.push_back(codegen::cudaColumnInSharedShape(widest_input, blocks));
      mark_last_dim(shapes.back());
    };
    if (p->device.is_cuda() && variants) {
      take(row_shapes, cudaColumnsInSharedBlocks(p->device.index(), bytes, tiles));
    }
    if (!cross_shapes.empty() && bytes <= codegen::kCudaColumnSharedBytes) {
      take(cross_shapes, tiles ? 4 : codegen::kColumnBlocks);
    }
  }
  for (const codegen::CudaRowShape& row_shape : row_shapes) {
    c10::SmallVector<uint8_t, 32> shaped = key;
    for (int v : {row_shape.lanes & 0xff, row_shape.lanes >> 8, row_shape.chunks,
                  row_shape.vector | row_shape.vector_in_last_dim << 7,
                  int{row_shape.columns} | int{row_shape.in_shared} << 1,
                  row_shape.column_blocks}) {
      shaped.push_back(static_cast<uint8_t>(v));
    }
    const Specialization& spec =
        specialize(shaped, accesses, zero_dim, per_row, rows_apart, outer_ndim, inner_ndim,
                   row_shape, cross_shapes, p->device, /*staged=*/false, strided);
    // A variant that does not build is left out; without the heuristic's, the plan fails.
    if (!spec.kernel) {
      if (p->variants.empty()) return refuse("the heuristic's kernel did not build");
      continue;
    }
    p->out_dtypes = spec.out_dtypes;
    Plan::Variant v;
    v.kernel = spec.kernel;
    v.units_per_slice = units_of(row_shape);
    if (spec.column_partials) v.partial_rows = spec.kernel->columnPartialRows(p->rows);
    if (p->device.is_cuda()) {
      v.grain = grains[0];
      v.name = row_shape.columns ? "columns vector=" + std::to_string(row_shape.vector) +
                                       (row_shape.in_shared ? " in shared" : "") +
                                       (row_shape.column_blocks != codegen::kColumnBlocks
                                            ? " blocks=" + std::to_string(row_shape.column_blocks)
                                            : "")
                                 : "lanes=" + std::to_string(row_shape.lanes) +
                                       (row_shape.chunks ? " held" : " looped");
      p->variants.push_back(v);
    } else {
      for (int64_t g : grains) {
        v.grain = g;
        v.name = "rows_per_task=" + std::to_string(g);
        p->variants.push_back(v);
      }
    }
  }
  if (p->variants.empty()) return refuse("no kernel built");
  // The choice holds for this group, kernel and shape class on this kind of device: the
  // row length, the rows' count to the next power of two (a new batch size of the same
  // class times nothing), the candidates themselves (their lanes follow the row's
  // vector width, and so its alignment), and the machine: the GPU's architecture and
  // multiprocessors, or the CPU threads.
  std::string k(key.begin(), key.end());
  int64_t rows_class = 1;
  while (rows_class < p->rows) rows_class *= 2;
  std::string candidates;
  for (const auto& v : p->variants) candidates += v.name + ";";
  std::string machine = "threads=" + std::to_string(at::get_num_threads());
  if (p->device.is_cuda()) {
    const cuda::DeviceInfo info = cuda::deviceInfo(p->device.index());
    machine = "sm_" + std::to_string(info.arch.major) + std::to_string(info.arch.minor) + "x" +
              std::to_string(info.sm_count);
  }
  p->variant_key = subgraph_text_ + "|" + k + "|rows<=" + std::to_string(rows_class) + "|n=" +
                   std::to_string(p->row_size) + "|" + candidates + "|" + machine;
  // Column sums: the kernel's output is the operand (partials, or it whole); the
  // group's is its sum, contiguous as eager's.
  if (column_sums) {
    p->operand_sizes.resize(num_outputs_);
    p->operand_strides.resize(num_outputs_);
    p->operand_dtypes.resize(num_outputs_, c10::ScalarType::Undefined);
  }
  for (size_t o = 0; column_sums && o < num_outputs_; ++o) {
    if (!column_sums_[o]) continue;
    p->operand_sizes[o] = std::move(p->out_sizes[o]);
    p->operand_strides[o] = std::move(p->out_strides[o]);
    p->operand_dtypes[o] = p->out_dtypes[o];
    if (column_dtypes_[o] != c10::ScalarType::Undefined) p->out_dtypes[o] = column_dtypes_[o];
    p->out_sizes[o] = ops::reducedSizes(*shape, *column_sums_[o]);
    const c10::DimVector strides = c10::contiguous_strides(p->out_sizes[o]);
    p->out_strides[o].assign(strides.begin(), strides.end());
  }
  p->signature = std::move(signature);
  return p;
}

bool RowExecutor::chooseVariantOf(Plan& p, const LaunchArgs& args,
                                  const std::vector<at::Tensor>& outputs) const {
  // Timing synchronizes the device, which a stream being captured forbids. A forced
  // choice (FUSER_FORCE_VARIANT) times nothing: a capture takes it as any call would.
  if (cuda::currentStreamCapturing(p.device) && config().force_variant < 0) return false;
  std::vector<std::string> names;
  for (const auto& v : p.variants) names.push_back(v.name);
  auto launch = [&](size_t i) { launchVariant(p, p.variants[i], args, outputs); };
  if (!p.device.is_cuda()) {
    p.chosen = chooseVariant(p.variant_key, names, [&](size_t i) {
      const auto t0 = std::chrono::steady_clock::now();
      launch(i);
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
          .count();
    });
    return true;
  }
  // On CUDA the device's time between two events on the launches' stream, around the
  // second of two launches: the first keeps the device busy while the host submits the
  // second (an event on an idle stream is stamped at once, before the host's launch).
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(p.device);
  c10::Event start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
  c10::Event end(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
  p.chosen = chooseVariant(p.variant_key, names, [&](size_t i) {
    launch(i);
    start.record(stream);
    launch(i);
    end.record(stream);
    end.synchronize();
    return start.elapsedTime(end) * 1000;
  });
  return true;
}

void RowExecutor::launchVariant(const Plan& p, const Plan::Variant& v, LaunchArgs args,
                                const std::vector<at::Tensor>& outputs) const {
  if (p.operand_sizes.empty()) return launchKernels(p, v, args);
  // Column sums: the kernel writes into buffers of its own, which are then summed. The
  // partials of every column sum lie in one tensor, [sums, blocks, row], which one
  // kernel adds up.
  std::vector<at::Tensor> buffers(num_outputs_);
  c10::SmallVector<void*, 24> ptrs(args.ptrs, args.ptrs + args.num_inputs + args.num_outputs);
  at::Tensor partials;
  if (v.partial_rows > 0) {
    const auto sums = std::count_if(column_sums_.begin(), column_sums_.end(),
                                    [](const auto& r) { return r.has_value(); });
    partials = at::empty({sums, v.partial_rows, p.row_size},
                         at::TensorOptions().dtype(at::kFloat).device(p.device));
  }
  int64_t next = 0;
  for (size_t o = 0; o < num_outputs_; ++o) {
    if (!column_sums_[o]) continue;
    buffers[o] = v.partial_rows > 0
                     ? partials[next++]
                     : at::empty_strided(p.operand_sizes[o], p.operand_strides[o],
                                         at::TensorOptions().dtype(p.operand_dtypes[o]).device(p.device));
    ptrs[args.num_inputs + o] = buffers[o].data_ptr();
  }
  args.ptrs = ptrs.data();
  // The kernel's grid is the partials' row count (both from the rows and the device).
  TORCH_INTERNAL_ASSERT(v.partial_rows == 0 || v.kernel->columnPartialRows(args.numel) == v.partial_rows);
  launchKernels(p, v, args);
  finishColumnSums(p, v, buffers, partials, outputs);
}

void RowExecutor::finishColumnSums(const Plan& p, const Plan::Variant& v,
                                   const std::vector<at::Tensor>& buffers,
                                   const at::Tensor& partials,
                                   const std::vector<at::Tensor>& outputs) const {
  // Partials in float: summed over their blocks in float, each rounded once to its
  // output's dtype (one launch of ours; ATen's sum where the outputs' dtypes differ).
  // A 16-bit sum that the group converts to another dtype rounds to its own first, as
  // eager's sum does before the conversion.
  if (v.partial_rows > 0) {
    std::vector<at::Tensor> sums;
    std::vector<std::pair<at::Tensor, at::Tensor>> conversions;  // (sum, output)
    for (size_t o = 0; o < num_outputs_; ++o) {
      if (!column_sums_[o]) continue;
      const c10::ScalarType own = p.operand_dtypes[o];
      if (outputs[o].scalar_type() != own && (own == at::kHalf || own == at::kBFloat16)) {
        sums.push_back(at::empty({p.row_size}, outputs[o].options().dtype(own)));
        conversions.emplace_back(sums.back(), outputs[o]);
        continue;
      }
      sums.push_back(outputs[o]);
    }
    if (columnPartialsFinishable(sums)) {
      sumColumnPartials(partials, sums);
    } else {
      const at::Tensor totals = at::sum(partials, {1});
      for (size_t s = 0; s < sums.size(); ++s) sums[s].view({p.row_size}).copy_(totals[s]);
    }
    for (auto& [sum, out] : conversions) out.view({p.row_size}).copy_(sum);
  }
  // Operands written whole: summed in their dtype (ATen's float accumulation for 16-bit
  // ones), converted where the group's result is a conversion of the sum.
  for (size_t o = 0; o < num_outputs_; ++o) {
    if (!column_sums_[o] || v.partial_rows > 0) continue;
    at::Tensor out = outputs[o];
    const ops::RowReduction& r = *column_sums_[o];
    const bool keep = r.result == ops::RowReduction::Result::KeepDims;
    if (out.scalar_type() == buffers[o].scalar_type()) {
      at::sum_out(out, buffers[o], r.dims, keep);
    } else {
      out.copy_(at::sum(buffers[o], r.dims, keep));
    }
  }
  stats().column_sum_calls++;
  if (v.partial_rows > 0) stats().column_partial_calls++;
}

void RowExecutor::launchKernels(const Plan& p, const Plan::Variant& v, LaunchArgs args) const {
  args.grain = v.grain;
  args.align = p.task_align;
  const int64_t units = v.units_per_slice;
  if (v.stages.empty()) {
    args.numel = units;
    v.kernel->launch(args);
    stats().kernel_launches++;
    stats().row_launches++;
    return;
  }
  // The stages read the inputs and write the outputs as the whole-row kernel does, the
  // workspace's buffers after the outputs, the slice count after the integer scalars.
  // (The workspace goes back to the allocator at the end: CUDA's caching allocator
  // orders its reuse after these launches on the stream.)
  const at::Tensor workspace =
      at::empty({v.workspace.bytes}, at::TensorOptions().dtype(at::kByte).device(p.device));
  auto* base = static_cast<uint8_t*>(workspace.data_ptr());
  c10::SmallVector<void*, 24> ptrs(args.ptrs, args.ptrs + args.num_inputs + args.num_outputs);
  for (int64_t offset : v.workspace.offsets) ptrs.push_back(base + offset);
  c10::SmallVector<int64_t, 8> iargs(args.iargs, args.iargs + num_int_args_);
  iargs.push_back(v.splits);
  args.ptrs = ptrs.data();
  args.iargs = iargs.data();
  args.num_outputs += static_cast<int>(v.workspace.offsets.size());
  args.numel = units * v.splits;
  args.grain = 1;
  for (size_t s = 0; s < v.stages.size(); ++s) {
    if (s + 1 == v.stages.size() && v.last_stage_per_row) args.numel = v.last_stage_units;
    v.stages[s]->launch(args);
  }
  stats().kernel_launches += static_cast<int64_t>(v.stages.size());
  stats().row_launches += static_cast<int64_t>(v.stages.size());
  stats().staged_calls++;
  stats().workspace_bytes += v.workspace.bytes;
  stats().workspace_buffer_bytes += v.workspace.sum_of_buffers;
}

void RowExecutor::run(torch::jit::Stack& stack) {
  if (!runnable_) return runInterpreted(stack, "its reductions do not make one row kernel");
  if (masksDrawnByAten(stack, num_inputs_, philox_offsets_)) {
    return runInterpreted(stack, "ATen draws its dropout masks");
  }
  auto inputs = torch::jit::last(stack, num_inputs_);
  c10::SmallVector<int64_t, 32> signature;
  c10::SmallVector<void*, 16> ptrs;
  c10::SmallVector<double, 8> dargs;
  c10::SmallVector<int64_t, 8> iargs;
  std::optional<c10::Device> device;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (!is_tensor_[i]) {
      signature.push_back(-1);
      if (scalar_kinds_[i] == codegen::ScalarArgKind::Double) {
        dargs.push_back(v.toDouble());
      } else {
        iargs.push_back(scalar_kinds_[i] == codegen::ScalarArgKind::Bool ? v.toBool() : v.toInt());
      }
      continue;
    }
    if (!v.isTensor() || !v.toTensor().defined()) {
      return runInterpreted(stack, "an undefined tensor input");
    }
    const at::Tensor& t = v.toTensor();
    if (device && *device != t.device()) return runInterpreted(stack, "inputs on different devices");
    device = t.device();
    signature.push_back(static_cast<int64_t>(t.scalar_type()) | t.dim() << 8 |
                        static_cast<int64_t>(t.device().type()) << 16 |
                        static_cast<int64_t>(t.device().index() + 1) << 24 |
                        static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) << 32);
    signature.append(t.sizes().begin(), t.sizes().end());
    signature.append(t.strides().begin(), t.strides().end());
    ptrs.push_back(t.data_ptr());
  }
  if (!device) return runInterpreted(stack, "no tensor input");

  if (config().use_interpreter) return runInterpreted(stack, "FUSER_EXECUTOR=interpreter");
  std::shared_ptr<const Plan> p;
  {
    std::lock_guard<std::mutex> lock(last_mutex_);
    if (last_ && last_->signature == signature) p = last_;
  }
  std::shared_ptr<Plan> fresh;  // published once its variant is chosen
  if (p) {
    stats().repeated_calls++;
  } else {
    t_refusal = "no kernel built";
    fresh = plan(inputs, signature);
    if (!fresh) {
      // Calls like this one run interpreted too, without planning again.
      fresh = std::make_shared<Plan>();
      fresh->signature = std::move(signature);
      fresh->refusal = t_refusal;
    }
    p = fresh;
  }
  if (p->variants.empty()) {
    if (fresh) {
      std::lock_guard<std::mutex> lock(last_mutex_);
      last_ = fresh;
    }
    return runInterpreted(stack, p->refusal);
  }

  std::vector<at::Tensor> outputs;
  for (size_t o = 0; o < num_outputs_; ++o) {
    outputs.push_back(allocateStrided(p->out_sizes[o], p->out_strides[o], p->out_dtypes[o],
                                      p->device));
    ptrs.push_back(outputs.back().data_ptr());
  }
  LaunchArgs args{ptrs.data(),
                  p->sizes.data(),
                  p->strides.data(),
                  dargs.data(),
                  iargs.data(),
                  static_cast<int>(p->sizes.size()),
                  static_cast<int>(ptrs.size() - num_outputs_),
                  static_cast<int>(num_outputs_),
                  p->rows,
                  p->device,
                  1};
  // A plan whose variants could not be timed is not kept: a later call times them.
  if (fresh && (fresh->variants.size() <= 1 || chooseVariantOf(*fresh, args, outputs))) {
    std::lock_guard<std::mutex> lock(last_mutex_);
    last_ = fresh;
  }
  launchVariant(*p, p->variants[p->chosen], args, outputs);
  torch::jit::drop(stack, num_inputs_);
  for (auto& out : outputs) stack.emplace_back(std::move(out));
}

}  // namespace fuser::runtime
