// Parameters of the (clamped) SwiGLU of the model ops.
// Reference: docs/design.md, "The built-in model — semantics" (SwiGLU); float64 reference:
//   refSwiGlu in test/model/fixtures/reference.ts.
// Tests: test/model/rope-swiglu.test.ts, mlp-block.test.ts.
#pragma once

namespace sinkflex::model {

/**
 * Parameters of the gated linear unit out = g * sigmoid(alpha * g) * (u + upBias), where g
 * is the gate and u the up projection, optionally clamped first (limit > 0): g to
 * (-inf, limit], u to [-limit, limit].
 */
struct SwiGluParams {
  float alpha = 1.0f;   // 1: silu(g) = g * sigmoid(g)
  float limit = 0.0f;   // 0: no clamping
  float upBias = 0.0f;  // 0: standard SwiGLU

  /** silu(g) * u (Shazeer 2020; Llama). */
  static SwiGluParams Standard() { return {1.0f, 0.0f, 0.0f}; }
  /** gpt-oss: alpha 1.702, limit 7, (u + 1). */
  static SwiGluParams GptOss() { return {1.702f, 7.0f, 1.0f}; }
};

}  // namespace sinkflex::model
