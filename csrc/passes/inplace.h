// makeInPlaceOpsFunctional: in-place variants of fusible ops become their functional
// forms where no other alias can observe the write (see inplace.cpp).
#pragma once

#include "passes/pipeline.h"

namespace fuser {

void makeInPlaceOpsFunctional(GraphPtr& graph);

}  // namespace fuser
