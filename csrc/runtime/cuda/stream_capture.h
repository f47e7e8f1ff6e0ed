// Whether PyTorch's current stream on a device is being captured into a CUDA graph
// (torch.cuda.graph). While it is, nothing may synchronize the device or read a GPU
// value back to the host: the work is recorded, not run. The first-run steps that time
// or check on the device (kernel variants, the cuDNN mask check, checks of frozen
// constants) ask this first and are left for a call outside the capture.
#pragma once

#include <c10/core/Device.h>

namespace fuser::cuda {

// False for devices other than CUDA and where the driver is unavailable; true where the
// driver cannot tell (the legacy default stream while another thread captures).
bool currentStreamCapturing(c10::Device device);

}  // namespace fuser::cuda
