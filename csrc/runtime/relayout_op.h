// The fuser::Relayout operator (symbols.h): a chain of element moves run as one gather.
#pragma once

#include <string>

namespace fuser::runtime {

// The CUDA source of the gather: each thread copies one unit of `unit_bytes` (1, 2, 4,
// 8 or 16) from the source row its table names; offsets and counts are 32-bit ints
// where `wide_indices` is false, 64-bit otherwise.
std::string gatherRowsSource(int unit_bytes, bool wide_indices);
inline constexpr const char* kGatherRowsKernel = "fuser_gather_rows";

}  // namespace fuser::runtime
