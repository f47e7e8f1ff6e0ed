// 16-bit arithmetic in the walks of CUDA row and column kernels: native16.h's adds,
// subtracts and multiplies, and a quotient of two values of the format rounded to it,
// by a value the walk does not compute (the same over a row: a normalization's
// deviation), taken through its reciprocal (fx_hquot in cuda_prelude.h). A float16
// LayerNorm written out spent most of its instructions on the conversions around each
// rounded op and on the division.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/native16.h"

namespace fuser::codegen {

class WalkNative16 {
 public:
  explicit WalkNative16(const Kernel& kernel);

  // One element's `elements` (topologically ordered), each line at `indent`. A value in
  // a 16-bit format holds its bits, `vN_b`, beside its float; an operand's bits come
  // from its load (`raw`: the element in its storage type), its rounding or, for a value
  // from outside the walk, its float converted back (exact: it holds them). `load`
  // gives the other loads' values. With `redo`, quotients take their quick form
  // (cuda_prelude.h), which notes in FxQuotTest `redo` + quickSuffix(format) what
  // quickRedo(format, redo) tests: whether the step must be computed again without it.
  void print(std::ostream& out, const std::vector<ExprId>& elements, const std::string& indent,
             const std::function<std::string(const Expr&)>& raw,
             const std::function<std::string(const Expr&)>& load,
             const std::string& redo = "") const;

  // The formats of the quotients print(elements) takes through a reciprocal.
  std::vector<c10::ScalarType> quotientFormats(const std::vector<ExprId>& elements) const;
  static std::string quickSuffix(c10::ScalarType format);
  static std::string quickRedo(c10::ScalarType format, const std::string& redo);

  // Output o's value in its storage type after print(elements): its bits where the walk
  // computed it in the output's format (a load's are stored converted, as eager's
  // conversions quiet a NaN).
  std::string stored(size_t o, const std::vector<ExprId>& elements) const;

 private:
  ExprId quotientOf(ExprId rounding, const std::vector<bool>& here) const;
  bool printedAsRounding(ExprId id, const std::vector<bool>& here) const;

  const Kernel& k_;
  Native16 ops_;
  // Per op folded into a rounding that computes it (a native op, or a float division of
  // two values of a 16-bit format whose sole use is their rounding to it): that
  // rounding, else -1.
  std::vector<ExprId> rounding_of_;
};

}  // namespace fuser::codegen
