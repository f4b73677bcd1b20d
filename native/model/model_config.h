// Configuration of the transformer (the built-in gpt-oss-style policy and the pretrained
// families it runs: gpt-oss, Qwen3, Qwen2, Llama) and the names, shapes and initialisation of
// its parameters (the one place that defines the parameter layout; TypeScript reads it
// through the addon).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops.h"
#include "param_store.h"
#include "swiglu_params.h"

namespace sinkflex::model {

/** The attention of one layer: a sliding window of `window` keys, or every earlier key. */
enum class LayerType : std::uint8_t { kSliding, kFull };

/**
 * A linear projection LoRA can adapt, named as PEFT names the module (q_proj, k_proj, v_proj,
 * o_proj, gate_proj, up_proj, down_proj). gate and up adapt the two halves of our fused
 * mlp.gate_up (gate rows, then up rows); the MLP targets need the dense MLP.
 */
enum class LoraTarget : std::uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown, kExpertsGateUp, kExpertsDown };
constexpr int kLoraTargets = 9;
/**
 * The expert targets (kExpertsGateUp, kExpertsDown: PEFT's target_parameters
 * `mlp.experts.gate_up_proj` / `mlp.experts.down_proj`) adapt every expert of a mixture of
 * experts with its own pair: A [E, rank, in], B [E, out, rank] (docs/models.md, "LoRA on the experts").
 */
inline bool IsExpertLoraTarget(LoraTarget t) {
  return t == LoraTarget::kExpertsGateUp || t == LoraTarget::kExpertsDown;
}

/** Our name of a target: PEFT's module name ("q_proj", ...) or "experts.gate_up_proj" / "experts.down_proj". */
const char* LoraTargetName(LoraTarget t);

/**
 * Low-rank adapters (LoRA) on some projections of every layer: y = x W^T (+ b) + scale (x A^T) B^T
 * with A [rank, in] and B [out, rank] trainable float32, W frozen. rank 0: no adapters.
 */
struct LoraSettings {
  std::int64_t rank = 0;
  double alpha = 0.0;
  bool rslora = false;        // scale alpha / sqrt(rank) (PEFT's use_rslora), else alpha / rank
  std::uint32_t targets = 0;  // bit t set: LoraTarget t is adapted

  bool enabled() const { return rank > 0; }
  bool Has(LoraTarget t) const { return (targets >> static_cast<int>(t)) & 1u; }
  /** alpha / rank, or alpha / sqrt(rank) with rslora. */
  double Scale() const;
};

struct ModelConfig {
  std::int64_t layers = 0;
  std::int64_t width = 0;    // residual stream size
  std::int64_t heads = 0;    // query heads
  std::int64_t kvHeads = 0;  // key/value heads (grouped-query attention; divides heads)
  std::int64_t headDim = 0;  // even (RoPE); need not be width / heads
  std::int64_t window = 0;   // keys (including the current one) a sliding layer sees; 0: no sliding layers
  std::int64_t vocab = 0;
  std::int64_t context = 0;  // maximum positions
  std::int64_t ffn = 0;      // SwiGLU hidden size (of each expert with experts > 0)
  double ropeTheta = 10000.0;
  double normEps = 1e-5;
  double initStd = 0.02;
  SwiGluParams swiglu = SwiGluParams::Standard();
  bool qkvBias = false;        // biases on the q, k, v projections
  bool oBias = false;          // bias on the output projection
  bool mlpBias = false;        // biases on the MLP (dense: gate_up and down; MoE: router and experts)
  bool sinks = true;           // a learned sink logit per head (gpt-oss); false: plain softmax attention
  bool qkNorm = false;         // RMSNorm over every q and k head (weight [headDim]) before RoPE (Qwen3)
  bool tieEmbeddings = false;  // the LM head is embed.weight (no lm_head.weight)
  /** One per layer, or empty: the built-in rule (even layers slide when window > 0). */
  std::vector<LayerType> layerTypes;
  std::int64_t experts = 0;          // 0: dense MLP; > 0: a mixture of this many SwiGLU experts
  std::int64_t expertsPerToken = 0;  // top-k, in [1, experts] with experts > 0, else 0
  RopeScaling ropeScaling;           // kNone: plain RoPE
  LoraSettings lora;                 // rank 0: no adapters
  // Token shift (the built-in model only; pretrained families have none): each position's input
  // also gets token_shift.weight [width, width] times the previous token's embedding (token 0's
  // at a sequence's first position). Every position then knows the token before it without an
  // attention layer, so one attention layer can find "the token after an earlier occurrence of
  // mine" and copy it (an induction head). Not with LoRA (adapters are for pretrained models).
  bool tokenShift = false;

  /** True when layer l uses the sliding window. */
  bool Sliding(std::int64_t l) const {
    if (!layerTypes.empty()) return layerTypes[static_cast<std::size_t>(l)] == LayerType::kSliding;
    return window > 0 && l % 2 == 0;
  }

  /** Throws ArgumentError naming the first invalid field. */
  void Validate() const;
};

/**
 * Parameters, in order: embed.weight [vocab, width]; token_shift.weight [width, width] (only with
 * tokenShift); per layer i (p = "layers.i."):
 * p attn_norm.weight; p attn.{q,k,v}.weight (each followed by its .bias with qkvBias);
 * p attn.q_norm.weight and p attn.k_norm.weight [headDim] (qkNorm); p attn.o.weight (+ .bias
 * with oBias); p attn.sinks [heads] (sinks); p mlp_norm.weight; then the dense MLP
 * p mlp.gate_up.weight [2 ffn, width] (gate rows first, then up) and p mlp.down.weight (each +
 * .bias with mlpBias), or with experts E > 0 p mlp.router.weight [E, width] (+ .bias [E]),
 * p mlp.experts.gate_up.weight [E, 2 ffn, width] (+ .bias [E, 2 ffn]),
 * p mlp.experts.down.weight [E, width, ffn] (+ .bias [E, width]); norm.weight;
 * lm_head.weight [vocab, width] unless tieEmbeddings. Matrices are normal(initStd) (output
 * projections scaled by 1/sqrt(2 layers)) with weight decay; norm gains are ones, biases and
 * sinks zeros, without decay. Configs without the newer fields give the same list as before.
 * With LoRA, the adapters follow, layer by layer and per target in LoraTarget order:
 * p attn.{q,k,v,o}.lora_a / lora_b, p mlp.{gate,up,down}.lora_a / lora_b, A [rank, in] uniform
 * in (-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming_uniform(a = sqrt 5)), B [out, rank] zeros, both
 * with weight decay (the base parameters come first, so they are initialised as without LoRA);
 * the expert targets p mlp.experts.{gate_up,down}.lora_a [E, rank, in] / lora_b [E, out, rank]
 * likewise per expert (gate_up's out rows: ffn gate rows, then ffn up rows, as the weight's).
 */
std::vector<ParamSpec> ParamLayout(const ModelConfig& c);

/** The input and output sizes of target t's projection (of one expert for the expert targets). */
std::pair<std::int64_t, std::int64_t> LoraShape(const ModelConfig& c, LoraTarget t);
/** Our parameter prefix of target t in layer l, e.g. "layers.0.attn.q" (then ".lora_a" / ".lora_b"). */
std::string LoraPrefix(std::int64_t layer, LoraTarget t);

}  // namespace sinkflex::model
