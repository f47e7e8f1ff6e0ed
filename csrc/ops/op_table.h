// The table of fusible operators. One entry per schema (overload): how to check a
// node can be lowered, and how it lowers to kernel IR with eager's dtype semantics.
// Adding an op is one entry in one of the ops/*.cpp files plus a parity test.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "fusion_decision.h"

namespace fuser::ops {

// How a value takes part in eager's type promotion (c10's ResultTypeState tiers).
enum class Category : uint8_t { DimTensor, ZeroDimTensor, WrappedScalar };

// One argument of a node, as the lowering sees it.
struct Operand {
  codegen::ExprId expr = -1;     // the value in its computation type; -1 if not a number
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // eager dtype (scalars: Double/Long/Bool)
  Category category = Category::WrappedScalar;
  std::optional<c10::IValue> constant;  // the value, when the graph has it as a constant

  bool isTensor() const { return category != Category::WrappedScalar; }
};

using CheckFn = FusionDecision (*)(const torch::jit::Node* node);
using LowerFn = Operand (*)(codegen::IrBuilder& b, const std::vector<Operand>& args);
// Every output of an op that has several (native_layer_norm's output, mean and rstd).
using LowerOutputsFn = std::vector<Operand> (*)(codegen::IrBuilder& b,
                                                const std::vector<Operand>& args);

struct OpEntry {
  const char* schema;  // full schema text, e.g. "aten::relu(Tensor self) -> Tensor"
  LowerFn lower;
  CheckFn check = nullptr;  // extra conditions (constant arguments, ...); null = none
  // Reduces over trailing dims (ops/reductions.h): its result is not the broadcast of its
  // operands, and it makes its group a row kernel.
  bool reduces = false;
  // Ops with several outputs: all of them (`lower` gives the first, for its dtype).
  LowerOutputsFn lower_outputs = nullptr;
};

// Registers entries; each ops/*.cpp file registers its own at static-init time.
struct RegisterOps {
  explicit RegisterOps(std::vector<OpEntry> entries);
};

// The entry matching this node's schema, or null.
const OpEntry* findOp(const torch::jit::Node* node);

// The entry of an operator by name and overload (e.g. the functional form of an
// in-place node), or null.
const OpEntry* findOpByName(const c10::OperatorName& name);

// Yes when the node's operator is in the table and its entry's check passes.
FusionDecision checkOpSupported(const torch::jit::Node* node);

// Schemas of every entry (for docs, tests and the report tool).
std::vector<std::string> supportedSchemas();

}  // namespace fuser::ops
