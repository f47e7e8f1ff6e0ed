#include "runtime/workspace_plan.h"

#include <algorithm>
#include <numeric>

namespace fuser::runtime {
namespace {

int64_t roundUp(int64_t n, int64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

bool liveTogether(const BufferNeed& a, const BufferNeed& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

WorkspacePlan planWorkspace(const std::vector<BufferNeed>& buffers, int64_t alignment) {
  WorkspacePlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; equal sizes in their given order, so a plan is reproducible.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  for (size_t b : order) {
    const int64_t size = roundUp(buffers[b].bytes, alignment);
    plan.sum_of_buffers += size;
    // The placed buffers live beside this one, by offset: the first gap that fits.
    std::vector<size_t> beside;
    for (size_t p : placed) {
      if (liveTogether(buffers[p], buffers[b])) beside.push_back(p);
    }
    std::sort(beside.begin(), beside.end(),
              [&](size_t x, size_t y) { return plan.offsets[x] < plan.offsets[y]; });
    int64_t offset = 0;
    for (size_t p : beside) {
      if (plan.offsets[p] >= offset + size) break;
      offset = std::max(offset, plan.offsets[p] + roundUp(buffers[p].bytes, alignment));
    }
    plan.offsets[b] = offset;
    plan.bytes = std::max(plan.bytes, offset + size);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace fuser::runtime
