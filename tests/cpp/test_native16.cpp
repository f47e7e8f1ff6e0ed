// Which 16-bit adds, subtracts and multiplies CUDA kernels compute natively
// (codegen/native16.h): the plan over hand-built kernels, pure host code.
#include <gtest/gtest.h>

#include "codegen/expr_analysis.h"
#include "codegen/kernel_ir.h"
#include "codegen/native16.h"

namespace fuser::codegen {
namespace {

using c10::ScalarType;

ExprId roundTo(IrBuilder& b, ScalarType format, ExprId x) {
  return b.unary(format == ScalarType::Half ? IrOp::RoundToHalf : IrOp::RoundToBFloat16, x);
}

// ((a + b) * 0.5 * 0.1 - a) over two inputs of `format`, rounded after each op as the
// lowering does; the last op is rounded by the output's store. Ids of the four ops' values.
struct Chain {
  Kernel k;
  ExprId sum, half, tenth, out;
};

Chain chain(ScalarType format, ScalarType out_format) {
  Chain c;
  IrBuilder b(c.k);
  c.k.inputs = {{format, Access::Flat}, {format, Access::Flat}};
  const ExprId a = b.load(0, ScalarType::Float), x = b.load(1, ScalarType::Float);
  c.sum = roundTo(b, format, b.binary(IrOp::Add, a, x));
  c.half = roundTo(b, format, b.binary(IrOp::Mul, c.sum, b.constant(0.5, ScalarType::Float)));
  c.tenth = roundTo(b, format, b.binary(IrOp::Mul, c.half, b.constant(0.1, ScalarType::Float)));
  c.out = b.binary(IrOp::Sub, c.tenth, a);
  c.k.outputs.push_back({out_format, c.out});
  c.k.flat = true;
  return c;
}

TEST(Native16, OpsOnValuesOfTheFormatAreNative) {
  for (ScalarType format : {ScalarType::Half, ScalarType::BFloat16}) {
    Chain c = chain(format, format);
    const Native16 plan = planNative16(c.k, analyzeExprs(c.k));
    EXPECT_GE(plan.native_op[c.sum], 0);
    EXPECT_TRUE(plan.folded[plan.native_op[c.sum]]);
    EXPECT_GE(plan.native_op[c.half], 0);  // 0.5 is a 16-bit value
    EXPECT_EQ(plan.native_op[c.tenth], -1);  // 0.1 is not: float op, then the rounding
    EXPECT_EQ(plan.bits[c.tenth], format);
    EXPECT_EQ(plan.native_op[c.out], c.out);  // rounded by its store
    EXPECT_EQ(plan.bits[c.out], format);
    const bool half = format == ScalarType::Half;
    EXPECT_EQ(native16Op(c.k, plan, c.half), std::string(half ? "fx_hmul(v" : "fx_bfmul(v") +
                                                 std::to_string(c.sum) + "_b, (uint16_t)" +
                                                 (half ? "0x3800)" : "0x3f00)"));
  }
}

TEST(Native16, AFloatOutputOrAnotherFormatKeepsFloatMath) {
  Chain wide = chain(ScalarType::Half, ScalarType::Float);
  const Native16 plan = planNative16(wide.k, analyzeExprs(wide.k));
  EXPECT_EQ(plan.native_op[wide.out], -1);
  EXPECT_EQ(plan.bits[wide.out], ScalarType::Undefined);
  // The bfloat16 rounding of float16 values: the operands are not of its format.
  Chain mixed = chain(ScalarType::Half, ScalarType::BFloat16);
  EXPECT_EQ(planNative16(mixed.k, analyzeExprs(mixed.k)).native_op[mixed.out], -1);
}

TEST(Native16, AnOpReadElsewhereIsNotFolded) {
  Kernel k;
  IrBuilder b(k);
  k.inputs = {{ScalarType::Half, Access::Flat}, {ScalarType::Half, Access::Flat}};
  const ExprId a = b.load(0, ScalarType::Float), x = b.load(1, ScalarType::Float);
  const ExprId sum = b.binary(IrOp::Add, a, x);
  const ExprId rounded = b.unary(IrOp::RoundToHalf, sum);
  k.outputs.push_back({ScalarType::Half, rounded});
  k.outputs.push_back({ScalarType::Float, sum});  // the unrounded sum is an output too
  k.flat = true;
  const Native16 plan = planNative16(k, analyzeExprs(k));
  EXPECT_FALSE(plan.folded[sum]);
  EXPECT_EQ(plan.native_op[rounded], -1);
  EXPECT_EQ(plan.bits[rounded], ScalarType::Half);  // its bits are still held
}

}  // namespace
}  // namespace fuser::codegen
