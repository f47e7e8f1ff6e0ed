// Why a node was not fused: one line per (node, reason), printed to stderr under
// FUSER_DUMP=reasons, e.g.
//   [fuser] not fused: %5 = aten::mm(%a, %b): operator not in the fusible table: aten::mm
// The same strings are what FusionDecision carries, so the report tool can reuse them.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <set>
#include <string>
#include <vector>

namespace fuser {

// `%out = kind(%in, ...)`: short enough for one line, enough to find the node.
std::string describeNode(const torch::jit::Node* node);

// Collects reasons during one pass run; duplicates (same node text, same reason) are
// kept once, in first-seen order.
class ReasonLog {
 public:
  void record(const torch::jit::Node* node, const std::string& reason);
  const std::vector<std::string>& lines() const { return lines_; }
  // Prints every line to stderr when config().dump_reasons is set.
  void flush() const;

 private:
  std::vector<std::string> lines_;
  std::set<std::string> seen_;
};

}  // namespace fuser
