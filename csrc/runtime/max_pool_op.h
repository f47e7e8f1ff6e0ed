// The fuser::max_pool2d operator (symbols.h): aten::max_pool2d on channels-last CUDA
// tensors by a kernel of ours, ATen's everywhere else.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace fuser::runtime {

// The CUDA source of the channels-last max pool for `dtype` (float, half or bfloat16),
// each thread taking `vector` adjacent channels of one output pixel.
std::string maxPoolChannelsLastSource(c10::ScalarType dtype, int vector);
inline constexpr const char* kMaxPoolChannelsLastKernel = "fuser_max_pool_nhwc";

}  // namespace fuser::runtime
