// Stand-in for <cuda_runtime.h> in the CUDA emulator build (scripts/cuda-emulator/build.mjs):
// every native .cu file is compiled as plain C++ against this header and run on the CPU, one
// block at a time, its threads as cooperative fibers (emulator.cc). Just enough of the runtime
// API for the sinkflex sources; it checks indexing and synchronisation, not speed.
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDevice = 101,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef struct EmuStream* cudaStream_t;
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))
#define cudaStreamNonBlocking 0x1u

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  int major, minor, multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t err);
const char* cudaGetErrorName(cudaError_t err);
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}

namespace emu {

struct Coord {
  unsigned x, y, z;
};
Coord ThreadIdx();
const dim3& BlockIdx();
const dim3& BlockDim();
const dim3& GridDim();
void SyncThreads();
float ShflXor(float v, int laneMask);
/**
 * mma.sync.aligned.m16n8k16.row.col.f32.{bf16 (kind 0), f16 (kind 1)}.f32 over the fragments of the
 * 32 lanes of the calling warp (native/core/cuda_mma.cuh has the layout): d += A B, each output
 * the float64 sum of its exact products and its d, rounded once to float32.
 */
void MmaM16N8K16(int kind, float d[4], const unsigned a[4], const unsigned b[2]);
/** ldmatrix.sync.aligned.m8n8.x`count`[.trans].shared.b16: `row` is this lane's row address. */
void LdMatrix(int count, bool trans, const void* row, unsigned* r);
void* DynamicShared();
/** Runs `body` once per thread of every block of `grid` (blocks one after another). */
void Launch(dim3 grid, dim3 block, std::size_t sharedBytes, std::function<void()> body);

template <typename... P>
struct Launcher {
  void (*kernel)(P...);
  dim3 grid, block;
  std::size_t shared;
  template <typename... A>
  void operator()(A&&... args) const {
    std::tuple<P...> params(static_cast<P>(std::forward<A>(args))...);
    auto k = kernel;
    Launch(grid, block, shared, [k, params]() { std::apply(k, params); });
  }
};
template <typename... P>
Launcher<P...> MakeLauncher(void (*k)(P...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t) {
  return Launcher<P...>{k, grid, block, shared};
}

}  // namespace emu

#define SFX_LAUNCH(kernel, grid, block, smem, stream) ::emu::MakeLauncher(kernel, dim3(grid), dim3(block), smem, stream)
#define SFX_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::emu::DynamicShared())
#define threadIdx (::emu::ThreadIdx())
#define blockIdx (::emu::BlockIdx())
#define blockDim (::emu::BlockDim())
#define gridDim (::emu::GridDim())
#define __syncthreads() ::emu::SyncThreads()
#define __shfl_xor_sync(mask, v, laneMask) ::emu::ShflXor((v), (laneMask))
