// Reference: docs/design.md, "The built-in model — semantics" (the MoE layer, moe.h); checked
//   against the CPU MoeForward/MoeBackward and the float64 reference
//   test/model/fixtures/moe-reference.ts.
// Tests: test/model/cuda-moe.test.ts, transformer-cuda-architectures.test.ts (on a GPU, or on the
//   CUDA emulator without one).
// The mixture-of-experts layer of moe.h on a CUDA device: the same semantics over device
// pointers (MoeParams, MoeGrads and the activations all in device memory). Router logits by a
// GEMM (+ bias rows), the top-k and the softmax over the chosen k by one thread per token (ties
// to the lower expert index; the softmax in double, as on the CPU), then a plan made on the host
// from the chosen experts (a counting sort by expert, tokens ascending within an expert: the
// CPU's grouping, row for row), gathered rows, one grouped GEMM launch per stage over the experts
// that have tokens (never a loop over all experts), SwiGLU, and each token's k contributions
// summed in slot order (no atomics: the same bits every run). Registered by
// native/model/cuda_moe.cu in CUDA builds (GetCudaMoe() is null otherwise). Plain C++.
#pragma once

#include <cstdint>
#include <vector>

#include "../core/device_buffer.h"
#include "moe.h"

namespace sinkflex::model {

/** What an MoE forward on a CUDA device keeps for its backward (MoeSaved's twin). */
struct DeviceMoeSaved {
  std::int64_t T = 0;
  DeviceBuffer<std::int32_t> index;      // [T, k] chosen experts, slot order
  DeviceBuffer<float> weight;            // [T, k] their softmax weights
  std::vector<std::int64_t> offsets;     // [E + 1] (host) assignment rows of expert e: [offsets[e], offsets[e + 1])
  DeviceBuffer<std::int32_t> token;      // [T k] token of each assignment row (grouped by expert, tokens ascending)
  DeviceBuffer<std::int32_t> rowOf;      // [T k] assignment row of (t, s)
  DeviceBuffer<std::int32_t> rowExpert;  // [T k] expert of each assignment row
  DeviceBuffer<float> h;                 // [T k, 2F] gate_up outputs, by assignment row
  DeviceBuffer<float> act;               // [T k, F] SwiGLU outputs
  DeviceBuffer<float> y;                 // [T k, D] expert outputs (unweighted)

  /** Device bytes held. */
  std::size_t Bytes() const {
    return index.bytes() + weight.bytes() + token.bytes() + rowOf.bytes() + rowExpert.bytes() + h.bytes() +
           act.bytes() + y.bytes();
  }
};

/** The CUDA MoE entry points (device pointers; synchronous, on the current device). */
struct DeviceMoe {
  /** MoeForward of moe.h; `saved` (may be null) keeps what backward needs, `logits` [T, E] may be null. */
  void (*forward)(const MoeParams& p, const float* x, float* out, std::int64_t T, DeviceMoeSaved* saved, float* logits);
  /** MoeBackward of moe.h for the forward that filled `saved` with the same x (`use` as there). */
  void (*backward)(const MoeParams& p, const float* x, const float* dout, DeviceMoeSaved& saved, float* dx,
                   const MoeGrads& grads, bool accumulateDx, SavedUse use);
};

/** Registers the CUDA MoE (once, at load, from cuda_moe.cu). */
void RegisterCudaMoe(const DeviceMoe* moe);
/** The CUDA MoE, or null in builds without CUDA. */
const DeviceMoe* GetCudaMoe();

}  // namespace sinkflex::model
