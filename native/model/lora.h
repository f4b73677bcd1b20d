// Reference: docs/models.md, "LoRA"; float64 reference: the LoRA terms of
//   test/model/fixtures/transformer-reference.ts.
// Tests: test/model/lora-transformer.test.ts (forward, every adapter gradient against float64 and
//   finite differences, inference = training forward), test/model/lora-merge.test.ts.
// Low-rank adapters (LoRA, Hu et al. 2021, as PEFT computes them) on a frozen projection
// y = x W^T (+ b): the adapter adds scale (x A^T) B^T with A [r, in] and B [out, r] (float32),
// scale = alpha / r (or alpha / sqrt r, rsLoRA). These helpers add that term and its backward on
// top of the projection's own; each is a few GEMMs (deterministic whatever the thread count).
#pragma once

#include <cstdint>

#include "param_store.h"

namespace sinkflex::model {

/**
 * t[T, r] = x[T, in] A^T, then y[T, out] += scale t B^T, where row t of y starts at y + t ldy
 * (ldy >= out: the adapter may write into a column range of a wider output, e.g. one half of
 * the fused gate_up).
 */
void LoraForward(const float* x, const float* a, const float* b, float scale, float* t, float* y, std::int64_t ldy,
                 std::int64_t T, std::int64_t in, std::int64_t out, std::int64_t r);

/**
 * The backward of LoraForward for the output gradient dy (rows of stride ldy): with
 * dt = scale dy B [T, r] (written into the scratch dt), dB += scale dy^T t, dA += dt^T x and
 * dx[T, in] += dt A. dA, dB or dx may be null (that term is skipped).
 */
void LoraBackward(const float* x, const float* a, const float* b, float scale, const float* t, const float* dy,
                  std::int64_t ldy, float* dx, float* dA, float* dB, float* dt, std::int64_t T, std::int64_t in,
                  std::int64_t out, std::int64_t r);

/**
 * Merges an adapter into its weight: rows [rowOffset, rowOffset + out) of w [rows, in] gain
 * scale B A (B [out, r], A [r, in], float32). The product is computed in float32 (a GEMM with
 * float32 accumulation); a float32 weight adds it in float32, a bfloat16 weight is widened,
 * added in float32 and rounded to the nearest bfloat16 (ties to even). CPU stores only. The
 * expert adapters merge as stacks: w [E, rows, in], A [E, r, in], B [E, out, r], expert by expert.
 * An MXFP4 weight is refused (it cannot take a float update without re-quantizing).
 */
void LoraMerge(Parameter& w, std::int64_t rowOffset, const Parameter& a, const Parameter& b, double scale);

}  // namespace sinkflex::model
