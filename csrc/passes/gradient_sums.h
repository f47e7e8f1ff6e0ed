// layGradientSumsOutAsTheyRun: autodiff's gradient sums get the strides they have when
// the optimized graph runs, and so do elementwise values computed from them (see
// gradient_sums.cpp).
#pragma once

#include "passes/pipeline.h"

namespace fuser {

void layGradientSumsOutAsTheyRun(GraphPtr& graph);

}  // namespace fuser
