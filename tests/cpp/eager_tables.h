// Reading the eager reference tables of tests/cpp/data (written by gen_eager_tables.py):
// lines `specs | result`, specs like t:f32 (tensor), z:i64 (0-dim tensor), f:2.5, i:2,
// b:True (Python scalars), n (None), s:floor, dt:f16 (a ScalarType), dev:cpu,
// mf:contiguous (a MemoryFormat).
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fuser::testing {

struct TableLine {
  std::string op;  // op_dtypes.txt only: schema name with overload, e.g. aten::add.Tensor
  std::vector<std::string> specs;
  std::string result;  // a dtype name, or "error"
};

inline c10::ScalarType dtypeFromName(const std::string& name) {
  using c10::ScalarType;
  static const std::pair<const char*, ScalarType> names[] = {
      {"b", ScalarType::Bool},    {"u8", ScalarType::Byte},       {"i8", ScalarType::Char},
      {"i16", ScalarType::Short}, {"i32", ScalarType::Int},       {"i64", ScalarType::Long},
      {"f16", ScalarType::Half},  {"bf16", ScalarType::BFloat16}, {"f32", ScalarType::Float},
      {"f64", ScalarType::Double}};
  for (const auto& [n, t] : names) {
    if (name == n) return t;
  }
  TORCH_CHECK(false, "unknown dtype name ", name);
}

// Splits a spec into its kind and text: "t:f32" -> ("t", "f32"), "n" -> ("n", "").
inline std::pair<std::string, std::string> splitSpec(const std::string& spec) {
  size_t colon = spec.find(':');
  if (colon == std::string::npos) return {spec, ""};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

inline std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The table `name` of tests/cpp/data; `with_op`: lines start with an op name.
inline std::vector<TableLine> readTable(const std::string& name, bool with_op) {
  std::filesystem::path path = std::filesystem::path(__FILE__).parent_path() / "data" / name;
  std::ifstream in(path);
  TORCH_CHECK(in, "cannot read ", path.string());
  std::vector<TableLine> lines;
  std::string text;
  while (std::getline(in, text)) {
    if (text.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream ss(text);
    for (std::string f; std::getline(ss, f, '|');) fields.push_back(trim(f));
    TableLine line;
    if (with_op) line.op = fields.at(0);
    std::stringstream specs(fields.at(with_op ? 1 : 0));
    for (std::string s; specs >> s;) line.specs.push_back(s);
    line.result = fields.at(with_op ? 2 : 1);
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace fuser::testing
