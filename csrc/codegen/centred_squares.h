// A row's sum of centred squares written out, sum((x - mean(x))^2), taken in one pass.
//
// Written out (ConvNeXt's channels-first LayerNorm: `u = x.mean(1)`, then
// `(x - u).pow(2).mean(1)`), the squares need the mean first: a kernel that walks its
// rows from memory reads them once for the mean and once more for the squares before
// it can store anything. Where the kernel takes variances in one pass
// (Kernel::one_pass_variance: CUDA rows walked from memory), the sum of squares becomes
// Welford's SquaredDeviations of x, which the mean's own walk accumulates: one walk
// fewer. Float and double values only: a 16-bit program rounds each difference and
// square as eager does (DESIGN.md's guarantee), which one pass would skip.
#pragma once

#include "codegen/kernel_ir.h"

namespace fuser::codegen {

// Rewrites each Sum reduction of (x - mean(x)) * (x - mean(x)) (either order of the
// difference; mean(x) a Sum of x over the row divided by its size) into a
// SquaredDeviations reduction of x, in place.
void foldCentredSquares(Kernel& k);

}  // namespace fuser::codegen
