// Keys of cached values: the inputs of a cached computation written out as numbers, so
// that equal keys mean the computation would give the same result again
// (runtime/per_shape_values_op.cpp, runtime/relayout_op.cpp).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace fuser::runtime {

using ValueKey = std::vector<int64_t>;

// The device; on CUDA also the current device and its current stream, on which values
// made now are ordered.
void addDeviceToKey(ValueKey& key, const c10::Device& device);

// Appends `value`: a number, None, a list of numbers, a device, or a tensor's dtype,
// layout, rank, device, sizes and strides (not its data). False for anything else (a
// tensor of another layout, a string, an object), which no key can stand for.
bool addValueToKey(ValueKey& key, const c10::IValue& value);

}  // namespace fuser::runtime
