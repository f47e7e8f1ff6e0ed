#include "runtime/cuda/stream_capture.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/cuda/driver_library.h"

namespace fuser::cuda {

bool currentStreamCapturing(c10::Device device) {
  if (!device.is_cuda() || !driverAvailable()) return false;
  const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  CUstream stream = impl->getStream(device).native_handle();
  StreamCaptureStatus status = StreamCaptureStatus::kNone;
  if (driver().streamIsCapturing(stream, &status) != kCudaSuccess) return true;
  return status != StreamCaptureStatus::kNone;
}

}  // namespace fuser::cuda
