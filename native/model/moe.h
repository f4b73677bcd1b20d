// A mixture-of-experts MLP with gpt-oss semantics, on the CPU: a router picks each token's top-k
// experts and weighs them by a softmax over those k logits; each expert is a SwiGLU MLP. Tokens
// are grouped by expert (their rows gathered, one GEMM per expert that has tokens — never a
// dense loop over all experts); results do not depend on the thread count (each token's k
// contributions are summed in slot order).
//
//   logits[t] = x[t] Wr^T (+ br)                                  [T, E]
//   idx[t, 0..k) = the k largest logits (descending; ties: lower expert index first)
//   w[t, :] = softmax(logits[t, idx[t, :]])                       (over the chosen k only)
//   expert e: h = x We_gu^T (+ be_gu) [2F: F gate, then F up]; a = SwiGLU(h); y = a We_d^T (+ be_d)
//   out[t] = sum_{s < k} w[t, s] * expert_{idx[t, s]}(x[t])
//
// The backward gives dx, the expert weight and bias gradients and the router's through the
// softmax over the chosen k (the selection itself has no gradient). Weights may be float32 or
// bfloat16 bits, and the experts' MXFP4 (both frozen: no weight gradient), widened or decoded
// exactly inside the GEMMs (MXFP4 gives the same results as its bfloat16 dequantization); biases,
// activations and gradients are float32.
#pragma once

#include <cstdint>

#include "../core/allocator.h"
#include "swiglu_params.h"

namespace sinkflex::model {

/**
 * A read-only weight tensor stored as float32, as bfloat16 bits, or (the experts' matrices only)
 * as MXFP4: `scales` non-null, `data` the 4-bit blocks (mxfp4.h).
 */
struct WeightData {
  const void* data = nullptr;
  bool bf16 = false;
  const std::uint8_t* scales = nullptr;

  bool mxfp4() const { return scales != nullptr; }
  /** True when the weight has no gradient (bfloat16 and MXFP4 weights are frozen). */
  bool frozen() const { return bf16 || mxfp4(); }
};

/**
 * Per-expert LoRA adapters on the experts' matrices (PEFT's target_parameters on
 * mlp.experts.gate_up_proj / down_proj): expert e's gate_up output gains
 * scale (x A_gu[e]^T) B_gu[e]^T and its down output scale (act A_d[e]^T) B_d[e]^T, on the rows
 * routed to it only. A_gu [E, r, D], B_gu [E, 2F, r] (gate rows, then up rows, as gateUp's),
 * A_d [E, r, F], B_d [E, D, r]; float32. A null pair adapts nothing (no extra work).
 */
struct MoeLora {
  std::int64_t rank = 0;
  float scale = 0.0f;
  const float* gateUpA = nullptr;
  const float* gateUpB = nullptr;
  const float* downA = nullptr;
  const float* downB = nullptr;

  bool gateUp() const { return gateUpA != nullptr; }
  bool down() const { return downA != nullptr; }
};

/** The shapes and parameters of an MoE layer (pointers owned by the caller). */
struct MoeParams {
  std::int64_t width = 0;    // D
  std::int64_t ffn = 0;      // F, each expert's hidden size
  std::int64_t experts = 0;  // E
  std::int64_t topK = 0;     // k in [1, E]
  SwiGluParams swiglu;
  WeightData router;                  // [E, D]
  const float* routerBias = nullptr;  // [E] or null
  WeightData gateUp;                  // [E, 2F, D]: per expert F gate rows, then F up rows
  const float* gateUpBias = nullptr;  // [E, 2F] or null
  WeightData down;                    // [E, D, F]
  const float* downBias = nullptr;    // [E, D] or null
  MoeLora lora;                       // expert adapters (none by default)
};

/** Gradients an MoE backward accumulates (+=); any may be null (skipped; required null for a frozen weight). */
struct MoeGrads {
  float* router = nullptr;
  float* routerBias = nullptr;
  float* gateUp = nullptr;
  float* gateUpBias = nullptr;
  float* down = nullptr;
  float* downBias = nullptr;
  float* gateUpLoraA = nullptr;  // the expert adapters' (MoeLora), same shapes
  float* gateUpLoraB = nullptr;
  float* downLoraA = nullptr;
  float* downLoraB = nullptr;
};

/** What an MoE forward keeps for its backward (tracked host memory). */
struct MoeSaved {
  std::int64_t T = 0;
  HostBuffer<std::int32_t> index;    // [T, k] chosen experts, slot order
  HostBuffer<float> weight;          // [T, k] their softmax weights
  HostBuffer<std::int64_t> offsets;  // [E + 1] assignment rows of expert e: [offsets[e], offsets[e + 1])
  HostBuffer<std::int32_t> token;    // [T k] token of each assignment row (grouped by expert, tokens ascending)
  HostBuffer<std::int32_t> rowOf;    // [T k] assignment row of (t, s)
  HostBuffer<float> h;               // [T k, 2F] gate_up outputs, by assignment row
  HostBuffer<float> act;             // [T k, F] SwiGLU outputs
  HostBuffer<float> y;               // [T k, D] expert outputs (unweighted)

  /** Bytes held. */
  std::size_t Bytes() const;
};

/** ArgumentError unless the shapes and pointers are valid (names the field). */
void CheckMoeParams(const MoeParams& p);

/**
 * out[T, D] = MoE(x[T, D]); with `saved`, keeps what MoeBackward needs. router logits may be
 * returned in `logits` [T, E] (may be null).
 */
void MoeForward(const MoeParams& p, const float* x, float* out, std::int64_t T, MoeSaved* saved, float* logits);

/**
 * What a backward may do with the saved state: keep it (it can serve another backward), or
 * consume it — the expert outputs become their gradients, the gate_up outputs theirs and, without
 * a down adapter, the SwiGLU outputs theirs, in place (the same arithmetic, three [T k, ·] buffers
 * fewer at the layer's peak); the state is emptied after, so a second backward is refused.
 */
enum class SavedUse { kKeep, kConsume };

/**
 * dx[T, D] (= or += with accumulateDx) and the parameter gradients (+=) of the scalar
 * sum(dout * out) for the forward that filled `saved` with the same x.
 */
void MoeBackward(const MoeParams& p, const float* x, const float* dout, MoeSaved& saved, float* dx,
                 const MoeGrads& grads, bool accumulateDx, SavedUse use);

}  // namespace sinkflex::model
