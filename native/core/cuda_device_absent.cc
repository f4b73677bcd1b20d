// CUDA entry points for a binary built without CUDA: no devices, and a clear reason.
#ifndef SINKFLEX_WITH_CUDA
#include "cuda_device.h"
#include "errors.h"

namespace sinkflex {

bool CudaCompiled() { return false; }

const std::vector<CudaDeviceInfo>& CudaDevices() {
  static const std::vector<CudaDeviceInfo> none;
  return none;
}

std::string CudaUnavailableReason() {
  return "this sinkflex-rl binary was built without CUDA (rebuild with `npm run build:cuda` where nvcc is installed)";
}

void* DeviceAlloc(int, std::size_t, const char*) { throw DeviceError(CudaUnavailableReason()); }

void DeviceFree(int, void*, std::size_t) {}

void CopyToDevice(int, void*, const void*, std::size_t) { throw DeviceError(CudaUnavailableReason()); }
void CopyToHost(int, void*, const void*, std::size_t) { throw DeviceError(CudaUnavailableReason()); }
void CopyOnDevice(int, void*, const void*, std::size_t) { throw DeviceError(CudaUnavailableReason()); }

}  // namespace sinkflex
#endif
