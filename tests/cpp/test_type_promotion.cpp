// ops::resultType against torch.result_type (tests/cpp/data/result_types.txt), and the
// half-precision rounding of castTo.
#include <gtest/gtest.h>

#include "eager_tables.h"
#include "ops/type_promotion.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using testing::dtypeFromName;
using testing::splitSpec;

Operand operandFromSpec(codegen::IrBuilder& b, const std::string& spec, int32_t index) {
  auto [kind, text] = splitSpec(spec);
  Operand o;
  if (kind == "t" || kind == "z") {
    o.dtype = dtypeFromName(text);
    o.category = kind == "t" ? Category::DimTensor : Category::ZeroDimTensor;
    o.expr = b.load(index, o.dtype);
  } else {
    o.dtype = kind == "f" ? ScalarType::Double : kind == "i" ? ScalarType::Long : ScalarType::Bool;
    o.category = Category::WrappedScalar;
    o.expr = b.scalar(index, o.dtype);
  }
  return o;
}

TEST(TypePromotion, MatchesTorchResultType) {
  auto table = testing::readTable("result_types.txt", /*with_op=*/false);
  ASSERT_GT(table.size(), 800u);
  for (const auto& line : table) {
    codegen::Kernel k;
    codegen::IrBuilder b(k);
    std::vector<Operand> operands;
    std::string text;
    for (const auto& spec : line.specs) {
      operands.push_back(operandFromSpec(b, spec, operands.size()));
      text += spec + " ";
    }
    EXPECT_EQ(resultType(operands), dtypeFromName(line.result)) << text;
    // The operands' order must not matter.
    std::reverse(operands.begin(), operands.end());
    EXPECT_EQ(resultType(operands), dtypeFromName(line.result)) << text << "(reversed)";
  }
}

TEST(TypePromotion, NonNumbersAreSkipped) {
  codegen::Kernel k;
  codegen::IrBuilder b(k);
  Operand none;  // expr -1: None, a string, ...
  none.category = Category::DimTensor;
  none.dtype = ScalarType::Double;
  Operand x = operandFromSpec(b, "t:i32", 0);
  EXPECT_EQ(resultType({x, none}), ScalarType::Int);
}

TEST(TypePromotion, ToFloating) {
  EXPECT_EQ(toFloating(ScalarType::Bool), ScalarType::Float);
  EXPECT_EQ(toFloating(ScalarType::Long), ScalarType::Float);
  EXPECT_EQ(toFloating(ScalarType::Half), ScalarType::Half);
  EXPECT_EQ(toFloating(ScalarType::Double), ScalarType::Double);
}

TEST(TypePromotion, ResultCategory) {
  codegen::Kernel k;
  codegen::IrBuilder b(k);
  Operand t = operandFromSpec(b, "t:f32", 0), z = operandFromSpec(b, "z:f32", 1),
          s = operandFromSpec(b, "f:1", 0);
  EXPECT_EQ(makeResult(t.expr, ScalarType::Float, {z, t}).category, Category::DimTensor);
  EXPECT_EQ(makeResult(z.expr, ScalarType::Float, {z, s}).category, Category::ZeroDimTensor);
  // A tensor op's result is never a wrapped scalar, even from scalars only.
  EXPECT_EQ(makeResult(s.expr, ScalarType::Float, {s}).category, Category::ZeroDimTensor);
}

TEST(CastTo, RoundsConstantsToHalfPrecision) {
  codegen::Kernel k;
  codegen::IrBuilder b(k);
  Operand s;
  s.dtype = ScalarType::Double;
  s.expr = b.constant(0.1, ScalarType::Double);
  s.constant = c10::IValue(0.1);
  codegen::ExprId half = castTo(b, s, ScalarType::Half);
  EXPECT_EQ(k.exprs[half].op, codegen::IrOp::Constant);
  EXPECT_EQ(k.exprs[half].type, ScalarType::Float);
  EXPECT_EQ(k.exprs[half].fvalue, static_cast<float>(c10::Half(0.1f)));
  codegen::ExprId bf16 = castTo(b, s, ScalarType::BFloat16);
  EXPECT_EQ(k.exprs[bf16].fvalue, static_cast<float>(c10::BFloat16(0.1f)));
  codegen::ExprId opmath = castToOpmath(b, s, ScalarType::Half);
  EXPECT_EQ(k.exprs[opmath].op, codegen::IrOp::Cast);  // 0.1 as float, not rounded
}

TEST(CastTo, RoundsRuntimeValuesToHalfPrecision) {
  codegen::Kernel k;
  codegen::IrBuilder b(k);
  Operand s;
  s.dtype = ScalarType::Double;
  s.expr = b.scalar(0, ScalarType::Double);
  codegen::ExprId r = castTo(b, s, ScalarType::BFloat16);
  EXPECT_EQ(k.exprs[r].op, codegen::IrOp::RoundToBFloat16);
  EXPECT_EQ(k.exprs[k.exprs[r].args[0]].op, codegen::IrOp::Cast);
  // A value already of the target dtype, or exactly representable, is not rounded.
  Operand h;
  h.dtype = ScalarType::Half;
  h.category = Category::DimTensor;
  h.expr = b.load(0, ScalarType::Half);
  EXPECT_EQ(castTo(b, h, ScalarType::Half), h.expr);
  Operand u;
  u.dtype = ScalarType::Byte;
  u.category = Category::DimTensor;
  u.expr = b.load(1, ScalarType::Byte);
  EXPECT_EQ(k.exprs[castTo(b, u, ScalarType::Half)].op, codegen::IrOp::Cast);
}

}  // namespace
}  // namespace fuser::ops
