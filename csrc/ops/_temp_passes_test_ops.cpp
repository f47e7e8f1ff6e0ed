// TEMPORARY (passes branch only; delete at merge: the ops engineer's ops/*.cpp register
// the real entries). Table entries for the operators the pass tests use, so the passes
// can be tested before the op table lands. Lowering is never reached by those tests.
#include "ops/op_table.h"

namespace fuser::ops {
namespace {

Operand notLowered(codegen::IrBuilder&, const std::vector<Operand>&) {
  TORCH_CHECK(false, "temp op entry (passes branch): no lowering");
}

RegisterOps registration({
    {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", notLowered},
    {"aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", notLowered},
    {"aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", notLowered},
    {"aten::mul.Tensor(Tensor self, Tensor other) -> Tensor", notLowered},
    {"aten::mul.Scalar(Tensor self, Scalar other) -> Tensor", notLowered},
    {"aten::div.Tensor(Tensor self, Tensor other) -> Tensor", notLowered},
    {"aten::relu(Tensor self) -> Tensor", notLowered},
    {"aten::sigmoid(Tensor self) -> Tensor", notLowered},
    {"aten::tanh(Tensor self) -> Tensor", notLowered},
    {"aten::exp(Tensor self) -> Tensor", notLowered},
    {"aten::neg(Tensor self) -> Tensor", notLowered},
});

}  // namespace
}  // namespace fuser::ops
