// What the JIT's type of a value says: a tensor, its TensorType, its rank, its device.
// Shared by the passes and runtime files that read profiled types (and one definition
// each, so that CMake's unity build, which joins source files, sees no two).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace fuser {

inline bool isTensor(const torch::jit::Value* v) {
  return v->type()->kind() == c10::TypeKind::TensorType;
}

inline c10::TensorTypePtr tensorTypeOf(const torch::jit::Value* v) {
  return v->type()->cast<c10::TensorType>();
}

// The profiled rank; 0 where the type has none.
inline int64_t rankOf(const torch::jit::Value* v) {
  auto type = tensorTypeOf(v);
  return type && type->dim() ? static_cast<int64_t>(*type->dim()) : 0;
}

// Whether the value's profiled device is a CUDA one (false where none was recorded).
inline bool isOnCuda(const torch::jit::Value* v) {
  auto type = tensorTypeOf(v);
  return type && type->device() && type->device()->is_cuda();
}

}  // namespace fuser
