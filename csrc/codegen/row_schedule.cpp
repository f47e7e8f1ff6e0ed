#include "codegen/row_schedule.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace fuser::codegen {
namespace {

// Loads and element indices: read where their first reader is, never held for later.
bool isElementLeaf(const Kernel& k, ExprId id) {
  const IrOp op = k.exprs[id].op;
  return op == IrOp::Load || op == IrOp::ElementIndex;
}

}  // namespace

RowSchedule scheduleRows(const Kernel& k) {
  const size_t n = k.exprs.size();
  // Reachability, from the outputs back.
  std::vector<bool> used(n, false);
  for (const TensorOutput& o : k.outputs) used[o.value] = true;
  for (size_t i = n; i-- > 0;) {
    if (!used[i]) continue;
    for (ExprId a : k.exprs[i].args) used[a] = true;
  }
  // element: varies along the row. ready: passes done before the value is known.
  // constant: the same for every row.
  std::vector<bool> element(n, false), constant(n, false);
  std::vector<int> ready(n, 0);
  int passes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Expr& e = k.exprs[i];
    if (e.op == IrOp::Load) {
      element[i] = !rowLevelInput(k.inputs[e.index]);
      continue;
    }
    if (e.op == IrOp::ElementIndex) {
      element[i] = true;
      continue;
    }
    if (e.op == IrOp::Scalar || e.op == IrOp::Constant || e.op == IrOp::RowSize) {
      constant[i] = true;
      continue;
    }
    bool all_constant = true;
    for (ExprId a : e.args) {
      element[i] = element[i] || element[a];
      ready[i] = std::max(ready[i], ready[a]);
      all_constant = all_constant && constant[a];
    }
    if (e.op == IrOp::Reduce) {
      // Combined in pass ready[i]; known after it. A reduction of a row-level value still
      // combines one copy per element (the sum of a broadcast value is n times it).
      passes = std::max(passes, ready[i] + 1);
      ready[i] += 1;
      element[i] = false;
      all_constant = false;
    }
    constant[i] = all_constant;
  }

  RowSchedule s;
  s.passes.resize(passes);
  // Per pass, the element expressions its reductions need.
  std::vector<int> needed_in(n, -1);
  for (int p = 0; p < passes; ++p) {
    std::vector<bool> need(n, false);
    for (size_t i = 0; i < n; ++i) {
      const Expr& e = k.exprs[i];
      if (used[i] && e.op == IrOp::Reduce && ready[i] == p + 1) {
        s.passes[p].reduces.push_back(static_cast<ExprId>(i));
        need[e.args[0]] = true;
      }
    }
    for (size_t i = n; i-- > 0;) {
      if (!need[i] || k.exprs[i].op == IrOp::Reduce || !element[i]) continue;
      for (ExprId a : k.exprs[i].args) need[a] = true;
    }
    for (size_t i = 0; i < n; ++i) {
      if (need[i] && element[i]) s.passes[p].element.push_back(static_cast<ExprId>(i));
    }
  }
  std::vector<bool> final_need(n, false);
  for (const TensorOutput& o : k.outputs) {
    if (o.per_row) {
      TORCH_CHECK(!element[o.value], "fuser: a per-row output of a row kernel varies along the row");
    } else {
      final_need[o.value] = true;
    }
  }
  for (size_t i = n; i-- > 0;) {
    if (!final_need[i] || !element[i]) continue;
    for (ExprId a : k.exprs[i].args) final_need[a] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!used[i]) continue;
    const auto id = static_cast<ExprId>(i);
    if (element[i]) {
      if (final_need[i]) s.final_element.push_back(id);
    } else if (constant[i]) {
      s.constants.push_back(id);
    } else if (ready[i] == 0) {
      s.row_start.push_back(id);
    } else if (k.exprs[i].op != IrOp::Reduce) {
      s.passes[ready[i] - 1].after.push_back(id);
    }
  }
  s.element = std::move(element);
  s.used = std::move(used);
  s.ready = std::move(ready);
  // Element values are computed as soon as their reductions are known; loads wait for
  // their first reader (a layer_norm's weight, read only when storing, takes no
  // registers before).
  const int last = static_cast<int>(s.passes.size());
  s.loop.assign(s.ready.begin(), s.ready.end());
  for (size_t i = 0; i < n; ++i) {
    if (isElementLeaf(k, static_cast<ExprId>(i)) && s.element[i]) s.loop[i] = last;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!s.used[i]) continue;
    const int at = s.loopOf(k, static_cast<ExprId>(i));
    for (ExprId a : k.exprs[i].args) {
      if (isElementLeaf(k, a) && s.element[a]) s.loop[a] = std::min(s.loop[a], at);
    }
  }
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const ExprId value = k.outputs[o].value;
    if (isElementLeaf(k, value) && s.element[value] && !k.outputs[o].per_row) {
      s.loop[value] = std::min(s.loop[value], last);
    }
  }
  s.held.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!s.used[i]) continue;
    for (ExprId a : k.exprs[i].args) {
      if (s.element[a] && s.loopOf(k, static_cast<ExprId>(i)) > s.loop[a]) s.held[a] = true;
    }
  }
  return s;
}

std::vector<bool> RowSchedule::readsIn(const Kernel& k, int loop) const {
  std::vector<bool> read(k.exprs.size(), false);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (!used[i] || (!element[i] && k.exprs[i].op != IrOp::Reduce)) continue;
    if (loopOf(k, static_cast<ExprId>(i)) != loop) continue;
    for (ExprId a : k.exprs[i].args) {
      if (held[a] && this->loop[a] < loop) read[a] = true;
    }
  }
  return read;
}

}  // namespace fuser::codegen
