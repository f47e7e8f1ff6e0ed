// The right-hand side of one kernel-IR expression as C++ / CUDA C++ text. Both printers
// share it, so a formula is fixed once; their preludes declare the same C math
// functions and define the fx_* helpers, each for its compiler.
#pragma once

#include <functional>
#include <string>

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

// C type name of a computation type (Half/BFloat16 never appear here).
const char* computeTypeName(c10::ScalarType t);
// C type name of a storage dtype (Half/BFloat16 are uint16_t bit patterns, Bool bytes).
const char* storageTypeName(c10::ScalarType t);

// Formats `e`, whose operands are named v<ExprId>. `load` prints the leaves that depend
// on the printer's loop structure: Load, and ElementIndex (the element's position in
// the iteration space).
std::string formatExpr(const Kernel& k, const Expr& e,
                       const std::function<std::string(const Expr&)>& load);

// Conversion of a computed value to the storage dtype of an output.
std::string storeConversion(c10::ScalarType storage, const std::string& value);
// Conversion of a loaded storage element to its computation type.
std::string loadConversion(c10::ScalarType storage, c10::ScalarType compute,
                           const std::string& element);

}  // namespace fuser::codegen
