// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/transformer-reference.ts.
// Tests: test/model/transformer.test.ts, transformer-inference.test.ts,
//   transformer-learning.test.ts, transformer-policy.test.ts, transformer-bindings.test.ts.
// The transformer: a decoder-only model assembled from the model ops (ops.h, moe.h) and the fused
// sink attention (../attention/sink_attention.h), float32 activations on the CPU. The built-in
// gpt-oss-style policy and the pretrained families (gpt-oss, Qwen3, Qwen2, Llama) are
// configurations of it (model_config.h):
//
//   x = embed[tokens]  (+ embed[previous tokens] . token_shift^T with config.tokenShift; the
//                       previous token at a sequence's first position is token 0)
//   per layer l:  h = rmsnorm(x) ; q, k, v = h Wq^T, h Wk^T, h Wv^T (+ qkvBias)
//                 q, k = rmsnorm per head (qkNorm) ; RoPE(q, k, positions) (scaled table, attention factor)
//                 x = x + Wo . attention(q, k, v, sinks_l?, mask_l) (+ oBias)   (grouped-query, sinks optional)
//                 x = x + mlp(rmsnorm(x))      mlp: dense SwiGLU, or a mixture of SwiGLU experts (moe.h)
//   logits = lm_head . rmsnorm(x)              (lm_head = embed with tieEmbeddings)
// mask_l = causal AND same document, AND a sliding window of config.window keys on the sliding
// layers (config.layerTypes, or the even layers when window > 0 by the built-in rule).
//
// Weight matrices (embed, q/k/v/o, MLP, router, experts, head) may be stored as bfloat16 and
// frozen parameters get no gradient (param_store.h); norms, sinks and biases are float32.
// With config.lora, the adapted projections (q, k, v, o, gate and up on the halves of gate_up,
// down) add scale (x A^T) B^T (lora.h) in the training forward/backward and in inference.
//
// Training works on packed token batches: T tokens of several documents laid end to end, with
// per-token positions (restarting at 0 in each document) and document ids (attention never
// crosses documents). Forward returns per-token log-probabilities of the target tokens under
// softmax(logits / temperature) and the entropy of that distribution; Backward takes arbitrary
// gradients with respect to those log-probabilities and entropies and accumulates parameter
// gradients into the ParamStore (+=). Activations are kept between the two in a TrainState
// (tracked allocator; O(T x width + T x vocab) — the fused attention keeps only its lse).
//
// Inference keeps one KvCache per sequence (sliding-window layers keep only their window) and
// runs batched steps over many sessions of different lengths (see Session / Run below).
//
// The model runs where its ParamStore lives. Over a CUDA store (param_store.h) the training
// forward/backward and the batched inference steps run on that GPU (transformer_device_*.cc:
// the same sequence of ops over the CUDA ops table, device activations, the CUDA sink
// attention, KV caches in device memory); masks, sampling and the session bookkeeping are
// shared with the CPU path (the logits of the last rows are copied to the host for sampling).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../attention/sink_attention.h"
#include "../core/allocator.h"
#include "../core/device_buffer.h"
#include "gemm.h"
#include "model_config.h"
#include "moe.h"
#include "ops.h"
#include "param_store.h"
#include "rng.h"

namespace sinkflex::model {

/** Which attention implementation a training forward/backward uses. */
enum class AttentionImpl { kFused, kEager };

/** A packed micro-batch of T tokens (pointers owned by the caller during the call). */
struct TokenBatch {
  std::int64_t T = 0;
  const std::int32_t* tokens = nullptr;       // [T], in [0, vocab)
  const std::int32_t* targets = nullptr;      // [T], in [-1, vocab) (-1: no target, logp = 0); may be null
  const std::int32_t* positions = nullptr;    // [T], in [0, context)
  const std::int32_t* documentIds = nullptr;  // [T] or null (one document)
};

/** Options of a training forward. */
struct TrainForwardOptions {
  AttentionImpl impl = AttentionImpl::kFused;
  /** Log-probabilities and entropies are of softmax(logits / temperature). */
  float temperature = 1.0f;
  /** Keep the activations for Backward. */
  bool save = false;
  /**
   * Activation checkpointing (with save): keep only each layer's input and recompute the layer
   * in the backward (the same ops on the same inputs: gradients bit-identical to keeping them).
   */
  bool checkpointLayers = false;
  /** Rows of logits per LM-head chunk (0: automatic, HeadChunkRows). */
  std::int64_t headChunk = 0;
};

/**
 * Rows of logits one LM-head chunk holds: `requested` when > 0, else the largest multiple of
 * kGemmDepthBlock whose [rows, V] float32 logits fit kHeadChunkBytes (at least one block).
 */
std::int64_t HeadChunkRows(std::int64_t V, std::int64_t requested);
/** Bytes of logits an automatic LM-head chunk holds at most (one block of rows may exceed it). */
constexpr std::int64_t kHeadChunkBytes = std::int64_t{256} << 20;
/**
 * The boundaries 0 = r_0 < r_1 < ... < r_n = T of the LM-head chunks of `rows` rows; a last
 * chunk of at most kGemmSmallRows rows joins the one before (one GEMM fewer; a row's logits do
 * not depend on the rows beside it, and the weight gradient sums in the order of the GEMM over
 * all T rows when `rows` is a multiple of kGemmDepthBlock).
 */
std::vector<std::int64_t> HeadChunks(std::int64_t T, std::int64_t rows);

/**
 * Parameters of one transformer block (pointers into the ParamStore): biases, qNorm/kNorm and
 * sinks may be null; gateUp/down (dense) or router and the experts' (MoE) are set.
 */
struct BlockParams {
  Parameter *attnNorm = nullptr, *q = nullptr, *qBias = nullptr, *k = nullptr, *kBias = nullptr, *v = nullptr,
            *vBias = nullptr, *qNorm = nullptr, *kNorm = nullptr, *o = nullptr, *oBias = nullptr, *sinks = nullptr;
  Parameter *mlpNorm = nullptr, *gateUp = nullptr, *gateUpBias = nullptr, *down = nullptr, *downBias = nullptr;
  Parameter *router = nullptr, *routerBias = nullptr, *expertsGateUp = nullptr, *expertsGateUpBias = nullptr,
            *expertsDown = nullptr, *expertsDownBias = nullptr;
  /** LoRA adapters per LoraTarget (null where the target is not adapted). */
  Parameter *loraA[kLoraTargets] = {}, *loraB[kLoraTargets] = {};
};

/**
 * The MoE layer's view of block `p`'s router and experts, with the pointers `weights` and `value`
 * give for a parameter: the host ones (Transformer::Moe) or the device ones (DeviceMoeParams).
 */
template <class WeightsOf, class ValueOf>
MoeParams BlockMoeParams(const ModelConfig& c, const BlockParams& p, WeightsOf weights, ValueOf value) {
  MoeParams m;
  m.width = c.width;
  m.ffn = c.ffn;
  m.experts = c.experts;
  m.topK = c.expertsPerToken;
  m.swiglu = c.swiglu;
  m.router = weights(p.router);
  m.routerBias = value(p.routerBias);
  m.gateUp = weights(p.expertsGateUp);
  m.gateUpBias = value(p.expertsGateUpBias);
  m.down = weights(p.expertsDown);
  m.downBias = value(p.expertsDownBias);
  const int gu = static_cast<int>(LoraTarget::kExpertsGateUp), dn = static_cast<int>(LoraTarget::kExpertsDown);
  if (p.loraA[gu] != nullptr || p.loraA[dn] != nullptr) {
    m.lora.rank = c.lora.rank;
    m.lora.scale = static_cast<float>(c.lora.Scale());
    if (p.loraA[gu] != nullptr) {
      m.lora.gateUpA = value(p.loraA[gu]);
      m.lora.gateUpB = value(p.loraB[gu]);
    }
    if (p.loraA[dn] != nullptr) {
      m.lora.downA = value(p.loraA[dn]);
      m.lora.downB = value(p.loraB[dn]);
    }
  }
  return m;
}

/** The rows of a batched decoding chunk: each session's pending tokens, end to end. */
struct ChunkRows {
  std::vector<std::int64_t> offset;     // session s's rows are [offset[s], offset[s + 1])
  std::int64_t rows = 0;                // offset.back()
  HostBuffer<std::int32_t> tokens;      // [rows]
  HostBuffer<std::int32_t> positions;   // [rows] the session's positions
  HostBuffer<std::int32_t> prevTokens;  // [rows] config.tokenShift only: the token before each row
};

/** Activations one layer keeps for its backward. */
struct LayerActivations {
  HostBuffer<float> x;                         // [T, D] layer input (residual stream)
  HostBuffer<float> n1;                        // [T, D] attention RMSNorm output
  HostBuffer<float> rstd1;                     // [T]
  HostBuffer<float> q, k, v;                   // [T, H*Dh], [T, KV*Dh] x2, after RoPE (q, k)
  HostBuffer<float> qRaw, kRaw, rstdQ, rstdK;  // qkNorm: q, k before their norm; rstd per head row
  HostBuffer<float> ao;                        // [T, H*Dh] attention output
  HostBuffer<float> lse;                       // [H, T]
  attention::EagerSaved eager;                 // probabilities (eager only)
  HostBuffer<float> xmid;                      // [T, D] after the attention residual
  HostBuffer<float> n2;                        // [T, D] MLP RMSNorm output
  HostBuffer<float> rstd2;                     // [T]
  HostBuffer<float> h;                         // [T, 2F] gate_up output (dense)
  HostBuffer<float> act;                       // [T, F] SwiGLU output (dense)
  MoeSaved moe;                                // the experts' activations (MoE)
  HostBuffer<float> loraT[kLoraTargets];       // [T, rank] x A^T of each adapted projection (LoRA)
};

/** The device activations of a training forward over a CUDA store (transformer_device_train.cc). */
struct DeviceTrainState;
/** One layer's device activations (transformer_device.h). */
struct DeviceLayerActivations;
/** The CUDA kernel tables a device model runs over (transformer_device.h). */
struct DeviceContext;
/** Device bytes a DeviceTrainState holds. */
std::size_t DeviceTrainStateBytes(const DeviceTrainState& s);

/** What a training forward keeps for its backward (created by Transformer::Forward with save). */
class TrainState {
 public:
  TrainState() = default;
  TrainState(const TrainState&) = delete;
  TrainState& operator=(const TrainState&) = delete;

  std::int64_t T = 0;
  AttentionImpl impl = AttentionImpl::kFused;
  float temperature = 1.0f;
  std::int64_t optimizerStep = 0;  // the store's step at the forward (Backward checks it)
  bool consumed = false;           // Backward ran (a state is used once)
  HostBuffer<std::int32_t> tokens, targets, positions, documentIds;
  HostBuffer<std::int32_t> prevTokens;  // [T] with config.tokenShift: the previous token, 0 at a sequence start
  attention::MaskProgram slidingMask, fullMask;
  std::unique_ptr<attention::BlockMask> slidingBlocks, fullBlocks;
  std::vector<LayerActivations> layers;
  bool checkpointLayers = false;    // layers[l] keeps only x; the backward recomputes the rest
  std::int64_t headChunk = 0;       // rows of logits per LM-head chunk
  HostBuffer<float> xf, nf, rstdf;  // final residual, its norm and rstd
  HostBuffer<float> logits;         // [T, V] only when the whole batch is one LM-head chunk (else recomputed per chunk)
  HostBuffer<float> lse, entropy;   // [T]
  std::shared_ptr<DeviceTrainState> device;  // the activations of a CUDA model (the host ids above stay)

  /** Bytes currently held (host and device). */
  std::size_t Bytes() const;
};

// ---- inference ---------------------------------------------------------------------------------

/** The keys and values one layer has cached for a sequence: rows [start, start + count) of the buffers. */
struct LayerCache {
  HostBuffer<float> k, v;      // [capacity, kvHeads * headDim]
  DeviceBuffer<float> dk, dv;  // the same in device memory, for a CUDA model
  std::int64_t capacity = 0;
  std::int64_t start = 0;
  std::int64_t count = 0;
};

/** The log-probability SampleToken returns for the sampled token. */
enum class LogprobsMode {
  /** softmax((penalised logits) / T): after the penalties and the temperature, before min_p/top-k/top-p (T = 0: no
     temperature). */
  kTempered,
  /** vLLM's raw_logprobs: log_softmax of the model's logits, before penalties and temperature. */
  kRaw,
  /**
   * vLLM's processed_logprobs: after the penalties, the temperature, min_p, top-k and top-p,
   * renormalised over the tokens they keep (T = 0: after the penalties only, nothing truncated).
   */
  kProcessed,
};

/** Sampling parameters of a generation job. */
struct SampleParams {
  /** 0: greedy (argmax, lowest id on ties); > 0: sample from softmax(logits / temperature). */
  double temperature = 1.0;
  /** Nucleus: the smallest set of most likely tokens whose probability reaches topP (1: off). */
  double topP = 1.0;
  /** Keep only the topK most likely tokens (0: off); applied before topP. */
  std::int64_t topK = 0;
  /**
   * vLLM's min_p (0: off): after the temperature, drop the tokens whose probability is below
   * minP times the most likely token's; applied before topK and topP.
   */
  double minP = 0.0;
  /**
   * vLLM's repetition_penalty (1: off), applied to the logits before the temperature: a token
   * already in the context (prompt or output) has a positive logit divided by it, a negative one
   * multiplied by it.
   */
  double repetitionPenalty = 1.0;
  /** vLLM's presence_penalty (0: off): subtracted from the logit of each token the job has sampled. */
  double presencePenalty = 0.0;
  /** vLLM's frequency_penalty (0: off): subtracted from a token's logit once per time the job sampled it. */
  double frequencyPenalty = 0.0;
  /** Which log-probs the job returns (see LogprobsMode). */
  LogprobsMode logprobsMode = LogprobsMode::kTempered;
  /** Tokens to generate at most. */
  std::int64_t maxTokens = 0;
  /** Generation ends after any of these tokens (the token is included). */
  std::vector<std::int32_t> stop;
};

/** Why a generation job ended. */
enum class FinishReason { kNone, kStop, kLength, kContext };

/** Name of a finish reason: "stop", "length", "context" (or "" for kNone). */
const char* FinishReasonName(FinishReason r);

/** Reusable buffers of SampleToken. */
struct SampleScratch {
  std::vector<float> weights;
  std::vector<std::pair<float, std::int32_t>> order;
  std::vector<float> penalised;
  std::vector<std::int32_t> counts;
  std::vector<std::uint8_t> seen;
};

/** The tokens the penalties look at: `tokens[0, total)`, of which `tokens[promptLen, total)` are the job's output. */
struct SampleHistory {
  const std::int32_t* tokens = nullptr;
  std::int64_t promptLen = 0;
  std::int64_t total = 0;
};

/**
 * Picks a token from logits[V] with `params` and `rng`, vLLM's order: repetition, frequency
 * and presence penalties (over `history`, which may be null when they are off), temperature,
 * min_p, top-k, top-p. Returns the token and its log-probability as `params.logprobsMode`
 * says. Throws std::runtime_error on non-finite logits.
 */
std::pair<std::int32_t, float> SampleToken(const float* logits, std::int64_t V, const SampleParams& params, Rng& rng,
                                           SampleScratch* scratch, const SampleHistory* history = nullptr);

class Transformer;

/**
 * One sequence being decoded: its KV cache, tokens appended (or sampled) but not yet run
 * through the model (`pending`), the logits after the last processed token, its own RNG, and
 * the current job (sample with params, or just prefill). Not thread-safe by itself: the owner
 * runs one operation at a time on it (`busy` guards against overlap).
 */
class Session {
 public:
  Session(const Transformer& model, std::uint64_t seed);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /** Tokens in the context: processed plus pending. */
  std::int64_t length() const { return processed_ + static_cast<std::int64_t>(pending_.size()); }
  std::int64_t processed() const { return processed_; }
  const std::vector<std::int32_t>& pending() const { return pending_; }
  /** Queues tokens (checked against the vocabulary and the context). */
  void Append(const std::int32_t* tokens, std::int64_t n);
  /** Logits after the last token when every token has been processed, else null. */
  const float* logits() const { return hasLogits_ && pending_.empty() ? logits_.data() : nullptr; }

  /** Starts a sampling job (replacing any finished one). */
  void StartSample(const SampleParams& params);
  /** Starts a job that only processes the pending tokens. */
  void StartPrefill();
  bool jobActive() const { return jobActive_; }
  /** Ends the current job without a finish reason (after an error); sampled tokens stay. */
  void AbortJob() { jobActive_ = false; }
  FinishReason finishReason() const { return finish_; }
  /** Tokens sampled by the current job since the last Drain, with their log-probabilities. */
  void Drain(std::vector<std::int32_t>* tokens, std::vector<float>* logps);

  /** A deep copy (cache, pending tokens, logits) with a new RNG seed and no job. */
  std::unique_ptr<Session> Fork(std::uint64_t seed) const;
  Rng& rng() { return rng_; }
  /** Bytes of the KV cache and logits. */
  std::size_t Bytes() const;
  const Transformer& model() const { return *model_; }

  std::atomic<bool> busy{false};

 private:
  friend class Transformer;
  const Transformer* model_;
  std::vector<LayerCache> layers_;
  std::int64_t processed_ = 0;
  std::int32_t lastToken_ = 0;  // the last processed token (0 before any): config.tokenShift's input
  std::vector<std::int32_t> pending_;
  std::vector<std::int32_t> tokens_;  // every token of the context, in order (the penalties' history)
  std::int64_t jobStart_ = 0;         // tokens_ before the current sampling job (its prompt)
  HostBuffer<float> logits_;
  bool hasLogits_ = false;
  Rng rng_;
  // job
  bool jobActive_ = false;
  bool jobSamples_ = false;
  SampleParams params_;
  std::int64_t generated_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  std::vector<std::int32_t> outTokens_;
  std::vector<float> outLogps_;
};

/** Options of Transformer::Run. */
struct RunOptions {
  /** Batched forward passes at most in this call (the caller resumes unfinished jobs later). */
  std::int64_t maxForwards = 1 << 30;
  /** Tokens of one session processed per forward at most (chunked prefill). */
  std::int64_t prefillChunk = 512;
};

class Transformer {
 public:
  /**
   * Checks that `store` holds exactly ParamLayout(config) (names and shapes). The model keeps
   * pointers into the store: once the store's parameter list changes (ParamStore::Append /
   * Truncate, e.g. adapters added or merged away), every operation of this model throws.
   */
  Transformer(const ModelConfig& config, std::shared_ptr<ParamStore> store);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  ParamStore& store() const { return *store_; }
  /** The CUDA device the model runs on (its store's), or -1 for the CPU. */
  int device() const { return device_; }
  const RopeTable& rope() const { return rope_; }
  bool Sliding(std::int64_t layer) const { return config_.Sliding(layer); }

  /**
   * Training forward over a packed batch: logp[T] (0 where targets < 0 or targets is null) and
   * entropy[T] (either output may be null). With opts.save, returns the activations for
   * Backward (else nullptr).
   */
  std::unique_ptr<TrainState> Forward(const TokenBatch& batch, const TrainForwardOptions& opts, float* logp,
                                      float* entropy) const;
  /**
   * Accumulates parameter gradients for the scalar sum_t dlogp[t] logp[t] + dentropy[t] entropy[t]
   * (either may be null). Frees the state's activations as it goes; a state is used once.
   * Throws if the optimiser stepped since the forward.
   */
  void Backward(TrainState& state, const float* dlogp, const float* dentropy) const;

  /**
   * Advances the jobs of `sessions` (all of this model): repeatedly samples a token for every
   * sampling job whose logits are ready, then runs one batched forward over the pending tokens
   * of every active job (at most opts.prefillChunk each), until no job is active or
   * opts.maxForwards forwards ran. Sampled tokens stay pending (processed by the next forward
   * that needs them). Results are collected per session (Drain).
   */
  void Run(const std::vector<Session*>& sessions, const RunOptions& opts) const;

  /** Serialises operations on this model (forward, backward, run). */
  std::mutex& mutex() const { return mutex_; }

 private:
  friend class Session;
  void CheckBatch(const TokenBatch& b) const;
  /** A train state with the batch's ids (host copies), its masks and, for the fused attention, block masks. */
  std::unique_ptr<TrainState> NewTrainState(const TokenBatch& b, const TrainForwardOptions& o, bool deviceTiles) const;
  void ForwardChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const;
  /** The rows of a chunk of `counts[s]` pending tokens of each `work[s]` (both decoding paths). */
  ChunkRows GatherChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const;
  // The CUDA path (transformer_device_train.cc, transformer_device_infer.cc).
  void InitDevice();
  std::unique_ptr<TrainState> DeviceForward(const TokenBatch& batch, const TrainForwardOptions& opts, float* logp,
                                            float* entropy) const;
  void DeviceBackward(TrainState& state, const float* dlogp, const float* dentropy) const;
  /**
   * Layer l of the training forward: a.x takes the input `x`, `x` becomes the layer's output; the
   * activations stay in `a` (a.eager and a.moe only with `save`).
   */
  void LayerForward(std::int64_t l, const TrainState& st, LayerActivations& a, HostBuffer<float>& x, bool save) const;
  /** Layer l of the backward: dx (the output's gradient) becomes the input's; frees a's activations. */
  void LayerBackward(std::int64_t l, TrainState& st, LayerActivations& a, HostBuffer<float>& dx, HostBuffer<float>& dn,
                     float* dsinks, float* dt) const;
  /** The LM head's backward over the kept (or recomputed) logits: dn[T, D] = d loss / d nf, head gradient +=. */
  void HeadBackward(TrainState& st, const float* dlogp, const float* dentropy, float* dn) const;
  // The CUDA twins of LayerForward / LayerBackward / HeadBackward (transformer_device_train.cc).
  void DeviceLayerForward(const DeviceContext& cx, std::int64_t l, const TrainState& st, DeviceTrainState& ds,
                          DeviceLayerActivations& a, DeviceBuffer<float>& x, bool save) const;
  void DeviceLayerBackward(const DeviceContext& cx, std::int64_t l, TrainState& st, DeviceTrainState& ds,
                           DeviceLayerActivations& a, DeviceBuffer<float>& dx, DeviceBuffer<float>& dn, float* dsinks,
                           float* dt) const;
  void DeviceHeadBackward(const DeviceContext& cx, TrainState& st, const float* dlogp, const float* dentropy,
                          float* dn) const;
  void DeviceForwardChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const;
  void DeviceCopyCache(const LayerCache& from, LayerCache& to) const;

  ModelConfig config_;
  std::shared_ptr<ParamStore> store_;
  /** The MoE op's view of layer l's router and experts. */
  MoeParams Moe(const BlockParams& p) const;
  /** Throws when the store's parameter list changed since this model was made (call with layoutMutex held). */
  void CheckStoreLayout() const;

  RopeTable rope_;
  Parameter* embed_;
  Parameter* shift_ = nullptr;  // token_shift.weight (config.tokenShift), else null
  std::vector<BlockParams> blocks_;
  Parameter* norm_;
  Parameter* head_;                // embed_ with tieEmbeddings
  float loraScale_ = 0.0f;         // config.lora.Scale()
  std::uint64_t storeLayout_ = 0;  // the store's layoutVersion() at construction
  attention::MaskProgram causal_, window_;
  int device_ = -1;
  DeviceBuffer<float> ropeCos_, ropeSin_;  // the RoPE table on the device
  mutable std::mutex mutex_;
};

}  // namespace sinkflex::model
