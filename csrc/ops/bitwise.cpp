// Bitwise operators on integer and bool tensors (eager raises for floating ones), with
// eager's type promotion: `bool_tensor & 1` is int64. The Python operators & | ^ ~ are
// their own aten::__and__ / __or__ / __xor__ overloads in TorchScript graphs.
#include "ops/lowering_rules.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;

template <IrOp Op>
Operand lowerBitwise(IrBuilder& b, const Args& a) {
  ScalarType t = resultType({a[0], a[1]});
  TORCH_CHECK(c10::isIntegralType(t, /*includeBool=*/true),
              "bitwise operators not implemented for '", t, "'");
  return lowerBinaryPromoted(b, a, Op);
}

Operand lowerBitwiseNot(IrBuilder& b, const Args& a) {
  TORCH_CHECK(c10::isIntegralType(a[0].dtype, /*includeBool=*/true),
              "bitwise_not not implemented for '", a[0].dtype, "'");
  return lowerUnaryKeepType(b, a, IrOp::BitwiseNot);
}

}  // namespace

static RegisterOps bitwiseRegistration({
    {"aten::bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitAnd>},
    {"aten::bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitAnd>},
    {"aten::bitwise_and.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
     lowerBitwise<IrOp::BitAnd>},
    {"aten::bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitOr>},
    {"aten::bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitOr>},
    {"aten::bitwise_or.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
     lowerBitwise<IrOp::BitOr>},
    {"aten::bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitXor>},
    {"aten::bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitXor>},
    {"aten::bitwise_xor.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
     lowerBitwise<IrOp::BitXor>},
    {"aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitAnd>},
    {"aten::__and__.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitAnd>},
    {"aten::__or__.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitOr>},
    {"aten::__or__.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitOr>},
    {"aten::__xor__.Tensor(Tensor self, Tensor other) -> Tensor", lowerBitwise<IrOp::BitXor>},
    {"aten::__xor__.Scalar(Tensor self, Scalar other) -> Tensor", lowerBitwise<IrOp::BitXor>},
    {"aten::bitwise_not(Tensor self) -> Tensor", lowerBitwiseNot},
});

}  // namespace fuser::ops
