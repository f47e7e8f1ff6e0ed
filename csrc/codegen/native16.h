// 16-bit arithmetic where it gives eager's bits (CUDA kernels).
//
// Eager computes a float16 or bfloat16 add, subtract or multiply in float and rounds
// the result to 16 bits. When both operands are values of that 16-bit format, the
// GPU's own 16-bit instruction gives the same bits: float holds at least 2p + 2 bits
// for a p-bit format, so rounding the float result first never moves the 16-bit one
// (double rounding is innocuous there; on the H100 all 2^32 operand pairs of each of
// the six instructions matched). One instruction replaces four (the float op, the
// rounding and the two conversions around it), and 16-bit kernels heavy in math are
// bound by instructions: GPT-2's float16 tanh-GELU took 48.6 us and takes 41.0.
#pragma once

#include <c10/core/ScalarType.h>

#include <ostream>
#include <string>
#include <vector>

#include "codegen/expr_analysis.h"
#include "codegen/kernel_ir.h"

namespace fuser::codegen {

struct Native16 {
  // Per expression: the 16-bit format (Half or BFloat16) whose bits the printer holds
  // beside the float value, as `vN_b`; Undefined where it holds none. Roundings to 16
  // bits, loads of 16-bit tensors and ops computed natively hold them.
  std::vector<c10::ScalarType> bits;
  // Per expression: the float op whose operands are this expression's (a rounding
  // computed natively), or -1. The op itself is then not printed (folded).
  std::vector<ExprId> native_op;
  std::vector<bool> folded;
};

// Which of a kernel's adds, subtracts and multiplies a CUDA printer computes natively:
// those rounded to a 16-bit format (by a rounding, or by the store of an output of that
// format) whose operands are values of it (its roundings, its loads, or constants it
// holds exactly).
Native16 planNative16(const Kernel& kernel, const ExprFacts& facts);

// The 16-bit bits of operand `arg` in `format`: its bits variable, or a constant's
// literal. Only for operands planNative16 accepted.
std::string native16Operand(const Kernel& kernel, const Native16& plan, ExprId arg,
                            c10::ScalarType format);

// The native op computing expression `i`'s bits (planNative16 chose it), e.g.
// "fx_hmul(v3_b, (uint16_t)0x3800)".
std::string native16Op(const Kernel& kernel, const Native16& plan, ExprId i);

// The bits of expression `id`, which the plan holds in a 16-bit format: a load's element
// (`element`, in its storage type), its native op, or the rounding of its float operand.
std::string native16Bits(const Kernel& kernel, const Native16& plan, ExprId id,
                         const std::string& element);

// `const uint16_t vN_b = bits;` and the float it stands for, `const float vN`.
void printNative16Value(std::ostream& out, const std::string& indent, ExprId id,
                        c10::ScalarType format, const std::string& bits);

}  // namespace fuser::codegen
