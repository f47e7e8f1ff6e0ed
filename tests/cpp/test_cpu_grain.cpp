// How many elements a CPU kernel call needs before it is split across threads: fewer
// the more work each element takes (runtime/cpu/host_compiler.cpp, cpuGrainSize).
#include <gtest/gtest.h>

#include "codegen/kernel_ir.h"
#include "runtime/cpu/host_compiler.h"

namespace fuser::runtime {
namespace {

using c10::ScalarType;
using codegen::Access;
using codegen::IrBuilder;
using codegen::IrOp;
using codegen::Kernel;

// out = f(f(...f(x + y))) with `depth` applications of the unary `op`.
Kernel chainOf(IrOp op, int depth) {
  Kernel k;
  IrBuilder b(k);
  k.inputs = {{ScalarType::Float, Access::Flat}, {ScalarType::Float, Access::Flat}};
  codegen::ExprId v = b.binary(IrOp::Add, b.load(0, ScalarType::Float),
                               b.load(1, ScalarType::Float));
  for (int i = 0; i < depth; ++i) v = b.unary(op, v);
  k.outputs.push_back({ScalarType::Float, v});
  return k;
}

TEST(CpuGrain, CheapKernelsKeepTheFullGrain) {
  EXPECT_EQ(cpuGrainSize(chainOf(IrOp::Neg, 1)), 32768);
}

TEST(CpuGrain, TranscendentalKernelsSplitSooner) {
  const int64_t one = cpuGrainSize(chainOf(IrOp::Sigmoid, 1));
  const int64_t five = cpuGrainSize(chainOf(IrOp::Sigmoid, 5));
  EXPECT_LT(one, 32768);
  EXPECT_LT(five, one);
  EXPECT_LE(five, 4096);
}

TEST(CpuGrain, NeverBelowTheFloor) {
  EXPECT_EQ(cpuGrainSize(chainOf(IrOp::Exp, 200)), 1024);
}

}  // namespace
}  // namespace fuser::runtime
