// The registry behind findOp: entries from every ops/*.cpp, indexed by operator name.
#include "ops/op_table.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <mutex>
#include <unordered_map>

namespace fuser::ops {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<OpEntry> entries;
  // Built on first lookup, after all static registrations have run.
  std::unordered_map<c10::OperatorName, const OpEntry*> by_name;
  bool indexed = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

const std::unordered_map<c10::OperatorName, const OpEntry*>& index() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.indexed) {
    for (const OpEntry& e : r.entries) {
      auto schema = torch::jit::parseSchema(e.schema);
      r.by_name.emplace(schema.operator_name(), &e);
    }
    r.indexed = true;
  }
  return r.by_name;
}

}  // namespace

RegisterOps::RegisterOps(std::vector<OpEntry> entries) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TORCH_INTERNAL_ASSERT(!r.indexed, "op entries registered after the first lookup");
  r.entries.insert(r.entries.end(), entries.begin(), entries.end());
}

const OpEntry* findOpByName(const c10::OperatorName& name) {
  const auto& by_name = index();
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

const OpEntry* findOp(const torch::jit::Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema ? findOpByName(schema->operator_name()) : nullptr;
}

FusionDecision checkOpSupported(const torch::jit::Node* node) {
  const OpEntry* entry = findOp(node);
  if (!entry) {
    return FusionDecision::no(std::string("operator not in the fusible table: ") +
                              (node->maybeSchema() ? toString(node->maybeSchema()->operator_name())
                                                   : node->kind().toQualString()));
  }
  return entry->check ? entry->check(node) : FusionDecision::yes();
}

std::vector<std::string> supportedSchemas() {
  index();
  std::vector<std::string> out;
  for (const OpEntry& e : registry().entries) out.emplace_back(e.schema);
  return out;
}

}  // namespace fuser::ops
