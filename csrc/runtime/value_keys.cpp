#include "runtime/value_keys.h"

#include <ATen/Tensor.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/bit_cast.h>

namespace fuser::runtime {

void addDeviceToKey(ValueKey& key, const c10::Device& device) {
  key.push_back(static_cast<int64_t>(device.type()));
  key.push_back(device.index());
  if (device.is_cuda()) {
    c10::impl::VirtualGuardImpl guard(device.type());
    const c10::Device current = device.has_index() ? device : guard.getDevice();
    key.push_back(current.index());
    key.push_back(static_cast<int64_t>(guard.getStream(current).id()));
  }
}

bool addValueToKey(ValueKey& key, const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    key.insert(key.end(), {1, static_cast<int64_t>(t.scalar_type()),
                           static_cast<int64_t>(t.layout()), t.dim()});
    addDeviceToKey(key, t.device());
    if (t.layout() != c10::kStrided) return false;
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
    key.insert(key.end(), t.strides().begin(), t.strides().end());
  } else if (value.isInt()) {
    key.insert(key.end(), {2, value.toInt()});
  } else if (value.isDouble()) {
    key.insert(key.end(), {3, c10::bit_cast<int64_t>(value.toDouble())});
  } else if (value.isBool()) {
    key.insert(key.end(), {4, value.toBool()});
  } else if (value.isNone()) {
    key.push_back(5);
  } else if (value.isDevice()) {
    key.push_back(6);
    addDeviceToKey(key, value.toDevice());
  } else if (value.isIntList()) {
    auto list = value.toIntList();
    key.insert(key.end(), {7, static_cast<int64_t>(list.size())});
    for (int64_t v : list) key.push_back(v);
  } else if (value.isDoubleList()) {
    auto list = value.toDoubleList();
    key.insert(key.end(), {8, static_cast<int64_t>(list.size())});
    for (double v : list) key.push_back(c10::bit_cast<int64_t>(v));
  } else if (value.isBoolList()) {
    auto list = value.toBoolList();
    key.insert(key.end(), {9, static_cast<int64_t>(list.size())});
    for (bool v : list) key.push_back(v);
  } else {
    return false;
  }
  return true;
}

}  // namespace fuser::runtime
