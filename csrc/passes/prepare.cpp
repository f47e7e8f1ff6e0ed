// STUB: being implemented.
#include "passes/pipeline.h"

namespace fuser {
void prepareGraph(GraphPtr& graph) {}
}  // namespace fuser
