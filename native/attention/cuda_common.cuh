// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Shared pieces of the CUDA sink-attention kernels (cuda_*.cu): the parameters every kernel
// gets, the mask program evaluated on the device (for partial tiles and the eager dense mask),
// element conversions (fp32 / bf16 / fp16 in, fp32 arithmetic) and the host-side plan that uploads
// the tile classification and the mask.
//
// Tiles: the kernels walk 64 x 64 (query, key) tiles classified like the CPU block mask
// (empty tiles are never visited, full tiles are never masked per element, partial tiles
// evaluate the mask per element). A block mask of another block size is converted to 64-tiles
// by combining the states of the blocks each tile overlaps (exact for multiples of 64; a tile
// only becomes partial where a finer block mask would have skipped part of it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/cuda_mma.cuh"
#include "../core/device_buffer.h"
#include "sink_attention.h"

namespace sinkflex::attention::cuda {

/** Tile size of the tile classification (both sides). */
constexpr int kTile = 64;
/** Largest headDim of the fused kernels. */
constexpr std::int64_t kMaxFusedHeadDim = 256;

/** One postfix step of the mask program on the device (see MaskProgram::Postfix). */
struct DevMaskOp {
  int kind;  // DevMaskKind
  int pad;
  long long value;      // window / prefix
  long long idsOffset;  // documents: offset of this leaf's ids in DevMask::ids
  long long idsStride;  // documents: kvLen
};
enum DevMaskKind : int { kOpAll, kOpCausal, kOpWindow, kOpPrefix, kOpDocuments, kOpAnd, kOpOr, kOpNot };

struct DevMask {
  const DevMaskOp* ops = nullptr;
  int count = 0;
  const std::int32_t* ids = nullptr;
};

/** Tile classification on the device (64-tiles; one entry per batch row with documents, else 1). */
struct DevTiles {
  const std::uint8_t* states = nullptr;  // [entries][qTiles][kTiles], BlockState values
  const std::int32_t* kvPtr = nullptr;   // [entries * qTiles + 1]: non-empty key tiles of each query tile
  const std::int32_t* kvIdx = nullptr;
  const std::int32_t* qPtr = nullptr;  // [entries * kTiles + 1]: non-empty query tiles of each key tile
  const std::int32_t* qIdx = nullptr;
  int qTiles = 0, kTiles = 0, entries = 1;
};

/** Sizes, options, mask and tiles of one call. */
struct AttnParams {
  long long B = 1, T = 1, Tk = 1, Hq = 1, Hkv = 1, D = 1, G = 1, qOffset = 0;
  float scale = 1.0f, softcap = 0.0f;
  DevMask mask;
  DevTiles tiles;
};

/** Is key j visible to query position i (absolute) in batch entry b? Stack of bits, top = bit 0. */
__device__ __forceinline__ bool MaskAllowed(const DevMask& m, long long b, long long i, long long j) {
  unsigned long long st = 0;
  for (int p = 0; p < m.count; ++p) {
    const DevMaskOp op = m.ops[p];
    bool v;
    switch (op.kind) {
      case kOpAll:
        v = true;
        break;
      case kOpCausal:
        v = j <= i;
        break;
      case kOpWindow: {
        const long long d = i >= j ? i - j : j - i;
        v = d <= op.value - 1;
        break;
      }
      case kOpPrefix:
        v = j < op.value;
        break;
      case kOpDocuments: {
        const std::int32_t* row = m.ids + op.idsOffset + b * op.idsStride;
        v = row[i] == row[j];
        break;
      }
      case kOpAnd:
      case kOpOr: {
        const bool top = st & 1ull;
        st >>= 1;
        const bool below = st & 1ull;
        st >>= 1;
        v = op.kind == kOpAnd ? (top && below) : (top || below);
        break;
      }
      default: {  // kOpNot
        v = !(st & 1ull);
        st >>= 1;
        break;
      }
    }
    st = (st << 1) | (v ? 1ull : 0ull);
  }
  return st & 1ull;
}

// ---- element conversions ----------------------------------------------------------------------

/**
 * IEEE half (float16) in device memory, as its bits: the kernels' own element type (converted with
 * cvt on the GPU, in plain C++ on the emulator; no cuda_fp16.h needed).
 */
struct alignas(2) F16 {
  std::uint16_t bits;
};

__device__ __forceinline__ float ToF(float x) { return x; }
__device__ __forceinline__ float ToF(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToF(F16 x) { return ::sinkflex::mma::F16Float(x.bits); }
template <typename T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ float FromF<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ F16 FromF<F16>(float x) {
  return F16{::sinkflex::mma::F16Bits(x)};
}

// ---- host side ------------------------------------------------------------------------------

/**
 * The uploaded mask program and 64-tile classification of one call (tracked device memory,
 * freed with the plan). `withTiles` = false uploads only the mask (the eager kernels).
 */
class DevicePlan {
 public:
  DevicePlan(int device, const Shape& shape, const Options& opts, bool withTiles);
  const AttnParams& params() const { return params_; }
  /** Number of (query tile, key tile) pairs of each state, summed over entries. */
  std::int64_t count(BlockState s) const { return counts_[s]; }

 private:
  AttnParams params_;
  std::int64_t counts_[3] = {0, 0, 0};
  DeviceBuffer<DevMaskOp> ops_;
  DeviceBuffer<std::int32_t> ids_;
  DeviceBuffer<std::uint8_t> states_;
  DeviceBuffer<std::int32_t> kvPtr_, kvIdx_, qPtr_, qIdx_;
};

/** Throws DeviceError unless the current device lets a block use `bytes` of dynamic shared memory. */
void RequireSharedMemory(std::size_t bytes, const char* kernel);

/** bf16 bits as the CUDA type. */
inline const __nv_bfloat16* AsBf16(const void* p) { return static_cast<const __nv_bfloat16*>(p); }
inline __nv_bfloat16* AsBf16(void* p) { return static_cast<__nv_bfloat16*>(p); }
/** fp16 bits as the kernels' F16. */
inline const F16* AsF16(const void* p) { return static_cast<const F16*>(p); }
inline F16* AsF16(void* p) { return static_cast<F16*>(p); }

// Launchers (cuda_fused_fwd.cu, cuda_fused_bwd.cu, cuda_eager.cu); the caller holds a DeviceGuard.
void LaunchFusedForward(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream);
void LaunchFusedBackward(int device, const AttnParams& p, const DeviceBackwardArgs& a, cudaStream_t stream);
/** The backward's first steps (cuda_fused_bwd.cu): delta = dO.o - dLse per row into `delta`, and dSinks. */
void LaunchBackwardPrologue(const AttnParams& p, const DeviceBackwardArgs& a, float* delta, cudaStream_t stream);
// The tensor-core kernels (cuda_fused_tc_fwd.cu, cuda_fused_tc_bwd.cu): bf16 or fp16 inputs, headDim <= 128, sm_80+.
void LaunchTensorCoreForward(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream);
void LaunchTensorCoreBackward(int device, const AttnParams& p, const DeviceBackwardArgs& a, cudaStream_t stream);
void RunEagerForward(int device, const Shape& shape, const Options& opts, const DeviceForwardArgs& a,
                     std::unique_ptr<DeviceSaved>* save);
void RunEagerBackward(int device, const Shape& shape, const Options& opts, const DeviceBackwardArgs& a,
                      const DeviceSaved* saved);

}  // namespace sinkflex::attention::cuda
