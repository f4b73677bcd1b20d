// CUDA device discovery and tracked device memory over the statically linked CUDA runtime.
// On a machine without a driver or GPU, discovery reports the reason instead of failing.
#include <cuda_runtime.h>

#include <mutex>

#include "allocator.h"
#include "cuda_check.cuh"
#include "cuda_device.h"
#include "errors.h"

namespace sinkflex {
namespace {

struct Discovery {
  std::vector<CudaDeviceInfo> devices;
  std::string reason;
};

const Discovery& Discover() {
  static const Discovery d = [] {
    Discovery out;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      out.reason = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
      if (err == cudaErrorInsufficientDriver) out.reason += " (no NVIDIA driver, or one older than this CUDA runtime)";
      cudaGetLastError();  // clear the sticky error state
      return out;
    }
    if (count == 0) {
      out.reason = "no CUDA device is present";
      return out;
    }
    for (int i = 0; i < count && i < kMaxDevices - 1; ++i) {
      cudaDeviceProp prop;
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
      CudaDeviceInfo info;
      info.index = i;
      info.name = prop.name;
      info.totalMemory = prop.totalGlobalMem;
      info.major = prop.major;
      info.minor = prop.minor;
      info.multiProcessors = prop.multiProcessorCount;
      out.devices.push_back(info);
    }
    if (out.devices.empty()) out.reason = "CUDA devices were found but none could be queried";
    return out;
  }();
  return d;
}

}  // namespace

bool CudaCompiled() { return true; }

const std::vector<CudaDeviceInfo>& CudaDevices() { return Discover().devices; }

std::string CudaUnavailableReason() { return Discover().reason; }

void* DeviceAlloc(int index, std::size_t bytes, const char* what) {
  if (index < 0 || index >= static_cast<int>(CudaDevices().size())) {
    throw DeviceError("cuda:" + std::to_string(index) + " is not available: " + CudaUnavailableReason());
  }
  const int slot = index + 1;
  Reserve(slot, bytes, what);
  void* ptr = nullptr;
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err == cudaSuccess) err = cudaSetDevice(index);
  if (err == cudaSuccess && bytes) err = cudaMalloc(&ptr, bytes);
  cudaSetDevice(previous);
  if (err != cudaSuccess) {
    cudaGetLastError();
    Release(slot, bytes);
    if (err == cudaErrorMemoryAllocation) {
      throw OutOfMemoryError(DeviceName(slot), bytes, GetMemoryStats(slot).current, 0, what);
    }
    throw DeviceError(std::string("cudaMalloc for ") + what + " failed: " + cudaGetErrorString(err));
  }
  return ptr;
}

void DeviceFree(int index, void* ptr, std::size_t bytes) {
  if (!ptr) return;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(index);
  cudaFree(ptr);  // errors here (a broken context) cannot be acted on; the bytes are released
  cudaSetDevice(previous);
  Release(index + 1, bytes);
}

namespace {

void RequireDevice(int index) {
  if (index < 0 || index >= static_cast<int>(CudaDevices().size())) {
    throw DeviceError("cuda:" + std::to_string(index) + " is not available: " + CudaUnavailableReason());
  }
}

// A synchronous copy on the calling thread's default stream: when it returns the data has
// arrived (also for pageable host memory, where cudaMemcpy may return before the DMA ends).
void Copy(int index, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  RequireDevice(index);
  if (bytes == 0) return;
  DeviceGuard guard(index);
  SFX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamPerThread));
  SFX_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
}

}  // namespace

void CopyToDevice(int index, void* dst, const void* src, std::size_t bytes) {
  Copy(index, dst, src, bytes, cudaMemcpyHostToDevice);
}

void CopyToHost(int index, void* dst, const void* src, std::size_t bytes) {
  Copy(index, dst, src, bytes, cudaMemcpyDeviceToHost);
}

void CopyOnDevice(int index, void* dst, const void* src, std::size_t bytes) {
  Copy(index, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

}  // namespace sinkflex
