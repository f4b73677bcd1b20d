// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU transformer
//   (itself checked against test/model/fixtures/transformer-reference.ts).
// Tests: test/model/transformer-cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Internal to the CUDA path of the transformer (transformer_device_train.cc and
// transformer_device_infer.cc): the kernel tables it runs over and the device activations a
// training forward keeps. Plain C++: every kernel is reached through a registered table, so
// these files compile in every build (without CUDA no store, hence no model, is on a device).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../attention/sink_attention.h"
#include "../core/device_buffer.h"
#include "device_kernels.h"
#include "moe_device.h"
#include "ops_table.h"
#include "transformer.h"

namespace sinkflex::model {

/** The CUDA tables and the device the work runs on (made current by Get). */
struct DeviceContext {
  const ModelOps& ops;
  const DeviceKernels& kernels;
  const attention::CudaBackend& attention;
  int device;

  /** The tables with `device` made current for the calling thread; DeviceError when absent. */
  static DeviceContext Get(int device);
  /** `n` uninitialised floats of device memory. */
  DeviceBuffer<float> Floats(std::int64_t n, const char* what) const {
    return DeviceBuffer<float>(device, static_cast<std::size_t>(n), what);
  }
  /** A device copy of n floats of device memory. */
  DeviceBuffer<float> Copy(const float* src, std::int64_t n, const char* what) const;
  /** A device copy of n host ints. */
  DeviceBuffer<std::int32_t> Upload(const std::int32_t* src, std::int64_t n, const char* what) const;
  /** A device copy of n host floats (an empty buffer when src is null). */
  DeviceBuffer<float> Upload(const float* src, std::int64_t n, const char* what) const;
  /**
   * y[T, out] = x[T, in] . W^T (+ b), or y += that with `accumulate` (a projection added onto the
   * residual stream); W float32 or bfloat16 (widened exactly inside the GEMM).
   */
  void Project(const float* x, const Parameter* w, const Parameter* b, float* y, std::int64_t T, std::int64_t in,
               std::int64_t out, bool accumulate) const;
  /** y[T, out] += x[T, in] . W^T (+ b): Project with accumulate. */
  void LinearAdd(const float* x, const Parameter* w, const Parameter* b, float* y, std::int64_t T, std::int64_t in,
                 std::int64_t out) const {
    Project(x, w, b, y, T, in, out, true);
  }
  /**
   * The backward of Project: dx (= or += with accumulateDx; may be null), and the weight and
   * bias gradients (+=) of those that are trainable (a bfloat16 weight is frozen).
   */
  void ProjectBackward(const float* x, const Parameter* w, const Parameter* b, const float* dy, float* dx,
                       std::int64_t T, std::int64_t in, std::int64_t out, bool accumulateDx) const;
  /** out[T, D] = table[ids] for the embedding table `w` (float32 or bfloat16). */
  void Embed(const Parameter* w, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t V,
             std::int64_t D) const;
  /** The CUDA MoE layer (DeviceError when this build has none). */
  const DeviceMoe& Moe() const;
};

/** The device float32 value of an optional parameter (null when absent; a bfloat16 one has none). */
inline float* DVal(const Parameter* p) { return p ? p->dValue.data() : nullptr; }
/** The device gradient of an optional parameter: null when absent or frozen (no gradient accumulates). */
inline float* DGrad(const Parameter* p) { return p && p->trainable() ? p->dGrad.data() : nullptr; }
/** A device weight matrix as the kernels take it: float32 values, bfloat16 bits or MXFP4 blocks and scales (experts
 * only). */
inline WeightData DWeights(const Parameter* p) {
  if (p->mxfp4()) return WeightData{p->dBlocks.data(), false, p->dScales.data()};
  return p->bf16() ? WeightData{p->dValue16.data(), true} : WeightData{p->dValue.data(), false};
}

/** The CUDA MoE's view of a block's router and experts (device pointers). */
MoeParams DeviceMoeParams(const ModelConfig& c, const BlockParams& p);

/**
 * lora.h's LoraForward on the device: t[T, r] = x[T, in] A^T, then y (row stride ldy) +=
 * scale t B^T, for the adapter (A [r, in], B [out, r], float32 device values) of a projection.
 */
void DeviceLoraForward(const DeviceContext& cx, const Parameter* A, const Parameter* B, float scale, const float* x,
                       float* t, float* y, std::int64_t ldy, std::int64_t T, std::int64_t in, std::int64_t out,
                       std::int64_t r);
/**
 * lora.h's LoraBackward on the device for the output gradient dy (row stride ldy): dB += scale
 * dy^T t, dt = scale dy B (scratch [T, r]), dA += dt^T x, dx += dt A (the gradients of frozen
 * adapters and a null dx are skipped).
 */
void DeviceLoraBackward(const DeviceContext& cx, const Parameter* A, const Parameter* B, float scale, const float* x,
                        const float* t, const float* dy, std::int64_t ldy, float* dx, float* dt, std::int64_t T,
                        std::int64_t in, std::int64_t out, std::int64_t r);

/** Activations one layer keeps for its backward, in device memory (LayerActivations' twin). */
struct DeviceLayerActivations {
  DeviceBuffer<float> x, n1, rstd1, q, k, v, ao, lse, xmid, n2, rstd2, h, act;
  DeviceBuffer<float> qRaw, kRaw, rstdQ, rstdK;   // qkNorm: q, k before their norm; rstd per head row
  std::unique_ptr<attention::DeviceSaved> eager;  // probabilities (eager only)
  DeviceMoeSaved moe;                             // the experts' activations (MoE)
  DeviceBuffer<float> loraT[kLoraTargets];        // [T, rank] x A^T of each adapted projection (LoRA)
};

/** What a forward on the GPU keeps for its backward (TrainState::device; TrainState keeps the host ids and masks). */
struct DeviceTrainState {
  bool saved = false;
  DeviceBuffer<std::int32_t> tokens, targets, positions;
  std::vector<DeviceLayerActivations> layers;
  DeviceBuffer<float> xf, nf, rstdf, logits, lse, entropy;
};

}  // namespace sinkflex::model
