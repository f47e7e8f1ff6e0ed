// Dtype conversions that keep the device and the layout: type_as, the .to overloads,
// _to_copy and the casts TorchScript's autocast pass inserts; and contiguous, a copy.
// The target dtype must be a graph constant, another tensor's dtype, or an int that the guard pins to the result's
// profiled dtype (autodiff's `grad.to(self_dtype)`); a device argument must be the
// input's own device; memory_format must be None/preserve. A conversion that eager would
// answer with `self` itself (same dtype, copy=False) becomes a fresh tensor in the group
// (the passes fuse it only where no one mutates either alias), but where the group also
// hands `self` out (a group input, or another output): the guard's fused branch answers
// it with `self` there (guard.cpp).
//
// The autocast casts convert only some inputs, by the input's dtype and the device the
// kernel runs on (both fixed per kernel), and flags the graph holds as constants:
//   _autocast_to_reduced_precision(self, cuda_enabled, cpu_enabled, cuda_dtype, cpu_dtype)
//     a float32 self on an enabled device becomes that device's dtype; others stay;
//   _autocast_to_full_precision(self, cuda_enabled, cpu_enabled)
//     a float16/bfloat16 self on an enabled device becomes float32; others stay.
#include <torch/csrc/jit/ir/constants.h>

#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

Operand convert(IrBuilder& b, const Operand& self, ScalarType target) {
  return makeResult(b.cast(self.expr, codegen::computeType(target)), target, {self});
}

// The target dtype in argument `index` (a constant ScalarType, or None for self's).
Operand lowerToDtypeAt(IrBuilder& b, const Args& a, size_t index) {
  const Operand& dtype = a[index];
  TORCH_CHECK(isNone(dtype) || dtype.constant, "fuser: a conversion's dtype was not pinned");
  ScalarType target = isNone(dtype) ? a[0].dtype : static_cast<ScalarType>(dtype.constant->toInt());
  return convert(b, a[0], target);
}

Operand lowerToDtype(IrBuilder& b, const Args& a) { return lowerToDtypeAt(b, a, 1); }
Operand lowerToDeviceDtype(IrBuilder& b, const Args& a) { return lowerToDtypeAt(b, a, 2); }
Operand lowerToOther(IrBuilder& b, const Args& a) { return convert(b, a[0], a[1].dtype); }
Operand lowerCopy(IrBuilder& b, const Args& a) { return convert(b, a[0], a[0].dtype); }

// The autocast flag for the kernel's device: argument `cuda_index` or the next (cpu).
bool autocastEnabled(IrBuilder& b, const Args& a, size_t cuda_index) {
  const size_t index = b.device() == c10::DeviceType::CUDA ? cuda_index : cuda_index + 1;
  TORCH_CHECK(b.device() == c10::DeviceType::CUDA || b.device() == c10::DeviceType::CPU,
              "fuser: autocast casts are lowered for CPU and CUDA kernels only");
  return a[index].constant->toBool();
}

Operand lowerToReducedPrecision(IrBuilder& b, const Args& a) {
  if (a[0].dtype != ScalarType::Float || !autocastEnabled(b, a, 1)) {
    return convert(b, a[0], a[0].dtype);
  }
  const Operand& target = b.device() == c10::DeviceType::CUDA ? a[3] : a[4];
  return convert(b, a[0], static_cast<ScalarType>(target.constant->toInt()));
}

Operand lowerToFullPrecision(IrBuilder& b, const Args& a) {
  const bool reduced = a[0].dtype == ScalarType::Half || a[0].dtype == ScalarType::BFloat16;
  if (!reduced || !autocastEnabled(b, a, 1)) return convert(b, a[0], a[0].dtype);
  return convert(b, a[0], ScalarType::Float);
}

bool isCastableDtype(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Float:
    case ScalarType::Double:
      return true;
    default:
      return false;
  }
}

bool hasArgument(const torch::jit::Node* node, const char* name) {
  return node->schema().argumentIndexWithName(name).has_value();
}

// The device argument names the input's own device: None, prim::device(self), or a
// constant equal to self's profiled device.
bool keepsDevice(const torch::jit::Node* node, const c10::IValue* device) {
  const torch::jit::Value* arg = node->namedInput("device");
  if (arg->node()->kind() == c10::prim::device && arg->node()->input() == node->input(0)) {
    return true;
  }
  if (!device) return false;
  if (device->isNone()) return true;
  auto self = node->input(0)->type()->cast<c10::TensorType>();
  return self && self->device() && *self->device() == device->toDevice();
}

// A dtype argument given as an int at run time (autodiff's backward of a cast reads the
// forward input's dtype) whose result has a profiled dtype: the guard pins the int to
// that dtype (passes/guard.cpp), so the kernel takes it as a constant.
bool pinnableDtype(const torch::jit::Node* node) {
  const torch::jit::Value* dtype = node->namedInput("dtype");
  auto result = node->output()->type()->cast<c10::TensorType>();
  return dtype->type()->kind() == c10::TypeKind::IntType && result && result->scalarType();
}

FusionDecision checkConversion(const torch::jit::Node* node) {
  auto refuse = [&](const std::string& why) {
    return FusionDecision::no(std::string(node->kind().toQualString()) + ": " + why);
  };
  auto constant = [&](const char* name) { return constantInput(node, name); };
  if (hasArgument(node, "dtype")) {
    std::optional<c10::IValue> dtype = constant("dtype");
    if (!dtype && !pinnableDtype(node)) {
      return refuse("dtype is neither a constant nor an int whose profiled result fixes it");
    }
    if (!dtype) {
      dtype = static_cast<int64_t>(
          *node->output()->type()->expectRef<c10::TensorType>().scalarType());
    }
    if (!dtype->isNone() && !isCastableDtype(static_cast<ScalarType>(dtype->toInt()))) {
      return refuse("unsupported target dtype");
    }
  }
  if (hasArgument(node, "memory_format")) {
    std::optional<c10::IValue> format = constant("memory_format");
    if (!format) return refuse("memory_format is not a constant");
    if (!format->isNone() && format->toInt() != static_cast<int64_t>(c10::MemoryFormat::Preserve)) {
      return refuse("memory_format other than preserve_format");
    }
  }
  if (hasArgument(node, "layout")) {
    std::optional<c10::IValue> layout = constant("layout");
    if (!layout ||
        !(layout->isNone() || layout->toInt() == static_cast<int64_t>(c10::Layout::Strided))) {
      return refuse("layout other than strided");
    }
  }
  if (hasArgument(node, "pin_memory")) {
    std::optional<c10::IValue> pin = constant("pin_memory");
    if (!pin || !(pin->isNone() || !pin->toBool())) return refuse("pin_memory");
  }
  if (hasArgument(node, "device")) {
    std::optional<c10::IValue> device = constant("device");
    if (!keepsDevice(node, device ? &*device : nullptr)) {
      return refuse("may change the device");
    }
  }
  return FusionDecision::yes();
}

// x.contiguous(): a copy into row-major strides (eager's is x itself where x already is:
// where the group also hands x out, the guard's fused branch asks ATen's contiguous
// instead, guard.cpp). Other memory formats stay with ATen.
FusionDecision checkContiguous(const torch::jit::Node* node) {
  std::optional<c10::IValue> format = constantInput(node, "memory_format");
  if (!format || format->toInt() != static_cast<int64_t>(c10::MemoryFormat::Contiguous)) {
    return FusionDecision::no("aten::contiguous: memory_format other than contiguous_format");
  }
  return FusionDecision::yes();
}

// The flags and target dtypes are constants (the JIT autocast pass writes them so).
FusionDecision checkAutocastCast(const torch::jit::Node* node) {
  for (const char* name : {"cuda_enabled", "cpu_enabled", "cuda_dtype", "cpu_dtype"}) {
    if (!hasArgument(node, name)) continue;
    if (auto d = requireConstant(node, name); !d) return d;
  }
  for (const char* name : {"cuda_dtype", "cpu_dtype"}) {
    if (!hasArgument(node, name)) continue;
    if (!isCastableDtype(static_cast<ScalarType>(constantInput(node, name)->toInt()))) {
      return FusionDecision::no(std::string(node->kind().toQualString()) +
                                ": unsupported target dtype");
    }
  }
  return FusionDecision::yes();
}

}  // namespace

static RegisterOps castsRegistration({
    {"aten::type_as(Tensor self, Tensor other) -> Tensor", lowerToOther},
    {"aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> "
     "Tensor(a)",
     lowerCopy, checkContiguous},
    {"aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)",
     lowerToDtype, checkConversion},
    {"aten::to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)",
     lowerToOther, checkConversion},
    {"aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, "
     "bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
     lowerToDeviceDtype, checkConversion},
    {"aten::to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None, bool non_blocking=False, bool copy=False, "
     "MemoryFormat? memory_format=None) -> Tensor(a)",
     lowerToDtype, checkConversion},
    {"aten::to.prim_Device(Tensor(a) self, Device? device, int? dtype=None, "
     "bool non_blocking=False, bool copy=False) -> Tensor(b|a)",
     lowerToDeviceDtype, checkConversion},
    {"aten::to.prim_dtype(Tensor(a) self, int? dtype=None, bool non_blocking=False, "
     "bool copy=False) -> Tensor(b|a)",
     lowerToDtype, checkConversion},
    {"aten::to.prim_other(Tensor(a) self, bool non_blocking=False, bool copy=False) -> Tensor(b|a)",
     lowerCopy},
    {"aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
     "Device? device=None, bool? pin_memory=None, bool non_blocking=False, "
     "MemoryFormat? memory_format=None) -> Tensor",
     lowerToDtype, checkConversion},
    {"aten::_autocast_to_reduced_precision(Tensor(a) self, bool cuda_enabled, bool cpu_enabled, "
     "ScalarType cuda_dtype, ScalarType cpu_dtype) -> Tensor(a)",
     lowerToReducedPrecision, checkAutocastCast},
    {"aten::_autocast_to_full_precision(Tensor(a) self, bool cuda_enabled, bool cpu_enabled) "
     "-> Tensor(a)",
     lowerToFullPrecision, checkAutocastCast},
});

}  // namespace fuser::ops
