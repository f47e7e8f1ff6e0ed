// STUB: being implemented.
#include "passes/pipeline.h"

namespace fuser {
void cleanUpGraph(GraphPtr& graph) {}
}  // namespace fuser
