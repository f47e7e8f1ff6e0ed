// Comparisons: both operands cast to the promoted type (so `int_tensor < 2.5` compares
// in float32 and `half_tensor == 0.1` with half(0.1), as eager), result bool.
#include "ops/lowering_rules.h"

namespace fuser::ops {

static RegisterOps comparisonsRegistration({
    {"aten::eq.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Eq>},
    {"aten::eq.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Eq>},
    {"aten::ne.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Ne>},
    {"aten::ne.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Ne>},
    {"aten::lt.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Lt>},
    {"aten::lt.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Lt>},
    {"aten::le.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Le>},
    {"aten::le.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Le>},
    {"aten::gt.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Gt>},
    {"aten::gt.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Gt>},
    {"aten::ge.Tensor(Tensor self, Tensor other) -> Tensor", comparison<IrOp::Ge>},
    {"aten::ge.Scalar(Tensor self, Scalar other) -> Tensor", comparison<IrOp::Ge>},
});

}  // namespace fuser::ops
