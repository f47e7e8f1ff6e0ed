// What fuser.report reads back from the pass. While capture is on, every pipeline run
// leaves a copy of its graph as guarding left it (before cleanup wipes the profiled
// types), so the report sees sizes, dtypes and devices on every value. In that copy each
// node the partition refused carries its reason as the string attribute `fuser_reason`:
// the partition marks the node itself (value names change in the later stages, so text
// would not find it again) and the capture removes the marks from the graph it copied.
// Capture is off outside fuser.report and then costs nothing.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace fuser {

void setReportCapture(bool on);
bool reportCaptureActive();

// Marks `node` with the reason the partition refused it (capture on only).
void markRefused(torch::jit::Node* node, const std::string& reason);

// Keeps a copy of `graph`, marks included, and removes the marks from `graph`. Does
// nothing while capture is off.
void captureGraph(const std::shared_ptr<torch::jit::Graph>& graph);

// Forgets the latest copy (a pipeline that fuses the same graph again). Nothing while
// capture is off.
void discardLastCapturedGraph();

// The copies captured since the last call, oldest first.
std::vector<std::shared_ptr<torch::jit::Graph>> takeCapturedGraphs();

}  // namespace fuser
