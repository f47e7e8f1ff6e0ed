// The fuser::Relayout operator (symbols.h; passes/relayouts.cpp): a chain of element
// moves (views, copies, rolls) run as one gather.
//
// Where each element goes depends only on the input's sizes, strides and storage and on
// the chain's numbers, never on the values. So at the first call with given ones, the
// chain runs on `offsets`: an int64 tensor on the input's device (ATen's CPU and CUDA ops
// may lay out their results differently), laid out as the input, whose elements are
// their own offsets into the input's storage. Its result holds, for each element of the
// chain's result, the offset of the input element that lands there. The plan kept from
// it is one of:
// - View: the result shares the probe's storage (no op of the chain copied): the input
//   itself where the probe's result was the probe itself, else its storage viewed with
//   the result's sizes, strides and offset, as the chain would give it.
// - Gather: the result's storage, cut into the longest rows that are runs of consecutive
//   offsets in both (the channels of Swin's activations), and each row's first offset,
//   on the input's device. Each call allocates that storage, copies every row from its
//   offset in one kernel (16-byte units where rows and offsets allow), and gives it the
//   result's sizes, strides and offset: the chain's result, bit for bit. It is a view
//   where the probe's result was one (a view of a roll's result), else a tensor of its
//   own, as a copy's result is.
// - Chain: the chain runs as the graph ran it, every call. So it does where the input
//   records gradients, backward or forward (autograd must see the ops), has a conjugate
//   or negative bit, inside a CUDA graph capture (nothing may be copied to the host
//   then), where the input is not a strided CPU or CUDA tensor, where its storage or the
//   result's holds more than 2^26 elements (the probe), where the probe raises (the
//   chain raises its own error then), or where the chain reads something no key holds.
// A node keeps its last 8 plans; their row tables are at most 64 MiB in all.
#include "runtime/relayout_op.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <vector>

#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/stream_capture.h"
#include "runtime/value_keys.h"
#include "stats.h"
#include "symbols.h"

namespace fuser::runtime {
namespace {

constexpr size_t kPlansKept = 8;
constexpr int64_t kMaxProbeElements = int64_t{1} << 26;
constexpr size_t kTableBytesKept = size_t{64} << 20;
constexpr unsigned kBlock = 256;
constexpr int64_t kMaxBlocks = 1 << 20;  // a grid-stride loop takes the rest

struct Plan {
  enum class Kind { Chain, View, Gather };
  Kind kind = Kind::Chain;
  // The result's sizes, strides and offset in its storage (the input's for View).
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  // What the chain's result was on the probe: the probe itself (View: the input itself
  // comes back), or a view (a gathered result is then a view of its storage, not a
  // tensor of its own, as autograd tells them apart).
  bool same_as_input = false;
  bool is_view = false;
  // Gather: elements of the result's storage, elements per row, the largest power of
  // two (at most 16) dividing the row length and every row's first offset, and those
  // offsets (int64 on the host, int32 on CUDA where every offset and count fits).
  int64_t storage_elements = 0;
  int64_t row_length = 1;
  int64_t alignment = 1;
  at::Tensor row_offsets;

  size_t bytes() const {
    return row_offsets.defined() ? row_offsets.numel() * row_offsets.element_size() : 0;
  }
};

// Counts a grid-stride loop of 32-bit ints may step past without wrapping.
bool fitsInt(int64_t v) { return v < (int64_t{1} << 30); }

// The largest power of two of at most 16 dividing both (0 is divided by every one).
int64_t powerOfTwoDividing(int64_t a, int64_t b) {
  int64_t p = 16;
  while (p > 1 && (a % p != 0 || b % p != 0)) p /= 2;
  return p;
}

// The plan for a chain whose result on the probe is `moved` (offsets into a storage of
// `storage` elements of an input on `device`, on that device).
Plan planFromProbe(const at::Tensor& moved, const at::Tensor& offsets, int64_t storage,
                   c10::Device device) {
  Plan plan;
  if (moved.scalar_type() != at::kLong || moved.device() != device ||
      moved.layout() != c10::kStrided || !moved.has_storage()) {
    return plan;
  }
  plan.sizes = moved.sizes().vec();
  plan.strides = moved.strides().vec();
  plan.offset = moved.storage_offset();
  plan.same_as_input = moved.is_same(offsets);
  plan.is_view = moved.is_view();
  if (moved.storage().is_alias_of(offsets.storage())) {
    plan.kind = Plan::Kind::View;
    return plan;
  }
  const int64_t n = static_cast<int64_t>(moved.storage().nbytes() / sizeof(int64_t));
  if (n > kMaxProbeElements) return plan;
  // The whole storage, elements outside the result's view included, on the host.
  const at::Tensor held = at::empty({0}, moved.options()).set_(moved.storage(), 0, {n}, {1}).cpu();
  const auto* values = held.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (values[i] < 0 || values[i] >= storage) return plan;  // not an element of the input
  }
  int64_t row = std::max<int64_t>(n, 1);
  for (int64_t i = 1; i < n && row > 1; ++i) {
    if (values[i] != values[i - 1] + 1) row = std::gcd(row, i);
  }
  const int64_t rows = n / row;
  std::vector<int64_t> starts(static_cast<size_t>(rows));
  int64_t starts_gcd = 0;
  for (int64_t r = 0; r < rows; ++r) {
    starts[r] = values[r * row];
    starts_gcd = std::gcd(starts_gcd, starts[r]);
  }
  const bool narrow = device.is_cuda() && fitsInt(storage) && fitsInt(n);
  at::Tensor table = at::tensor(starts, at::kLong);
  if (narrow) table = table.to(at::kInt);
  plan.row_offsets = table.to(device);
  plan.kind = Plan::Kind::Gather;
  plan.storage_elements = n;
  plan.row_length = row;
  plan.alignment = powerOfTwoDividing(row, starts_gcd);
  return plan;
}

int log2Of(int64_t power) {
  int shift = 0;
  while ((int64_t{1} << shift) < power) ++shift;
  return shift;
}

void gatherOnCuda(const Plan& plan, const at::Tensor& x, at::Tensor& out) {
  const int64_t element = static_cast<int64_t>(x.element_size());
  const void* src = x.storage().data();
  void* dst = out.data_ptr();
  // Elements per unit: a power of two the rows and offsets allow, of at most 16 bytes,
  // at which both storages are aligned.
  int64_t per_unit = plan.alignment;
  while (per_unit > 1 &&
         (per_unit * element > 16 ||
          reinterpret_cast<uintptr_t>(src) % static_cast<uintptr_t>(per_unit * element) != 0 ||
          reinterpret_cast<uintptr_t>(dst) % static_cast<uintptr_t>(per_unit * element) != 0)) {
    per_unit /= 2;
  }
  const int unit_bytes = static_cast<int>(per_unit * element);
  const bool wide = plan.row_offsets.scalar_type() == at::kLong;
  const int64_t total = plan.storage_elements / per_unit;
  const int64_t row_units = plan.row_length / per_unit;
  int shift = log2Of(per_unit);
  const void* rows = plan.row_offsets.data_ptr();
  int total32 = static_cast<int>(total), row_units32 = static_cast<int>(row_units);
  long long total64 = total, row_units64 = row_units;
  void* params[] = {&src, &dst, &rows, wide ? static_cast<void*>(&total64) : &total32,
                    wide ? static_cast<void*>(&row_units64) : &row_units32, &shift};
  const auto grid = static_cast<unsigned>(std::min<int64_t>((total + kBlock - 1) / kBlock, kMaxBlocks));
  launchCudaSource(gatherRowsSource(unit_bytes, wide), kGatherRowsKernel, x.device(), grid, kBlock,
                   params);
}

void gatherOnHost(const Plan& plan, const at::Tensor& x, at::Tensor& out) {
  const int64_t row_bytes = plan.row_length * static_cast<int64_t>(x.element_size());
  const auto* src = static_cast<const char*>(x.storage().data());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t* starts = plan.row_offsets.data_ptr<int64_t>();
  const int64_t element = static_cast<int64_t>(x.element_size());
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(row_bytes, 1));
  at::parallel_for(0, plan.row_offsets.numel(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(dst + r * row_bytes, src + starts[r] * element, static_cast<size_t>(row_bytes));
    }
  });
}

at::Tensor applyPlan(const Plan& plan, const at::Tensor& x) {
  if (plan.kind == Plan::Kind::View) {
    return plan.same_as_input ? x : x.as_strided(plan.sizes, plan.strides, plan.offset);
  }
  at::Tensor storage = at::empty({plan.storage_elements}, x.options());
  if (plan.storage_elements > 0) {
    if (x.is_cuda()) {
      gatherOnCuda(plan, x, storage);
    } else {
      gatherOnHost(plan, x, storage);
    }
  }
  stats().relayout_gathers++;
  if (plan.is_view) return storage.as_strided(plan.sizes, plan.strides, plan.offset);
  return at::empty({0}, x.options()).set_(storage.storage(), plan.offset, plan.sizes, plan.strides);
}

// Whether a plan can stand for the chain on this input: a strided CPU or CUDA tensor whose
// bytes are its values (no conjugate or negative bit), recording no gradient (the chain's
// ops record it, backward or forward), outside a CUDA graph capture.
bool plannable(const at::Tensor& x) {
  if (!x.defined() || x.layout() != c10::kStrided || !x.has_storage()) return false;
  if (!x.device().is_cpu() && !x.device().is_cuda()) return false;
  if (x.is_conj() || x.is_neg() || x.requires_grad() || x._fw_grad(0).defined()) return false;
  if (x.is_cuda() && cuda::currentStreamCapturing(x.device())) return false;
  return x.storage().data() != nullptr || x.storage().nbytes() == 0;
}

class Relayout {
 public:
  explicit Relayout(const torch::jit::Node* node)
      : subgraph_(node->g(c10::attr::Subgraph)), num_inputs_(node->inputs().size()) {}

  void run(torch::jit::Stack& stack) {
    auto inputs = torch::jit::last(stack, num_inputs_);
    const at::Tensor x = inputs[0].toTensor();
    std::optional<ValueKey> key;
    if (plannable(x)) key = keyOf(inputs, x);
    if (!key) {
      torch::jit::InterpreterState(code()).run(stack);
      return;
    }
    std::shared_ptr<const Plan> plan = find(*key);
    if (!plan) plan = keep(std::move(*key), probe(inputs, x));
    if (plan->kind == Plan::Kind::Chain) {
      torch::jit::InterpreterState(code()).run(stack);
      return;
    }
    at::Tensor result = applyPlan(*plan, x);
    torch::jit::drop(stack, num_inputs_);
    torch::jit::push(stack, std::move(result));
  }

 private:
  static std::optional<ValueKey> keyOf(c10::ArrayRef<c10::IValue> inputs, const at::Tensor& x) {
    ValueKey key = {x.storage_offset(),
                    static_cast<int64_t>(x.storage().nbytes() / x.element_size()),
                    static_cast<int64_t>(x.element_size())};
    for (const c10::IValue& input : inputs) {
      if (!addValueToKey(key, input)) return std::nullopt;
    }
    return key;
  }

  // The probe runs on the input's device: ATen's CPU and CUDA ops may lay out their
  // results differently (a channels-last roll stays channels-last on the CPU only).
  Plan probe(c10::ArrayRef<c10::IValue> inputs, const at::Tensor& x) {
    const int64_t storage = static_cast<int64_t>(x.storage().nbytes() / x.element_size());
    if (storage > kMaxProbeElements) return Plan{};
    try {
      at::Tensor offsets = at::arange(storage, at::TensorOptions(at::kLong).device(x.device()))
                               .as_strided(x.sizes(), x.strides(), x.storage_offset());
      torch::jit::Stack probe_stack(inputs.begin(), inputs.end());
      probe_stack[0] = offsets;
      torch::jit::InterpreterState(code()).run(probe_stack);
      if (probe_stack.size() != 1 || !probe_stack[0].isTensor()) return Plan{};
      return planFromProbe(probe_stack[0].toTensor(), offsets, storage, x.device());
    } catch (const c10::Error&) {
      return Plan{};  // the chain raises: it raises again where the graph runs it
    }
  }

  std::shared_ptr<const Plan> find(const ValueKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->first != key) continue;
      kept_.splice(kept_.begin(), kept_, it);  // most recent first
      return kept_.front().second;
    }
    return nullptr;
  }

  std::shared_ptr<const Plan> keep(ValueKey key, Plan plan) {
    auto kept = std::make_shared<const Plan>(std::move(plan));
    if (kept->bytes() > kTableBytesKept) return kept;  // used once, then made again
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.emplace_front(std::move(key), kept);
    bytes_kept_ += kept->bytes();
    while (kept_.size() > kPlansKept || bytes_kept_ > kTableBytesKept) {
      bytes_kept_ -= kept_.back().second->bytes();
      kept_.pop_back();
    }
    return kept;
  }

  torch::jit::Code& code() {
    std::call_once(once_, [&] {
      code_ = std::make_unique<torch::jit::Code>(subgraph_->copy(), "fuser_relayout");
    });
    return *code_;
  }

  std::shared_ptr<torch::jit::Graph> subgraph_;
  size_t num_inputs_;
  std::once_flag once_;
  std::unique_ptr<torch::jit::Code> code_;
  std::mutex mutex_;
  std::list<std::pair<ValueKey, std::shared_ptr<const Plan>>> kept_;
  size_t bytes_kept_ = 0;
};

torch::jit::RegisterOperators relayoutOpRegistration({torch::jit::Operator(
    "fuser::Relayout(Tensor(a) self, ...) -> Tensor(a)",
    [](const torch::jit::Node* node) -> torch::jit::Operation {
      auto relayout = std::make_shared<Relayout>(node);
      return [relayout](torch::jit::Stack& stack) { relayout->run(stack); };
    },
    c10::AliasAnalysisKind::FROM_SCHEMA)});

}  // namespace

std::string gatherRowsSource(int unit_bytes, bool wide_indices) {
  std::string unit;
  switch (unit_bytes) {
    case 1: unit = "typedef unsigned char U;\n"; break;
    case 2: unit = "typedef unsigned short U;\n"; break;
    case 4: unit = "typedef unsigned int U;\n"; break;
    case 8: unit = "struct __align__(8) U { unsigned int v[2]; };\n"; break;
    case 16: unit = "struct __align__(16) U { unsigned int v[4]; };\n"; break;
    default: TORCH_CHECK(false, "fuser: a gather unit holds 1, 2, 4, 8 or 16 bytes, not ", unit_bytes);
  }
  return unit + (wide_indices ? "typedef long long I;\n" : "typedef int I;\n") + R"(
extern "C" __global__ void fuser_gather_rows(const U* __restrict__ src, U* __restrict__ dst,
                                             const I* __restrict__ rows, I total, I row_units,
                                             int shift) {
  for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
    const I r = t / row_units;
    dst[t] = src[(rows[r] >> shift) + (t - r * row_units)];
  }
}
)";
}

}  // namespace fuser::runtime
