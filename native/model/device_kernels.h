// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU transformer
//   (itself checked against test/model/fixtures/transformer-reference.ts).
// Tests: test/model/transformer-cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The small CUDA kernels that the device transformer and the device parameter store need
// besides the model ops (ops_table.h): fill, add, bias rows, RoPE over tables kept in device
// memory, a row gather, and the attention of a few new query rows per session against that
// session's KV cache (decoding). Registered by native/model/cuda_transformer.cu in CUDA builds
// (GetCudaDeviceKernels() is null otherwise). Like the CUDA model ops they run on the current
// device (ModelOps::useDevice), take device pointers unless noted, and return when done.
// Plain C++.
#pragma once

#include <cstdint>

namespace sinkflex::model {

/**
 * One query row of decodeAttention: its row `index` in q and out, the cache of its session and
 * the keys it sees, rows [lo, lo + count) of that cache (device pointers, rows of
 * kvHeads * headDim floats).
 */
struct DecodeRow {
  std::int64_t index = 0;
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t lo = 0;
  std::int64_t count = 0;
};

struct DeviceKernels {
  /** x[i] = value for i < n. */
  void (*fill)(float* x, std::int64_t n, float value);
  /** y[i] += x[i] for i < n. */
  void (*add)(float* y, const float* x, std::int64_t n);
  /** y[r, c] += b[c] for y[rows, cols]. */
  void (*addRows)(float* y, const float* b, std::int64_t rows, std::int64_t cols);
  /**
   * Rotate-half RoPE of x[T, H, headDim] (ops.h RopeForward; `inverse` applies the transpose,
   * RopeBackward) with cos/sin tables [maxPositions, headDim / 2] in device memory. out may be x.
   */
  void (*rope)(const float* cosT, const float* sinT, std::int64_t headDim, const float* x, float* out,
               const std::int32_t* pos, std::int64_t T, std::int64_t H, bool inverse);
  /** out[r] = x[rows[r]] for rows of `cols` floats (rows: device int32 [R]). */
  void (*gatherRows)(const float* x, const std::int32_t* rows, float* out, std::int64_t R, std::int64_t cols);
  /**
   * Sink attention of R query rows of q[*, H, Dh] against their sessions' caches (`rows`: host
   * array of R entries, uploaded by the call; out gets the same rows): for a row and head h
   * (kv head h / (H / KV)),
   * z_j = q.k_j / sqrt(Dh) over the row's keys, out = sum_j exp(z_j - m) v_j /
   * (sum_j exp(z_j - m) + exp(sinks[h] - m)) — the semantics of the fused attention with the
   * row's keys as its allowed set. Deterministic (fixed reduction order).
   */
  void (*decodeAttention)(const DecodeRow* rows, std::int64_t R, const float* q, const float* sinks, float* out,
                          std::int64_t H, std::int64_t KV, std::int64_t Dh);
};

/** Registers the CUDA table (once, at load, from cuda_transformer.cu). */
void RegisterCudaDeviceKernels(const DeviceKernels* kernels);
/** The CUDA table, or null in builds without CUDA. */
const DeviceKernels* GetCudaDeviceKernels();

}  // namespace sinkflex::model
