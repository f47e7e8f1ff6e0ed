// Annotated graph copies for fuser.report (see report_capture.h).
#include "passes/report_capture.h"

#include <atomic>
#include <mutex>

namespace fuser {
namespace {

using torch::jit::Block;
using torch::jit::Node;

struct Capture {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::vector<std::shared_ptr<torch::jit::Graph>> graphs;
};

Capture& capture() {
  static Capture* c = new Capture();  // never freed: graphs may outlive static teardown
  return *c;
}

c10::Symbol reasonAttr() { return c10::Symbol::attr("fuser_reason"); }

void removeMarks(Block* block) {
  for (Node* node : block->nodes()) {
    for (Block* sub : node->blocks()) removeMarks(sub);
    if (node->hasAttribute(reasonAttr())) node->removeAttribute(reasonAttr());
  }
}

}  // namespace

void setReportCapture(bool on) {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.on = on;
  c.graphs.clear();
}

bool reportCaptureActive() { return capture().on.load(); }

void markRefused(Node* node, const std::string& reason) {
  if (capture().on) node->s_(reasonAttr(), reason);
}

void captureGraph(const std::shared_ptr<torch::jit::Graph>& graph) {
  Capture& c = capture();
  if (!c.on) return;
  std::lock_guard<std::mutex> lock(c.mutex);
  c.graphs.push_back(graph->copy());
  removeMarks(graph->block());
}

void discardLastCapturedGraph() {
  Capture& c = capture();
  if (!c.on) return;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.graphs.empty()) c.graphs.pop_back();
}

std::vector<std::shared_ptr<torch::jit::Graph>> takeCapturedGraphs() {
  Capture& c = capture();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto out = std::move(c.graphs);
  c.graphs.clear();
  return out;
}

}  // namespace fuser
