// Every entry of the op table, lowered over a grid of argument dtypes and kinds: the
// result dtype must be eager's (tests/cpp/data/op_dtypes.txt, from gen_eager_tables.py),
// held in its computation type; plus the shape of a few lowerings that matter.
#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <map>
#include <set>

#include "eager_tables.h"
#include "ops/op_table.h"
#include "ops/type_promotion.h"

namespace fuser::ops {
namespace {

using c10::ScalarType;
using codegen::IrOp;
using testing::dtypeFromName;
using testing::splitSpec;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// A graph holding one node of `op` over arguments built from `specs`, and the operands
// the lowering would give the entry (tensors loaded, constants as constants).
struct OneNode {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Node* node = nullptr;
  codegen::Kernel kernel;
  std::vector<Operand> operands;

  OneNode(const std::string& op, const std::vector<std::string>& specs) {
    codegen::IrBuilder b(kernel);
    std::vector<Value*> inputs;
    int32_t loads = 0;
    for (const std::string& spec : specs) {
      auto [kind, text] = splitSpec(spec);
      Operand o;
      Value* v = nullptr;
      if (kind == "t" || kind == "z") {
        o.dtype = dtypeFromName(text);
        o.category = kind == "t" ? Category::DimTensor : Category::ZeroDimTensor;
        o.expr = b.load(loads++, o.dtype);
        v = graph->addInput();
        std::vector<int64_t> sizes = kind == "t" ? std::vector<int64_t>{2} : std::vector<int64_t>{};
        std::vector<int64_t> strides =
            kind == "t" ? std::vector<int64_t>{1} : std::vector<int64_t>{};
        v->setType(c10::TensorType::create(o.dtype, c10::Device(c10::kCPU),
                                           c10::VaryingShape<int64_t>(sizes),
                                           c10::VaryingShape<int64_t>(strides), false));
      } else {
        c10::IValue value;
        if (kind == "f") {
          value = std::stod(text);
          o.dtype = ScalarType::Double;
          o.expr = b.constant(value.toDouble(), o.dtype);
        } else if (kind == "i" || kind == "dt") {
          int64_t i = kind == "i" ? std::stoll(text) : static_cast<int64_t>(dtypeFromName(text));
          value = i;
          o.dtype = ScalarType::Long;
          o.expr = b.intConstant(i, o.dtype);
        } else if (kind == "b") {
          value = text == "True";
          o.dtype = ScalarType::Bool;
          o.expr = b.intConstant(value.toBool(), o.dtype);
        } else if (kind == "s") {
          value = text;
        } else if (kind == "dev") {
          value = c10::Device(text);
        } else if (kind == "mf") {
          TORCH_CHECK(text == "contiguous", "unknown memory format ", spec);
          value = static_cast<int64_t>(c10::MemoryFormat::Contiguous);
        } else {
          TORCH_CHECK(kind == "n", "unknown spec ", spec);
        }
        o.category = Category::WrappedScalar;
        o.constant = value;
        v = graph->insertConstant(value);
      }
      operands.push_back(o);
      inputs.push_back(v);
    }
    std::string kind = op.substr(0, op.find('.'));
    node = graph->insertNode(graph->create(c10::Symbol::fromQualString(kind), inputs, 1));
  }

  std::string overloadName() const {
    const c10::FunctionSchema* s = node->maybeSchema();
    if (!s) return "<no schema>";
    return s->name() + (s->overload_name().empty() ? "" : "." + s->overload_name());
  }
};

std::string describe(const testing::TableLine& line) {
  std::string s = line.op + " |";
  for (const auto& spec : line.specs) s += " " + spec;
  return s + " | " + line.result;
}

TEST(OpTable, ResultDtypesMatchEager) {
  auto table = testing::readTable("op_dtypes.txt", /*with_op=*/true);
  ASSERT_GT(table.size(), 5000u);
  int lowered = 0, refused_where_eager_raises = 0;
  for (const auto& line : table) {
    OneNode n(line.op, line.specs);
    ASSERT_EQ(n.overloadName(), line.op) << describe(line);
    const OpEntry* entry = findOp(n.node);
    ASSERT_NE(entry, nullptr) << describe(line);
    FusionDecision supported = checkOpSupported(n.node);
    codegen::IrBuilder b(n.kernel);
    if (line.result == "error") {
      // Profiling runs eager first, so these dtypes never reach the lowering; an entry
      // may still refuse or throw, which is what eager does.
      try {
        if (!supported || (entry->lower(b, n.operands), false)) ++refused_where_eager_raises;
      } catch (const c10::Error&) {
        ++refused_where_eager_raises;
      }
      continue;
    }
    if (line.op == "aten::gelu_backward" && line.specs[0].substr(2) != line.specs[1].substr(2)) {
      // Autodiff gives the gradient self's dtype; mixed dtypes (which eager promotes,
      // or refuses for some pairs) are left to eager.
      EXPECT_FALSE(static_cast<bool>(supported)) << describe(line);
      continue;
    }
    ASSERT_TRUE(static_cast<bool>(supported)) << describe(line) << ": " << supported.reason();
    if (line.op == "aten::dropout") {
      // Training dropout (the only one in groups) reaches kernels as
      // fuser::philox_dropout, whose lines check its dtypes; lowered directly, it must
      // refuse rather than drop nothing.
      EXPECT_THROW(entry->lower(b, n.operands), c10::Error) << describe(line);
      continue;
    }
    Operand r;
    try {
      r = entry->lower(b, n.operands);
    } catch (const c10::Error& e) {
      ADD_FAILURE() << describe(line) << ": lower threw " << e.what_without_backtrace();
      continue;
    }
    ScalarType expected = dtypeFromName(line.result);
    EXPECT_EQ(r.dtype, expected) << describe(line);
    ASSERT_GE(r.expr, 0) << describe(line);
    EXPECT_EQ(n.kernel.exprs.at(r.expr).type, codegen::computeType(expected)) << describe(line);
    EXPECT_NE(r.category, Category::WrappedScalar) << describe(line);
    ++lowered;
  }
  EXPECT_GT(lowered, 5000);
  std::cout << lowered << " lowered, " << refused_where_eager_raises
            << " eager errors also refused by the entry\n";
}

TEST(OpTable, EveryEntryIsCovered) {
  std::set<std::string> covered;
  for (const auto& line : testing::readTable("op_dtypes.txt", /*with_op=*/true)) {
    covered.insert(line.op);
  }
  auto schemas = supportedSchemas();
  EXPECT_GT(schemas.size(), 120u);
  for (const std::string& schema : schemas) {
    std::string name = schema.substr(0, schema.find('('));
    // Reductions and batch_norm take lists, floats and [C] operands the table's grid
    // does not make: checked below.
    const OpEntry* entry = findOpByName(torch::jit::parseSchema(schema).operator_name());
    if ((entry && entry->reduces) || name == "aten::batch_norm" ||
        name == "fuser::batch_norm_with_stats") {
      continue;
    }
    EXPECT_TRUE(covered.count(name)) << "no dtype cases for " << schema;
  }
}

// Every reduction of the table (ops/reductions.h) gives its floating input's dtype, as
// eager does, computes in float for float16/bfloat16, and refuses integers and bool
// (eager's mean, var, softmax, its backward and layer_norm raise for them), but for
// sum, which sums them as int64, and any and all, which give a bool, as eager's do.
TEST(OpTable, ReductionsKeepTheirFloatingDtype) {
  int reductions = 0;
  for (const std::string& schema_text : supportedSchemas()) {
    const auto schema = torch::jit::parseSchema(schema_text);
    const OpEntry* entry = findOpByName(schema.operator_name());
    ASSERT_NE(entry, nullptr);
    if (!entry->reduces) continue;
    ++reductions;
    for (ScalarType dtype : {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                             ScalarType::BFloat16, ScalarType::Int, ScalarType::Bool}) {
      codegen::Kernel k;
      codegen::IrBuilder b(k);
      std::vector<Operand> args(schema.arguments().size());
      args[0].expr = b.load(0, codegen::computeType(dtype));
      args[0].dtype = dtype;
      args[0].category = Category::DimTensor;
      for (size_t i = 1; i < args.size(); ++i) args[i].constant = c10::IValue();  // None
      // Softmax backward: the forward's output, of the gradient's dtype.
      if (schema.arguments().size() > 1 && schema.arguments()[1].name() == "output") {
        args[1] = args[0];
        args[1].expr = b.load(1, codegen::computeType(dtype));
      }
      // layer_norm's input gradient: the input of the gradient's dtype, the row mean
      // and rstd.
      if (schema.name() == "fuser::layer_norm_input_grad") {
        for (size_t i : {1, 3, 4}) {
          args[i] = args[0];
          args[i].expr = b.load(static_cast<int>(i), codegen::computeType(dtype));
        }
      }
      // any and all: a bool of every real input (uint8, eager's uint8 result, is refused
      // by the entry's check, not its lowering).
      if (schema.name() == "aten::any" || schema.name() == "aten::all") {
        const Operand r = entry->lower(b, args);
        EXPECT_EQ(r.dtype, ScalarType::Bool) << schema_text << " " << dtype;
        EXPECT_EQ(k.exprs.at(r.expr).type, ScalarType::Bool) << schema_text << " " << dtype;
        EXPECT_TRUE(k.rows) << schema_text;
        continue;
      }
      if (!c10::isFloatingType(dtype) && schema.name() == "aten::sum") {
        const Operand r = entry->lower(b, args);
        EXPECT_EQ(r.dtype, ScalarType::Long) << dtype;
        EXPECT_EQ(k.exprs.at(r.expr).type, ScalarType::Long) << dtype;
        continue;
      }
      if (!c10::isFloatingType(dtype)) {
        EXPECT_THROW(entry->lower(b, args), c10::Error) << schema_text << " " << dtype;
        continue;
      }
      const Operand r = entry->lower(b, args);
      EXPECT_EQ(r.dtype, dtype) << schema_text;
      EXPECT_EQ(k.exprs.at(r.expr).type, codegen::computeType(dtype)) << schema_text;
      EXPECT_TRUE(k.rows) << schema_text;
      if (entry->lower_outputs) {
        // native_layer_norm: the output, then the row mean and rstd; var_mean and
        // std_mean: the variance (or its root), then the mean; all of self's dtype.
        codegen::Kernel k2;
        codegen::IrBuilder b2(k2);
        args[0].expr = b2.load(0, codegen::computeType(dtype));
        const std::vector<Operand> outs = entry->lower_outputs(b2, args);
        ASSERT_EQ(outs.size(), schema.returns().size()) << schema_text;
        ASSERT_EQ(outs.size(), schema.name() == "aten::native_layer_norm" ? 3u : 2u) << schema_text;
        for (const Operand& o : outs) EXPECT_EQ(o.dtype, dtype) << schema_text;
      }
    }
  }
  EXPECT_EQ(reductions, 28);  // sum and mean in their dim and whole-tensor forms, ...
}

// Inference batch_norm (ops/batch_norm.h), and fuser::batch_norm_with_stats which batch
// statistics give their normalization to, give x's dtype, compute in float for
// float16/bfloat16 x beside statistics of x's dtype or float, and refuse integers (eager
// raises for them).
TEST(OpTable, BatchNormKeepsItsInputDtype) {
  for (const char* name : {"aten::batch_norm", "fuser::batch_norm_with_stats"}) {
    const OpEntry* entry = findOpByName({name, ""});
    ASSERT_NE(entry, nullptr) << name;
    for (ScalarType dtype : {ScalarType::Float, ScalarType::Double, ScalarType::Half,
                             ScalarType::BFloat16, ScalarType::Int}) {
      for (bool float_stats : {false, true}) {
        codegen::Kernel k;
        codegen::IrBuilder b(k);
        std::vector<Operand> args(9);
        const ScalarType stats = float_stats ? ScalarType::Float : dtype;
        for (int i = 0; i < 5; ++i) {
          const ScalarType t = i == 0 ? dtype : stats;
          args[i].expr = b.load(i, codegen::computeType(t));
          args[i].dtype = t;
          args[i].category = Category::DimTensor;
        }
        args[5].constant = c10::IValue(false);
        args[6].constant = c10::IValue(0.1);
        args[7].constant = c10::IValue(1e-5);
        args[8].constant = c10::IValue(true);
        if (!c10::isFloatingType(dtype)) {
          EXPECT_THROW(entry->lower(b, args), c10::Error) << dtype;
          continue;
        }
        const Operand r = entry->lower(b, args);
        EXPECT_EQ(r.dtype, dtype);
        EXPECT_EQ(k.exprs.at(r.expr).type, codegen::computeType(dtype)) << dtype;
        args[5].constant = c10::IValue(true);  // batch statistics: never lowered
        EXPECT_THROW(entry->lower(b, args), c10::Error) << dtype;
      }
    }
  }
}

// Lowers `op` over `specs`; returns the kernel's expressions and the result.
struct Lowered {
  codegen::Kernel kernel;
  Operand result;
  int count(IrOp op) const {
    return std::count_if(kernel.exprs.begin(), kernel.exprs.end(),
                         [&](const codegen::Expr& e) { return e.op == op; });
  }
  const codegen::Expr& expr() const { return kernel.exprs.at(result.expr); }
};

Lowered lower(const std::string& op, const std::vector<std::string>& specs) {
  OneNode n(op, specs);
  const OpEntry* entry = findOp(n.node);
  TORCH_CHECK(entry, "no entry for ", op);
  FusionDecision ok = checkOpSupported(n.node);
  TORCH_CHECK(static_cast<bool>(ok), ok.reason());
  Lowered l;
  codegen::IrBuilder b(n.kernel);
  l.result = entry->lower(b, n.operands);
  l.kernel = n.kernel;
  return l;
}

TEST(OpLowering, HalfComparisonRoundsTheScalar) {
  Lowered l = lower("aten::lt.Scalar", {"t:f16", "f:0.1"});
  ASSERT_EQ(l.expr().op, IrOp::Lt);
  const codegen::Expr& rhs = l.kernel.exprs[l.expr().args[1]];
  EXPECT_EQ(rhs.op, IrOp::Constant);
  EXPECT_EQ(rhs.fvalue, static_cast<float>(c10::Half(0.1f)));
}

TEST(OpLowering, HalfMultiplicationReadsTheScalarAtFloatPrecision) {
  Lowered l = lower("aten::mul.Scalar", {"t:f16", "f:0.1"});
  EXPECT_EQ(l.count(IrOp::RoundToHalf), 0);
  const codegen::Expr& rhs = l.kernel.exprs[l.expr().args[1]];
  EXPECT_EQ(rhs.op, IrOp::Cast);
  EXPECT_EQ(rhs.type, ScalarType::Float);
}

TEST(OpLowering, PowWithSmallConstantExponentsAvoidsPow) {
  EXPECT_EQ(lower("aten::pow.Tensor_Scalar", {"t:f32", "i:2"}).count(IrOp::Pow), 0);
  EXPECT_EQ(lower("aten::pow.Tensor_Scalar", {"t:i32", "i:3"}).count(IrOp::Pow), 0);
  EXPECT_EQ(lower("aten::pow.Tensor_Scalar", {"t:f32", "f:0.5"}).expr().op, IrOp::Sqrt);
  EXPECT_EQ(lower("aten::pow.Tensor_Scalar", {"t:f32", "f:2.5"}).expr().op, IrOp::Pow);
  EXPECT_THROW(lower("aten::pow.Tensor_Scalar", {"t:i32", "i:-1"}), c10::Error);
}

TEST(OpLowering, DivisionModes) {
  EXPECT_EQ(lower("aten::div.Tensor_mode", {"t:i32", "t:i32", "s:trunc"}).expr().op, IrOp::Div);
  EXPECT_EQ(lower("aten::div.Tensor_mode", {"t:f32", "t:f32", "s:trunc"}).expr().op, IrOp::Trunc);
  EXPECT_EQ(lower("aten::div.Tensor_mode", {"t:i32", "t:i32", "s:floor"}).expr().op,
            IrOp::FloorDiv);
  Lowered truediv = lower("aten::div.Tensor_mode", {"t:i32", "t:i32", "n"});
  EXPECT_EQ(truediv.expr().op, IrOp::Div);
  EXPECT_EQ(truediv.result.dtype, ScalarType::Float);
  EXPECT_EQ(lower("aten::floor_divide.Scalar", {"t:f64", "f:2.5"}).expr().op, IrOp::FloorDiv);
}

TEST(OpLowering, ChecksRefuseNonConstantModes) {
  auto graph = std::make_shared<Graph>();
  Value* x = graph->addInput()->setType(c10::TensorType::get());
  Value* y = graph->addInput()->setType(c10::TensorType::get());
  Value* mode = graph->addInput()->setType(c10::OptionalType::create(c10::StringType::get()));
  Node* div =
      graph->insertNode(graph->create(c10::Symbol::fromQualString("aten::div"), {x, y, mode}, 1));
  ASSERT_NE(findOp(div), nullptr);
  FusionDecision d = checkOpSupported(div);
  EXPECT_FALSE(static_cast<bool>(d));
  EXPECT_NE(d.reason().find("rounding_mode"), std::string::npos) << d.reason();

  Value* none = graph->insertConstant(c10::IValue());
  Node* clamp = graph->insertNode(
      graph->create(c10::Symbol::fromQualString("aten::clamp"), {x, none, none}, 1));
  EXPECT_FALSE(static_cast<bool>(checkOpSupported(clamp)));

  Value* channels_last =
      graph->insertConstant(static_cast<int64_t>(c10::MemoryFormat::ChannelsLast));
  Value* dtype = graph->insertConstant(static_cast<int64_t>(ScalarType::Half));
  Value* f = graph->insertConstant(false);
  Node* to = graph->insertNode(
      graph->create(c10::Symbol::fromQualString("aten::to"), {x, dtype, f, f, channels_last}, 1));
  EXPECT_FALSE(static_cast<bool>(checkOpSupported(to)));
}

TEST(OpLowering, BoolArithmeticIsLogic) {
  EXPECT_EQ(lower("aten::add.Tensor", {"t:b", "t:b", "i:2"}).expr().op, IrOp::LogicalOr);
  EXPECT_EQ(lower("aten::mul.Tensor", {"t:b", "t:b"}).expr().op, IrOp::LogicalAnd);
  EXPECT_EQ(lower("aten::maximum", {"t:b", "t:b"}).expr().op, IrOp::LogicalOr);
  EXPECT_EQ(lower("aten::minimum", {"t:b", "t:b"}).expr().op, IrOp::LogicalAnd);
}

TEST(OpLowering, AlphaOfOneIsNotMultiplied) {
  EXPECT_EQ(lower("aten::add.Tensor", {"t:f32", "t:f32", "i:1"}).count(IrOp::Mul), 0);
  EXPECT_EQ(lower("aten::sub.Tensor", {"t:i32", "t:i32", "i:2"}).count(IrOp::Mul), 1);
  EXPECT_THROW(lower("aten::add.Tensor", {"t:i32", "t:i32", "f:2.5"}), c10::Error);
}

TEST(OpLowering, LerpWithConstantWeightPicksOneFormula) {
  EXPECT_EQ(lower("aten::lerp.Scalar", {"t:f32", "t:f32", "f:0.25"}).count(IrOp::Select), 0);
  EXPECT_EQ(lower("aten::lerp.Tensor", {"t:f32", "t:f32", "t:f32"}).count(IrOp::Select), 1);
}

TEST(OpLowering, IntegerRoundingIsIdentity) {
  Lowered l = lower("aten::floor", {"t:i32"});
  EXPECT_EQ(l.expr().op, IrOp::Load);
  EXPECT_EQ(lower("aten::floor", {"t:f32"}).expr().op, IrOp::Floor);
}

TEST(OpLowering, CastsKeepTheirTarget) {
  Lowered l = lower("aten::to.dtype", {"t:f64", "dt:f16", "b:False", "b:False", "n"});
  EXPECT_EQ(l.result.dtype, ScalarType::Half);
  EXPECT_EQ(l.expr().op, IrOp::Cast);
  EXPECT_EQ(l.expr().type, ScalarType::Float);
  EXPECT_EQ(lower("aten::type_as", {"t:i32", "t:bf16"}).result.dtype, ScalarType::BFloat16);
}

}  // namespace
}  // namespace fuser::ops
