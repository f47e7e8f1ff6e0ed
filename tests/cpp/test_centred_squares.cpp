// A written-out sum of centred squares, sum((x - mean(x))^2), becomes one Welford
// reduction where the kernel takes variances in one pass (codegen/centred_squares.h):
// which expressions fold, which do not, and that the fold leaves a walk fewer.
#include <gtest/gtest.h>

#include "codegen/centred_squares.h"
#include "codegen/kernel_ir.h"
#include "codegen/row_schedule.h"

namespace fuser {
namespace {

using c10::ScalarType;
using codegen::ExprId;
using codegen::IrOp;
using codegen::ReduceKind;

// ConvNeXt's channels-first LayerNorm written out over one float input of `type`:
// u = mean(x), s = mean(d * d) with d = x - u (or u - x), y = d / sqrt(s + eps).
struct WrittenOutNorm {
  codegen::Kernel k;
  ExprId x, mean_sum, squares;
  explicit WrittenOutNorm(ScalarType type = ScalarType::Float, bool mean_first = false,
                          bool two_differences = false) {
    k.inputs.push_back({type, codegen::Access::Strided});
    k.device = c10::DeviceType::CUDA;
    k.one_pass_variance = true;
    codegen::IrBuilder b(k);
    x = b.load(0, type);
    mean_sum = b.reduce(ReduceKind::Sum, x);
    const ExprId u = b.binary(IrOp::Div, mean_sum, b.rowSize(type));
    auto difference = [&] { return mean_first ? b.binary(IrOp::Sub, u, x) : b.binary(IrOp::Sub, x, u); };
    const ExprId d = difference();
    squares = b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, d, two_differences ? difference() : d));
    const ExprId s = b.binary(IrOp::Div, squares, b.rowSize(type));
    const ExprId root = b.unary(IrOp::Sqrt, b.binary(IrOp::Add, s, b.constant(1e-6, type)));
    k.outputs.push_back({type, b.binary(IrOp::Div, d, root)});
  }
};

TEST(CentredSquares, FoldIntoOneWelfordReductionBesideTheMean) {
  for (bool mean_first : {false, true}) {
    for (bool two_differences : {false, true}) {
      WrittenOutNorm n(ScalarType::Float, mean_first, two_differences);
      EXPECT_EQ(codegen::scheduleRows(n.k).passes.size(), 2u);
      codegen::foldCentredSquares(n.k);
      const codegen::Expr& e = n.k.exprs[n.squares];
      EXPECT_EQ(e.op, IrOp::Reduce);
      EXPECT_EQ(e.index, static_cast<int32_t>(ReduceKind::SquaredDeviations));
      EXPECT_EQ(e.args, std::vector<ExprId>{n.x});
      // The mean's sum stays (the output reads x - u), and both reduce in one walk.
      EXPECT_EQ(n.k.exprs[n.mean_sum].index, static_cast<int32_t>(ReduceKind::Sum));
      EXPECT_EQ(codegen::scheduleRows(n.k).passes.size(), 1u);
    }
  }
  WrittenOutNorm wide(ScalarType::Double);
  codegen::foldCentredSquares(wide.k);
  EXPECT_EQ(wide.k.exprs[wide.squares].index, static_cast<int32_t>(ReduceKind::SquaredDeviations));
}

TEST(CentredSquares, OtherSumsOfSquaresStay) {
  // Squares around another value's mean: y - mean(x).
  codegen::Kernel k;
  k.inputs = {{ScalarType::Float, codegen::Access::Strided}, {ScalarType::Float, codegen::Access::Strided}};
  k.device = c10::DeviceType::CUDA;
  k.one_pass_variance = true;
  codegen::IrBuilder b(k);
  const ExprId x = b.load(0, ScalarType::Float), y = b.load(1, ScalarType::Float);
  const ExprId u = b.binary(IrOp::Div, b.reduce(ReduceKind::Sum, x), b.rowSize(ScalarType::Float));
  const ExprId d = b.binary(IrOp::Sub, y, u);
  const ExprId around_other = b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, d, d));
  // A product of two different differences, and a square of a plain value.
  const ExprId e = b.binary(IrOp::Sub, x, u);
  const ExprId mixed = b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, e, d));
  const ExprId plain = b.reduce(ReduceKind::Sum, b.binary(IrOp::Mul, x, x));
  k.outputs = {{ScalarType::Float, around_other}, {ScalarType::Float, mixed}, {ScalarType::Float, plain}};
  codegen::foldCentredSquares(k);
  for (ExprId r : {around_other, mixed, plain}) {
    EXPECT_EQ(k.exprs[r].index, static_cast<int32_t>(ReduceKind::Sum)) << r;
  }
}

TEST(CentredSquares, SixteenBitProgramsKeepTheirRoundedSquares) {
  // A float16 program's differences round to 16 bits as eager's do (RoundToHalf between
  // the difference and the square): no fold, the two walks stay.
  codegen::Kernel k;
  k.inputs.push_back({ScalarType::Half, codegen::Access::Strided});
  k.device = c10::DeviceType::CUDA;
  k.one_pass_variance = true;
  codegen::IrBuilder b(k);
  const ExprId x = b.load(0, ScalarType::Float);
  const ExprId u = b.unary(IrOp::RoundToHalf, b.binary(IrOp::Div, b.reduce(ReduceKind::Sum, x),
                                                       b.rowSize(ScalarType::Float)));
  const ExprId d = b.unary(IrOp::RoundToHalf, b.binary(IrOp::Sub, x, u));
  const ExprId squares = b.reduce(ReduceKind::Sum, b.unary(IrOp::RoundToHalf, b.binary(IrOp::Mul, d, d)));
  k.outputs.push_back({ScalarType::Half, squares});
  codegen::foldCentredSquares(k);
  EXPECT_EQ(k.exprs[squares].index, static_cast<int32_t>(ReduceKind::Sum));
  EXPECT_EQ(codegen::scheduleRows(k).passes.size(), 2u);
}

}  // namespace
}  // namespace fuser
