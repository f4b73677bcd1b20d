// Helpers for .cu files: checking every CUDA runtime call and kernel launch (errors become
// sinkflex::DeviceError naming the call, the file and line and the CUDA error; nothing
// aborts), a device guard that makes a device current for a scope, and an owned stream.
//
//   SFX_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
//   MyKernel<<<grid, block, smem, stream>>>(args...);
//   SFX_CUDA_LAUNCH_CHECK("MyKernel");   // launch errors (bad configuration, no kernel image)
//   stream.Synchronize();                // errors raised while the kernels ran
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "errors.h"

namespace sinkflex {

/** Throws DeviceError "<what> failed at file:line: <cuda error>" unless err is cudaSuccess. */
inline void CudaCheck(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so later calls can proceed
  throw DeviceError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

#define SFX_CUDA_CHECK(expr) ::sinkflex::CudaCheck((expr), #expr, __FILE__, __LINE__)

// Kernel launches and dynamic shared memory go through these two macros so that the CUDA
// emulator (scripts/cuda-emulator: every .cu compiled as C++ and run on the CPU, for checking
// kernels without a GPU) can replace them.
#ifndef SFX_LAUNCH
/** `SFX_LAUNCH(kernel, grid, block, sharedBytes, stream)(args...)` = kernel<<<grid, block, sharedBytes,
 * stream>>>(args...). */
#define SFX_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif
#ifndef SFX_DYNAMIC_SHARED
/** Declares the dynamic shared memory of a kernel as `type name[]`. */
#define SFX_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif
/** Checks the launch just made (call right after `kernel<<<...>>>(...)`). */
#define SFX_CUDA_LAUNCH_CHECK(name) ::sinkflex::CudaCheck(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)

/** Makes `device` current for the scope and restores the previous device after. */
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    SFX_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) SFX_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/**
 * An owned non-blocking stream of the current device. Work of one call runs on its own
 * stream; Synchronize() waits for it and reports errors raised while it ran. The destructor
 * waits too (ignoring errors) so buffers freed after it are no longer in use.
 */
class CudaStream {
 public:
  CudaStream() { SFX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  void Synchronize() const { SFX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

/** ceil(a / b) for positive b. */
template <typename T>
__host__ __device__ inline T CeilDiv(T a, T b) {
  return (a + b - 1) / b;
}

}  // namespace sinkflex
