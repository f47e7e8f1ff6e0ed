// STUB: being implemented.
#include "passes/pipeline.h"

namespace fuser {
void buildShapeExpressions(GraphPtr& graph) {}
}  // namespace fuser
