// Walks the subgraph in order, keeping for each value its IR expression and eager
// dtype; each node lowers through its op-table entry.
#include "codegen/lowering.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <unordered_map>
#include <vector>

#include "codegen/centred_squares.h"
#include "ops/op_table.h"

namespace fuser::codegen {
namespace {

using ops::Category;
using ops::Operand;

c10::ScalarType scalarDtype(ScalarArgKind kind) {
  switch (kind) {
    case ScalarArgKind::Double: return c10::ScalarType::Double;
    case ScalarArgKind::Int64: return c10::ScalarType::Long;
    case ScalarArgKind::Bool: return c10::ScalarType::Bool;
  }
  return c10::ScalarType::Undefined;
}

IrOp roundingOp(c10::ScalarType storage) {
  return storage == c10::ScalarType::Half ? IrOp::RoundToHalf : IrOp::RoundToBFloat16;
}

bool representable(double v, c10::ScalarType storage) {
  const auto f = static_cast<float>(v);
  const float back = storage == c10::ScalarType::Half ? static_cast<float>(c10::Half(f))
                                                      : static_cast<float>(c10::BFloat16(f));
  return static_cast<double>(f) == v && back == f;
}

// Whether `id` always holds a value of `storage` (Half/BFloat16) exactly: loads and
// roundings do, and selections among such values (relu, max, abs, where, ...) keep it.
// Rounding those again would cost two conversions per element and change nothing.
bool holdsStorageValue(const Kernel& k, ExprId id, c10::ScalarType storage,
                       std::vector<int8_t>& memo) {
  if (memo[id] >= 0) return memo[id];
  const Expr& e = k.exprs[id];
  bool exact = false;
  auto all = [&](size_t from) {
    for (size_t i = from; i < e.args.size(); ++i) {
      if (!holdsStorageValue(k, e.args[i], storage, memo)) return false;
    }
    return true;
  };
  switch (e.op) {
    case IrOp::Load: exact = k.inputs.at(e.index).dtype == storage; break;
    case IrOp::Constant:
      exact = representable(
          c10::isFloatingType(e.type) ? e.fvalue : static_cast<double>(e.ivalue), storage);
      break;
    case IrOp::RoundToHalf:
    case IrOp::RoundToBFloat16: exact = e.op == roundingOp(storage); break;
    case IrOp::Cast: exact = e.type == c10::ScalarType::Float && all(0); break;
    case IrOp::Neg:
    case IrOp::Abs:
    case IrOp::Min:
    case IrOp::Max: exact = e.type == c10::ScalarType::Float && all(0); break;
    case IrOp::Select: exact = e.type == c10::ScalarType::Float && all(1); break;
    default: break;
  }
  memo[id] = exact;
  return exact;
}

// Eager rounds every Half/BFloat16 result to its dtype before the next op reads it; so
// do we, which keeps chains (and casts of them to wider types) equal to eager.
Operand roundedToStorage(IrBuilder& b, const Kernel& k, Operand o) {
  const bool half = o.dtype == c10::ScalarType::Half;
  if ((!half && o.dtype != c10::ScalarType::BFloat16) || o.expr < 0) return o;
  std::vector<int8_t> memo(k.exprs.size(), -1);
  if (holdsStorageValue(k, o.expr, o.dtype, memo)) return o;
  ExprId f = b.cast(o.expr, c10::ScalarType::Float);
  o.expr = b.unary(roundingOp(o.dtype), f);
  return o;
}

c10::ScalarType scalarDtypeOf(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType: return c10::ScalarType::Long;
    case c10::TypeKind::BoolType: return c10::ScalarType::Bool;
    default: return c10::ScalarType::Double;
  }
}

}  // namespace

std::vector<InputDesc> inputDescs(const std::vector<bool>& is_tensor,
                                  const std::vector<ScalarArgKind>& scalar_kinds,
                                  c10::ArrayRef<c10::ScalarType> dtypes,
                                  const std::vector<bool>& zero_dim,
                                  c10::ArrayRef<TensorInput> accesses) {
  std::vector<InputDesc> descs;
  size_t t = 0;
  for (size_t i = 0; i < is_tensor.size(); ++i) {
    InputDesc d;
    d.is_tensor = is_tensor[i];
    if (d.is_tensor) {
      d.dtype = dtypes[t];
      d.zero_dim = zero_dim[t];
      d.access = accesses[t];
      ++t;
    } else {
      d.scalar_kind = scalar_kinds[i];
    }
    descs.push_back(d);
  }
  return descs;
}

ScalarArgKind scalarArgKindOf(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::FloatType) return ScalarArgKind::Double;
  if (type->kind() == c10::TypeKind::BoolType) return ScalarArgKind::Bool;
  return ScalarArgKind::Int64;
}

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

std::optional<c10::ScalarType> tableResultDtype(const torch::jit::Node* node,
                                                c10::DeviceType device) {
  const ops::OpEntry* entry = ops::findOp(node);
  if (!entry) return std::nullopt;
  return tableResultDtype(*entry, node, device);
}

std::optional<c10::ScalarType> tableResultDtype(const ops::OpEntry& entry,
                                                const torch::jit::Node* node,
                                                c10::DeviceType device) {
  if (node->outputs().size() != 1 || (entry.check && !entry.check(node))) return std::nullopt;
  Kernel k;
  k.device = device;
  IrBuilder b(k);
  std::vector<Operand> args;
  int32_t slot = 0;
  for (const torch::jit::Value* in : node->inputs()) {
    // A tensor constant (a frozen weight) reaches kernels as an argument, like any tensor.
    if (in->node()->kind() == c10::prim::Constant && !in->type()->cast<c10::TensorType>()) {
      args.push_back(constantOperand(b, in));
      continue;
    }
    Operand o;
    if (auto t = in->type()->cast<c10::TensorType>()) {
      if (!t->scalarType() || !t->dim()) return std::nullopt;
      o.dtype = *t->scalarType();
      o.category = *t->dim() == 0 ? Category::ZeroDimTensor : Category::DimTensor;
      o.expr = b.load(slot++, o.dtype);
    } else {
      const c10::TypeKind kind = in->type()->kind();
      if (kind != c10::TypeKind::FloatType && kind != c10::TypeKind::IntType &&
          kind != c10::TypeKind::BoolType) {
        return std::nullopt;
      }
      o.dtype = scalarDtypeOf(in->type());
      o.expr = b.scalar(slot++, o.dtype);
    }
    args.push_back(o);
  }
  try {
    return entry.lower(b, args).dtype;
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

Kernel lowerSubgraph(const torch::jit::Graph& subgraph, const std::vector<InputDesc>& inputs,
                     int ndim, bool flat, c10::DeviceType device, bool one_pass_variance) {
  TORCH_INTERNAL_ASSERT(inputs.size() == subgraph.inputs().size());
  TORCH_CHECK(!one_pass_variance || device == c10::DeviceType::CUDA,
              "fuser: one-pass variances are printed for CUDA only");
  Kernel k;
  k.ndim = ndim;
  k.flat = flat;
  k.device = device;
  k.one_pass_variance = one_pass_variance;
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
    if (node->outputs().size() == 1) {
      values.emplace(node->output(), roundedToStorage(b, k, entry->lower(b, args)));
      continue;
    }
    TORCH_CHECK(entry->lower_outputs, "fuser: no lowering of every output of ", *node);
    std::vector<Operand> outs = entry->lower_outputs(b, args);
    TORCH_CHECK(outs.size() == node->outputs().size(), "fuser: lowered outputs of ", *node);
    for (size_t o = 0; o < outs.size(); ++o) {
      values.emplace(node->output(o), roundedToStorage(b, k, outs[o]));
    }
  }

  for (const torch::jit::Value* out : subgraph.outputs()) {
    const Operand& o = values.at(out);
    TORCH_CHECK(o.expr >= 0 && o.isTensor(), "fuser: group output is not a tensor");
    ExprId value = b.cast(o.expr, computeType(o.dtype));
    // The store rounds to a half-precision dtype by itself: rounding first is redundant.
    const Expr& e = k.exprs[value];
    if (computeType(o.dtype) != o.dtype && e.op == roundingOp(o.dtype)) value = e.args[0];
    k.outputs.push_back(TensorOutput{o.dtype, value});
  }
  if (k.one_pass_variance) foldCentredSquares(k);
  return k;
}

}  // namespace fuser::codegen
