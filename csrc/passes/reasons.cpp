// Formatting and printing of "not fused" reasons (FUSER_DUMP=reasons).
#include "passes/reasons.h"

#include <iostream>
#include <sstream>

#include "config.h"

namespace fuser {

std::string describeNode(const torch::jit::Node* node) {
  std::ostringstream out;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    out << (i ? ", %" : "%") << node->outputs()[i]->debugName();
  }
  if (!node->outputs().empty()) out << " = ";
  out << node->kind().toQualString() << "(";
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    out << (i ? ", %" : "%") << node->inputs()[i]->debugName();
  }
  out << ")";
  return out.str();
}

void ReasonLog::record(const torch::jit::Node* node, const std::string& reason) {
  std::string line = describeNode(node) + ": " + reason;
  if (seen_.insert(line).second) lines_.push_back(std::move(line));
}

void ReasonLog::flush() const {
  if (!config().dump_reasons) return;
  for (const std::string& line : lines_) std::cerr << "[fuser] not fused: " << line << "\n";
  std::cerr.flush();
}

}  // namespace fuser
