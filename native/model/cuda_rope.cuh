// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU ops and the
//   float64 reference test/model/fixtures/reference.ts.
// Tests: test/model/cuda-ops.test.ts (on a GPU, or on the CUDA emulator without one),
//   transformer-cuda.test.ts.
// The rotate-half RoPE kernel (ops.h RopeForward; sign -1 applies the transpose, RopeBackward) over
// x[T, H, Dh] with cos/sin tables [positions, Dh / 2] already in device memory, one thread per
// (row, head, pair). Shared by the model ops (cuda_ops.cu: tables uploaded per call) and the
// transformer's device kernels (cuda_transformer.cu: tables resident on the device). out may be x.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sinkflex::model::cuda {
namespace {

__global__ void RopeKernel(const float* x, float* out, const std::int32_t* pos, long long T, long long H, long long Dh,
                           const float* cosT, const float* sinT, float sign) {
  const long long half = Dh / 2;
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * H * half) return;
  const long long i = e % half, rh = e / half, r = rh / H;
  const long long p = pos[r];
  const float c = cosT[p * half + i], s = sinT[p * half + i] * sign;
  const float x1 = x[rh * Dh + i], x2 = x[rh * Dh + half + i];
  out[rh * Dh + i] = x1 * c - x2 * s;
  out[rh * Dh + half + i] = fmaf(x1, s, x2 * c);
}

}  // namespace
}  // namespace sinkflex::model::cuda
