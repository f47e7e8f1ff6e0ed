// Walks the subgraph in order, keeping for each value its IR expression and eager
// dtype; each node lowers through its op-table entry.
#include "codegen/lowering.h"

#include <unordered_map>

#include "ops/op_table.h"

namespace fuser::codegen {
namespace {

using ops::Category;
using ops::Operand;

// A graph constant as an operand: numbers become IR constants; other constants
// (None, strings, lists) are passed to the entry by value only.
Operand constantOperand(IrBuilder& b, const torch::jit::Value* v) {
  Operand o;
  o.constant = torch::jit::toIValue(v);
  const c10::IValue& iv = *o.constant;
  if (iv.isDouble()) {
    o.dtype = c10::ScalarType::Double;
    o.expr = b.constant(iv.toDouble(), o.dtype);
  } else if (iv.isInt()) {
    o.dtype = c10::ScalarType::Long;
    o.expr = b.intConstant(iv.toInt(), o.dtype);
  } else if (iv.isBool()) {
    o.dtype = c10::ScalarType::Bool;
    o.expr = b.intConstant(iv.toBool(), o.dtype);
  }
  return o;
}

c10::ScalarType scalarDtype(ScalarArgKind kind) {
  switch (kind) {
    case ScalarArgKind::Double: return c10::ScalarType::Double;
    case ScalarArgKind::Int64: return c10::ScalarType::Long;
    case ScalarArgKind::Bool: return c10::ScalarType::Bool;
  }
  return c10::ScalarType::Undefined;
}

// Eager rounds every Half/BFloat16 result to its dtype before the next op reads it; so
// do we, which keeps chains (and casts of them to wider types) equal to eager.
Operand roundedToStorage(IrBuilder& b, const Kernel& k, Operand o) {
  const bool half = o.dtype == c10::ScalarType::Half;
  if ((!half && o.dtype != c10::ScalarType::BFloat16) || o.expr < 0) return o;
  const Expr& e = k.exprs.at(o.expr);
  // A load of a tensor stored in this very dtype is exact already.
  if (e.op == IrOp::Load && k.inputs.at(e.index).dtype == o.dtype) return o;
  if (e.op == (half ? IrOp::RoundToHalf : IrOp::RoundToBFloat16)) return o;
  ExprId f = b.cast(o.expr, c10::ScalarType::Float);
  o.expr = b.unary(half ? IrOp::RoundToHalf : IrOp::RoundToBFloat16, f);
  return o;
}

}  // namespace

Kernel lowerSubgraph(const torch::jit::Graph& subgraph, const std::vector<InputDesc>& inputs,
                     int ndim, bool flat) {
  TORCH_INTERNAL_ASSERT(inputs.size() == subgraph.inputs().size());
  Kernel k;
  k.ndim = ndim;
  k.flat = flat;
  IrBuilder b(k);
  std::unordered_map<const torch::jit::Value*, Operand> values;

  int32_t tensor_slot = 0, scalar_slot = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputDesc& d = inputs[i];
    Operand o;
    if (d.is_tensor) {
      o.dtype = d.dtype;
      o.category = d.zero_dim ? Category::ZeroDimTensor : Category::DimTensor;
      o.expr = b.load(tensor_slot++, d.dtype);
      k.inputs.push_back(d.access);
      k.inputs.back().dtype = d.dtype;
    } else {
      o.dtype = scalarDtype(d.scalar_kind);
      o.category = Category::WrappedScalar;
      o.expr = b.scalar(scalar_slot++, o.dtype);
      k.scalars.push_back(d.scalar_kind);
    }
    values.emplace(subgraph.inputs()[i], o);
  }

  for (const torch::jit::Node* node : subgraph.nodes()) {
    if (node->kind() == c10::prim::Constant) {
      values.emplace(node->output(), constantOperand(b, node->output()));
      continue;
    }
    const ops::OpEntry* entry = ops::findOp(node);
    TORCH_CHECK(entry, "fuser: no lowering for ", *node);
    std::vector<Operand> args;
    args.reserve(node->inputs().size());
    for (const torch::jit::Value* in : node->inputs()) args.push_back(values.at(in));
    TORCH_CHECK(node->outputs().size() == 1, "fuser: multi-output node in group: ", *node);
    values.emplace(node->output(), roundedToStorage(b, k, entry->lower(b, args)));
  }

  for (const torch::jit::Value* out : subgraph.outputs()) {
    const Operand& o = values.at(out);
    TORCH_CHECK(o.expr >= 0 && o.isTensor(), "fuser: group output is not a tensor");
    k.outputs.push_back(TensorOutput{o.dtype, b.cast(o.expr, computeType(o.dtype))});
  }
  return k;
}

}  // namespace fuser::codegen
