// Configuration of the built-in gpt-oss-style policy and the names, shapes and initialisation
// of its parameters (the one place that defines the parameter layout; TypeScript reads it
// through the addon).
#pragma once

#include <cstdint>
#include <vector>

#include "param_store.h"
#include "swiglu_params.h"

namespace sinkflex::model {

struct ModelConfig {
  std::int64_t layers = 0;
  std::int64_t width = 0;    // residual stream size
  std::int64_t heads = 0;    // query heads
  std::int64_t kvHeads = 0;  // key/value heads (grouped-query attention; divides heads)
  std::int64_t headDim = 0;  // even (RoPE)
  std::int64_t window = 0;   // sliding window of the even layers (0: every layer is full attention)
  std::int64_t vocab = 0;
  std::int64_t context = 0;  // maximum positions
  std::int64_t ffn = 0;      // SwiGLU hidden size
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  double initStd = 0.02;
  SwiGluParams swiglu = SwiGluParams::Standard();
  bool bias = false;  // biases on the attention and MLP projections

  /** Throws ArgumentError naming the first invalid field. */
  void Validate() const;
};

/**
 * Parameters, in order: embed.weight [vocab, width]; per layer i: layers.i.attn_norm.weight,
 * layers.i.attn.{q,k,v,o}.weight (+ .bias), layers.i.attn.sinks [heads],
 * layers.i.mlp_norm.weight, layers.i.mlp.gate_up.weight [2 ffn, width] (gate rows first, then
 * up), layers.i.mlp.down.weight (+ biases); norm.weight; lm_head.weight [vocab, width].
 * Matrices are normal(initStd) (output projections scaled by 1/sqrt(2 layers)) with weight
 * decay; norm gains are ones, biases and sinks zeros, without decay.
 */
std::vector<ParamSpec> ParamLayout(const ModelConfig& c);

}  // namespace sinkflex::model
