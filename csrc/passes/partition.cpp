// STUB: being implemented.
#include "passes/pipeline.h"

namespace fuser {
void formFusionGroups(GraphPtr& graph) {}
}  // namespace fuser
