// STUB: being implemented.
#include "passes/pipeline.h"

namespace fuser {
void moveChunksIntoGroups(GraphPtr& graph) {}
}  // namespace fuser
