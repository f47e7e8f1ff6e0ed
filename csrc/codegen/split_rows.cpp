#include "codegen/split_rows.h"

#include "codegen/expr_printer.h"
#include "codegen/row_printer.h"

namespace fuser::codegen {

c10::ScalarType partialType(const Kernel& k, const Expr& e) {
  return sumsInDouble(e) && k.device == c10::DeviceType::CPU ? c10::ScalarType::Double : e.type;
}

std::string splitBufferTypeName(const Kernel& k, const SplitBuffer& b) {
  return b.welford ? welfordTypeName(k.exprs[b.reduce]) : computeTypeName(b.type);
}

bool lastStagePerRow(const Kernel& k, const RowSchedule& s) {
  const int last = splitStages(s) - 1;
  if (k.row_stage != last) return false;
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    if (k.outputs[o].per_row) continue;
    // A column kernel's stages before the last store whole outputs of earlier walks.
    if (!k.columns || s.columnStoreWalk(k, o) == last) return false;
  }
  return true;
}

int splitBufferOf(const std::vector<SplitBuffer>& buffers, SplitBuffer::Kind kind, ExprId reduce) {
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].kind == kind && buffers[b].reduce == reduce) return static_cast<int>(b);
  }
  return -1;
}

std::vector<SplitBuffer> splitBuffers(const Kernel& k, const RowSchedule& s) {
  std::vector<SplitBuffer> out;
  const int last = splitStages(s) - 1;
  for (int p = 0; p < static_cast<int>(s.passes.size()); ++p) {
    for (ExprId r : s.passes[p].reduces) {
      const Expr& e = k.exprs[r];
      out.push_back({SplitBuffer::Kind::Partials, r, partialType(k, e), p, p + 1,
                     isWelford(e)});
      // Stages after the next read the combined value rather than every partial.
      if (p + 1 < last) out.push_back({SplitBuffer::Kind::RowValues, r, e.type, p + 1, last});
    }
  }
  return out;
}

}  // namespace fuser::codegen
