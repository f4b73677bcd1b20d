// Internal to the CPU transformer (transformer_train.cc, transformer_infer.cc): access to a
// parameter's values and gradient whatever its storage (float32 or bfloat16) and trainability,
// and the projections over such weights.
#pragma once

#include <cstdint>

#include "gemm.h"
#include "kernel_table.h"
#include "moe.h"
#include "ops.h"
#include "param_store.h"

namespace sinkflex::model {

/** The float32 values of an optional parameter (null when absent). */
inline float* Val(const Parameter* p) { return p ? const_cast<float*>(p->value.data()) : nullptr; }
/** The gradient of an optional parameter: null when absent or frozen (no gradient accumulates). */
inline float* Grad(const Parameter* p) { return p && p->trainable() ? const_cast<float*>(p->grad.data()) : nullptr; }
/** A weight matrix as the kernels take it: float32 values, bfloat16 bits or MXFP4 blocks and scales (experts only). */
inline WeightData Weights(const Parameter* p) {
  if (p->mxfp4()) return WeightData{p->blocks.data(), false, p->scales.data()};
  return p->bf16() ? WeightData{p->value16.data(), true} : WeightData{p->value.data(), false};
}

/**
 * y[T, out] = x[T, in] . W^T (+ b), or y += that with `accumulate` (a projection added onto the
 * residual stream); W float32 or bfloat16.
 */
inline void Project(const float* x, const Parameter* w, const Parameter* b, float* y, std::int64_t T, std::int64_t in,
                    std::int64_t out, bool accumulate) {
  if (!accumulate) {
    if (w->bf16())
      LinearForwardBf16(x, w->value16.data(), Val(b), y, T, in, out);
    else
      LinearForward(x, w->value.data(), Val(b), y, T, in, out);
    return;
  }
  const WeightData wd = Weights(w);
  GemmMixed(false, true, T, out, in, 1.0f, x, false, in, wd.data, wd.bf16, in, 1.0f, y, out);
  if (b != nullptr) {
    const KernelTable& kt = ActiveKernels();
    for (std::int64_t t = 0; t < T; ++t) kt.add(y + t * out, b->value.data(), out);
  }
}

/**
 * The backward of Project: dx (= or += with accumulateDx; may be null), and the weight and bias
 * gradients (+=) of those that are trainable.
 */
inline void ProjectBackward(const float* x, const Parameter* w, const Parameter* b, const float* dy, float* dx,
                            std::int64_t T, std::int64_t in, std::int64_t out, bool accumulateDx) {
  if (w->bf16())
    LinearBackwardBf16(w->value16.data(), dy, dx, Grad(b), T, in, out, accumulateDx);
  else
    LinearBackward(x, w->value.data(), dy, dx, Grad(w), Grad(b), T, in, out, accumulateDx);
}

}  // namespace sinkflex::model
