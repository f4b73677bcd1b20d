// CUDA device discovery, tracked device memory and host<->device copies. With
// SINKFLEX_WITH_CUDA the functions are implemented in cuda_device.cu over the (statically
// linked) CUDA runtime; without it, cuda_device_absent.cc reports that the addon was built
// without CUDA. This header is plain C++: host code (bindings, tensor storage) may call it in
// every build; kernels and launches live in .cu files (see cuda_check.cuh).
//
// Every function throws DeviceError (with the CUDA error string) or OutOfMemoryError; none
// aborts. Copies are synchronous: when they return, the data has arrived.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sinkflex {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::size_t totalMemory = 0;
  int major = 0;
  int minor = 0;
  int multiProcessors = 0;
};

/** True when this binary contains CUDA kernels. */
bool CudaCompiled();
/** The usable devices (empty without CUDA, without a driver, or without a GPU). */
const std::vector<CudaDeviceInfo>& CudaDevices();
/** Why CudaDevices() is empty ("" when it is not). */
std::string CudaUnavailableReason();
/** Tracked cudaMalloc on device `index` (throws OutOfMemoryError / DeviceError). */
void* DeviceAlloc(int index, std::size_t bytes, const char* what);
void DeviceFree(int index, void* ptr, std::size_t bytes);
/** Copies `bytes` from host memory to device memory of device `index` (synchronous). */
void CopyToDevice(int index, void* dst, const void* src, std::size_t bytes);
/** Copies `bytes` from device memory of device `index` to host memory (synchronous). */
void CopyToHost(int index, void* dst, const void* src, std::size_t bytes);
/** Copies `bytes` between two buffers of device `index` (synchronous). */
void CopyOnDevice(int index, void* dst, const void* src, std::size_t bytes);

}  // namespace sinkflex
