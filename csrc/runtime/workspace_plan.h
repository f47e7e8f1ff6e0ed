// One workspace per call for the buffers a group's kernels pass between them (a row
// kernel cut in stages: codegen/split_rows.h). Each buffer has a size and a lifetime
// (the first and last kernel that touch it); buffers whose lifetimes overlap must not
// overlap in memory. Greedy by size: the largest buffer first, each at the lowest
// aligned offset that overlaps no buffer placed before it and live beside it.
#pragma once

#include <cstdint>
#include <vector>

namespace fuser::runtime {

struct BufferNeed {
  int64_t bytes = 0;
  int first = 0;  // the first kernel that writes or reads it
  int last = 0;   // the last (inclusive)
};

struct WorkspacePlan {
  std::vector<int64_t> offsets;  // per buffer, in bytes from the workspace's start
  int64_t bytes = 0;             // the workspace's size
  int64_t sum_of_buffers = 0;    // what one allocation per buffer would take
};

// Every offset a multiple of `alignment` (a power of two).
WorkspacePlan planWorkspace(const std::vector<BufferNeed>& buffers, int64_t alignment = 256);

}  // namespace fuser::runtime
