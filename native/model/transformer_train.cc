// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/transformer-reference.ts.
// Tests: test/model/transformer.test.ts (forward, log-probs, every parameter gradient),
//   transformer-learning.test.ts, transformer-policy.test.ts, transformer-bindings.test.ts.
// The transformer's construction and its training forward and backward over packed batches.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "kernel_table.h"
#include "lora.h"
#include "transformer.h"
#include "transformer_params.h"

namespace sinkflex::model {
namespace {

using attention::BlockMask;
using attention::MaskProgram;
using attention::Shape;

HostBuffer<float> Floats(std::int64_t n, const char* what) {
  return HostBuffer<float>(static_cast<std::size_t>(n), what);
}

HostBuffer<float> Copy(const float* src, std::int64_t n, const char* what) {
  HostBuffer<float> b = Floats(n, what);
  std::memcpy(b.data(), src, static_cast<std::size_t>(n) * sizeof(float));
  return b;
}

void CheckIds(const std::int32_t* ids, std::int64_t n, std::int64_t lo, std::int64_t hi, const char* name) {
  for (std::int64_t t = 0; t < n; ++t) {
    if (ids[t] < lo || ids[t] >= hi) {
      throw ArgumentError(std::string(name) + "[" + std::to_string(t) + "] = " + std::to_string(ids[t]) +
                          " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    }
  }
}

const ModelConfig& Validated(const ModelConfig& c) {
  c.Validate();
  return c;
}

MaskProgram StandardMask(std::int64_t window) {
  MaskProgram::Standard spec;
  spec.window = window;
  return MaskProgram::FromStandard(spec, 1, 1);
}

}  // namespace

std::size_t TrainState::Bytes() const {
  std::size_t n = (tokens.size() + targets.size() + positions.size() + documentIds.size() + prevTokens.size()) * 4;
  n += (xf.size() + nf.size() + rstdf.size() + logits.size() + lse.size() + entropy.size()) * 4;
  for (const LayerActivations& a : layers) {
    n += (a.x.size() + a.n1.size() + a.rstd1.size() + a.q.size() + a.k.size() + a.v.size() + a.qRaw.size() +
          a.kRaw.size() + a.rstdQ.size() + a.rstdK.size() + a.ao.size() + a.lse.size() + a.eager.probs.size() +
          a.xmid.size() + a.n2.size() + a.rstd2.size() + a.h.size() + a.act.size()) *
             4 +
         a.moe.Bytes();
    for (const HostBuffer<float>& t : a.loraT) n += t.size() * 4;
  }
  if (device) n += DeviceTrainStateBytes(*device);
  return n;
}

Transformer::Transformer(const ModelConfig& config, std::shared_ptr<ParamStore> store)
    : config_(Validated(config)),
      store_(std::move(store)),
      rope_(config.headDim, config.context, config.ropeTheta, config.ropeScaling),
      causal_(StandardMask(0)),
      window_(StandardMask(config.window)) {
  if (!store_) throw ArgumentError("store is required");
  const std::vector<ParamSpec> layout = ParamLayout(config_);
  if (store_->size() != layout.size()) {
    throw ArgumentError("store holds " + std::to_string(store_->size()) + " parameters, the config has " +
                        std::to_string(layout.size()));
  }
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const Parameter& p = store_->at(i);
    const ParamSpec& s = p.spec;
    if (s.name != layout[i].name || s.shape != layout[i].shape) {
      throw ArgumentError("store parameter " + std::to_string(i) + " ('" + s.name + "') does not match the config's '" +
                          layout[i].name + "' (name or shape)");
    }
    // Only weight matrices may be stored as bfloat16; gains, sinks and biases stay float32.
    if (p.bf16() && !layout[i].decay) {
      throw ArgumentError("parameter '" + s.name +
                          "' must be float32 (norm gains, sinks and biases are not stored as bfloat16)");
    }
    const bool adapter = s.name.size() > 7 && (s.name.compare(s.name.size() - 7, 7, ".lora_a") == 0 ||
                                               s.name.compare(s.name.size() - 7, 7, ".lora_b") == 0);
    if (p.mxfp4()) {
      auto endsWith = [&](const std::string& tail) {
        return s.name.size() >= tail.size() && s.name.compare(s.name.size() - tail.size(), tail.size(), tail) == 0;
      };
      const bool expert = endsWith(".mlp.experts.gate_up.weight") || endsWith(".mlp.experts.down.weight");
      if (!expert) {
        throw ArgumentError("parameter '" + s.name +
                            "' cannot be MXFP4 (only the experts' gate_up and down weights can)");
      }
    }
    if (p.bf16() && adapter) {
      throw ArgumentError("parameter '" + s.name + "' must be float32 (LoRA adapters are float32)");
    }
  }
  storeLayout_ = store_->layoutVersion();
  loraScale_ = static_cast<float>(config_.lora.enabled() ? config_.lora.Scale() : 0.0);
  ParamStore& st = *store_;
  embed_ = &st.Get("embed.weight");
  if (config_.tokenShift) shift_ = &st.Get("token_shift.weight");
  norm_ = &st.Get("norm.weight");
  head_ = config_.tieEmbeddings ? embed_ : &st.Get("lm_head.weight");
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    auto get = [&](const std::string& n) { return &st.Get(p + n); };
    auto opt = [&](bool on, const std::string& n) { return on ? &st.Get(p + n) : nullptr; };
    const bool qkv = config_.qkvBias, ob = config_.oBias, mb = config_.mlpBias, moe = config_.experts > 0;
    BlockParams b;
    b.attnNorm = get("attn_norm.weight");
    b.q = get("attn.q.weight");
    b.qBias = opt(qkv, "attn.q.bias");
    b.k = get("attn.k.weight");
    b.kBias = opt(qkv, "attn.k.bias");
    b.v = get("attn.v.weight");
    b.vBias = opt(qkv, "attn.v.bias");
    b.qNorm = opt(config_.qkNorm, "attn.q_norm.weight");
    b.kNorm = opt(config_.qkNorm, "attn.k_norm.weight");
    b.o = get("attn.o.weight");
    b.oBias = opt(ob, "attn.o.bias");
    b.sinks = opt(config_.sinks, "attn.sinks");
    b.mlpNorm = get("mlp_norm.weight");
    b.gateUp = opt(!moe, "mlp.gate_up.weight");
    b.gateUpBias = opt(!moe && mb, "mlp.gate_up.bias");
    b.down = opt(!moe, "mlp.down.weight");
    b.downBias = opt(!moe && mb, "mlp.down.bias");
    b.router = opt(moe, "mlp.router.weight");
    b.routerBias = opt(moe && mb, "mlp.router.bias");
    b.expertsGateUp = opt(moe, "mlp.experts.gate_up.weight");
    b.expertsGateUpBias = opt(moe && mb, "mlp.experts.gate_up.bias");
    b.expertsDown = opt(moe, "mlp.experts.down.weight");
    b.expertsDownBias = opt(moe && mb, "mlp.experts.down.bias");
    for (int t = 0; t < kLoraTargets; ++t) {
      if (!config_.lora.enabled() || !config_.lora.Has(static_cast<LoraTarget>(t))) continue;
      const std::string prefix = LoraPrefix(l, static_cast<LoraTarget>(t));
      b.loraA[t] = &st.Get(prefix + ".lora_a");
      b.loraB[t] = &st.Get(prefix + ".lora_b");
    }
    blocks_.push_back(b);
  }
  if (store_->device() >= 0) InitDevice();
}

void Transformer::CheckBatch(const TokenBatch& b) const {
  if (b.T < 1) throw ArgumentError("a batch needs at least one token, got T = " + std::to_string(b.T));
  if (b.tokens == nullptr) throw ArgumentError("tokens are required");
  if (b.positions == nullptr) throw ArgumentError("positions are required");
  CheckIds(b.tokens, b.T, 0, config_.vocab, "tokens");
  if (b.targets) CheckIds(b.targets, b.T, -1, config_.vocab, "targets");
  CheckIds(b.positions, b.T, 0, config_.context, "positions");
}

std::unique_ptr<TrainState> Transformer::NewTrainState(const TokenBatch& b, const TrainForwardOptions& o,
                                                       bool deviceTiles) const {
  const ModelConfig& c = config_;
  const std::int64_t T = b.T;
  auto st = std::make_unique<TrainState>();
  st->T = T;
  st->impl = o.impl;
  st->temperature = o.temperature;
  st->optimizerStep = store_->step();
  auto copyIds = [&](const std::int32_t* src, const char* what, std::int32_t fill) {
    HostBuffer<std::int32_t> d(static_cast<std::size_t>(T), what);
    for (std::int64_t t = 0; t < T; ++t) d[t] = src ? src[t] : fill;
    return d;
  };
  st->tokens = copyIds(b.tokens, "transformer tokens", 0);
  st->targets = copyIds(b.targets, "transformer targets", -1);
  st->positions = copyIds(b.positions, "transformer positions", 0);
  MaskProgram::Standard spec;
  if (b.documentIds) {
    st->documentIds = copyIds(b.documentIds, "transformer document ids", 0);
    spec.documentIds = st->documentIds.data();
  }
  if (c.tokenShift) {
    // the token before each position in its sequence (the previous row continues it: same
    // document, next position), else token 0
    st->prevTokens = HostBuffer<std::int32_t>(static_cast<std::size_t>(T), "transformer previous tokens");
    for (std::int64_t t = 0; t < T; ++t) {
      const bool cont = t > 0 && st->positions[t] > 0 && st->positions[t] == st->positions[t - 1] + 1 &&
                        (!b.documentIds || st->documentIds[t] == st->documentIds[t - 1]);
      st->prevTokens[t] = cont ? st->tokens[t - 1] : 0;
    }
  }
  const Shape shape = Shape::Self(1, T, c.heads, c.kvHeads, c.headDim);
  st->fullMask = MaskProgram::FromStandard(spec, T, 1);
  spec.window = c.window;
  st->slidingMask = MaskProgram::FromStandard(spec, T, 1);
  if (o.impl == AttentionImpl::kFused) {
    for (std::int64_t l = 0; l < c.layers; ++l) {
      auto& slot = Sliding(l) ? st->slidingBlocks : st->fullBlocks;
      if (!slot) {
        // Windowed layers use tiles of about half the window (fewer partially masked pairs) on
        // the CPU; the CUDA kernels work on tiles of 64 (another size would be re-combined per call).
        const std::int64_t bs = Sliding(l) && !deviceTiles
                                    ? std::clamp<std::int64_t>((c.window / 2 + 15) / 16 * 16, 16, 64)
                                    : attention::kDefaultBlockSize;
        slot = std::make_unique<BlockMask>(BlockMask::Build(Sliding(l) ? st->slidingMask : st->fullMask, shape, bs));
      }
    }
  }
  return st;
}

std::int64_t HeadChunkRows(std::int64_t V, std::int64_t requested) {
  if (requested > 0) return requested;
  const std::int64_t blocks = kHeadChunkBytes / (kGemmDepthBlock * std::max<std::int64_t>(V, 1) * 4);
  return std::max<std::int64_t>(1, blocks) * kGemmDepthBlock;
}

std::vector<std::int64_t> HeadChunks(std::int64_t T, std::int64_t rows) {
  std::vector<std::int64_t> bounds{0};
  for (std::int64_t r = rows; r < T; r += rows) bounds.push_back(r);
  if (bounds.size() > 1 && T - bounds.back() <= kGemmSmallRows) bounds.pop_back();
  bounds.push_back(T);
  return bounds;
}

void Transformer::LayerForward(std::int64_t l, const TrainState& st, LayerActivations& a, HostBuffer<float>& x,
                               bool save) const {
  const ModelConfig& c = config_;
  const std::int64_t T = st.T, D = c.width, H = c.heads, KV = c.kvHeads, Dh = c.headDim, F = c.ffn;
  const std::int64_t qDim = H * Dh, kvDim = KV * Dh;
  const float eps = static_cast<float>(c.normEps);
  const Shape shape = Shape::Self(1, T, H, KV, Dh);
  const BlockParams& p = blocks_[l];

  // LoRA: y (row stride ldy) += scale (x A^T) B^T for target t, keeping x A^T in a.loraT[t].
  const std::int64_t R = c.lora.rank;
  auto lora = [&](LoraTarget target, const float* in, std::int64_t nIn, float* y, std::int64_t ldy, std::int64_t nOut) {
    const int t = static_cast<int>(target);
    if (p.loraA[t] == nullptr) return;
    a.loraT[t] = Floats(T * R, "transformer lora x A^T");
    LoraForward(in, p.loraA[t]->value.data(), p.loraB[t]->value.data(), loraScale_, a.loraT[t].data(), y, ldy, T, nIn,
                nOut, R);
  };

  a.x = std::move(x);
  a.n1 = Floats(T * D, "transformer attention norm");
  a.rstd1 = Floats(T, "transformer rstd");
  RmsNormForward(a.x.data(), p.attnNorm->value.data(), a.n1.data(), a.rstd1.data(), T, D, eps);
  a.q = Floats(T * qDim, "transformer q");
  a.k = Floats(T * kvDim, "transformer k");
  a.v = Floats(T * kvDim, "transformer v");
  Project(a.n1.data(), p.q, p.qBias, a.q.data(), T, D, qDim, false);
  Project(a.n1.data(), p.k, p.kBias, a.k.data(), T, D, kvDim, false);
  Project(a.n1.data(), p.v, p.vBias, a.v.data(), T, D, kvDim, false);
  lora(LoraTarget::kQ, a.n1.data(), D, a.q.data(), qDim, qDim);
  lora(LoraTarget::kK, a.n1.data(), D, a.k.data(), kvDim, kvDim);
  lora(LoraTarget::kV, a.n1.data(), D, a.v.data(), kvDim, kvDim);
  if (p.qNorm) {  // RMSNorm over every head of q and k (rows of headDim), before RoPE
    a.qRaw = std::move(a.q);
    a.kRaw = std::move(a.k);
    a.q = Floats(T * qDim, "transformer q");
    a.k = Floats(T * kvDim, "transformer k");
    a.rstdQ = Floats(T * H, "transformer q norm rstd");
    a.rstdK = Floats(T * KV, "transformer k norm rstd");
    RmsNormForward(a.qRaw.data(), p.qNorm->value.data(), a.q.data(), a.rstdQ.data(), T * H, Dh, eps);
    RmsNormForward(a.kRaw.data(), p.kNorm->value.data(), a.k.data(), a.rstdK.data(), T * KV, Dh, eps);
  }
  RopeForward(rope_, a.q.data(), a.q.data(), st.positions.data(), T, H);
  RopeForward(rope_, a.k.data(), a.k.data(), st.positions.data(), T, KV);
  a.ao = Floats(T * qDim, "transformer attention out");
  a.lse = Floats(H * T, "transformer attention lse");
  attention::Options ao;
  ao.mask = Sliding(l) ? &st.slidingMask : &st.fullMask;
  const attention::ForwardArgs args{a.q.data(), a.k.data(), a.v.data(), Val(p.sinks), a.ao.data(), a.lse.data()};
  if (st.impl == AttentionImpl::kFused) {
    ao.blockMask = Sliding(l) ? st.slidingBlocks.get() : st.fullBlocks.get();
    attention::FusedForward(shape, ao, args);
  } else {
    attention::EagerForward(shape, ao, args, save ? &a.eager : nullptr);
  }
  a.xmid = Copy(a.x.data(), T * D, "transformer residual");
  Project(a.ao.data(), p.o, p.oBias, a.xmid.data(), T, qDim, D, true);
  lora(LoraTarget::kO, a.ao.data(), qDim, a.xmid.data(), D, D);
  a.n2 = Floats(T * D, "transformer mlp norm");
  a.rstd2 = Floats(T, "transformer rstd");
  RmsNormForward(a.xmid.data(), p.mlpNorm->value.data(), a.n2.data(), a.rstd2.data(), T, D, eps);
  x = Copy(a.xmid.data(), T * D, "transformer residual");
  if (c.experts > 0) {
    HostBuffer<float> y = Floats(T * D, "transformer moe output");
    MoeForward(Moe(p), a.n2.data(), y.data(), T, save ? &a.moe : nullptr, nullptr);
    ActiveKernels().add(x.data(), y.data(), T * D);
  } else {
    a.h = Floats(T * 2 * F, "transformer mlp gate_up");
    Project(a.n2.data(), p.gateUp, p.gateUpBias, a.h.data(), T, D, 2 * F, false);
    lora(LoraTarget::kGate, a.n2.data(), D, a.h.data(), 2 * F, F);
    lora(LoraTarget::kUp, a.n2.data(), D, a.h.data() + F, 2 * F, F);
    a.act = Floats(T * F, "transformer mlp activation");
    SwiGluForward(a.h.data(), a.act.data(), T, F, c.swiglu);
    Project(a.act.data(), p.down, p.downBias, x.data(), T, F, D, true);
    lora(LoraTarget::kDown, a.act.data(), F, x.data(), D, D);
  }
}

std::unique_ptr<TrainState> Transformer::Forward(const TokenBatch& b, const TrainForwardOptions& o, float* logp,
                                                 float* entropy) const {
  const std::shared_lock<std::shared_mutex> layoutLock(store_->layoutMutex());
  CheckStoreLayout();
  CheckBatch(b);
  if (!(o.temperature > 0.0f) || !std::isfinite(o.temperature)) {
    throw ArgumentError("temperature must be a positive finite number, got " + std::to_string(o.temperature));
  }
  if (o.headChunk < 0) throw ArgumentError("headChunk must be >= 0, got " + std::to_string(o.headChunk));
  if (device_ >= 0) return DeviceForward(b, o, logp, entropy);
  const ModelConfig& c = config_;
  const std::int64_t T = b.T, D = c.width, V = c.vocab;
  const float eps = static_cast<float>(c.normEps);
  const float scale = 1.0f / o.temperature;
  std::unique_ptr<TrainState> st = NewTrainState(b, o, false);

  HostBuffer<float> x = Floats(T * D, "transformer residual");
  if (embed_->bf16())
    EmbeddingForwardBf16(embed_->value16.data(), st->tokens.data(), x.data(), T, V, D);
  else
    EmbeddingForward(embed_->value.data(), st->tokens.data(), x.data(), T, V, D);
  if (shift_ != nullptr) {  // x += embed[prevTokens] . token_shift^T
    HostBuffer<float> e = Floats(T * D, "transformer previous-token embedding");
    if (embed_->bf16())
      EmbeddingForwardBf16(embed_->value16.data(), st->prevTokens.data(), e.data(), T, V, D);
    else
      EmbeddingForward(embed_->value.data(), st->prevTokens.data(), e.data(), T, V, D);
    Project(e.data(), shift_, nullptr, x.data(), T, D, D, true);
  }
  const bool keepAll = o.save && !o.checkpointLayers;
  if (o.save) st->layers.resize(static_cast<std::size_t>(c.layers));
  for (std::int64_t l = 0; l < c.layers; ++l) {
    LayerActivations local;
    LayerForward(l, *st, keepAll ? st->layers[l] : local, x, keepAll);
    if (o.save && !keepAll) st->layers[l].x = std::move(local.x);  // checkpointing: the input only
  }

  st->xf = std::move(x);
  st->nf = Floats(T * D, "transformer final norm");
  st->rstdf = Floats(T, "transformer rstd");
  RmsNormForward(st->xf.data(), norm_->value.data(), st->nf.data(), st->rstdf.data(), T, D, eps);
  st->lse = Floats(T, "transformer logits lse");
  st->entropy = Floats(T, "transformer entropy");
  // The LM head a chunk of rows at a time; a batch that is one chunk keeps its logits for the
  // backward, else the backward recomputes each chunk's.
  const std::vector<std::int64_t> chunks = HeadChunks(T, HeadChunkRows(V, o.headChunk));
  std::int64_t widest = 0;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) widest = std::max(widest, chunks[i + 1] - chunks[i]);
  HostBuffer<float> chunk = Floats(widest * V, "transformer logits chunk");
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    // Each chunk's rows kGemmDepthBlock at a time (its logits, then their log-softmax while they
    // are still in cache): every row's logits are the same product whatever rows share the call.
    for (std::int64_t s0 = chunks[i]; s0 < chunks[i + 1]; s0 += kGemmDepthBlock) {
      const std::int64_t n = std::min(kGemmDepthBlock, chunks[i + 1] - s0);
      float* z = chunk.data() + (s0 - chunks[i]) * V;
      Project(st->nf.data() + s0 * D, head_, nullptr, z, n, D, V, false);
      LogSoftmaxForward(z, st->targets.data() + s0, n, V, scale, logp ? logp + s0 : nullptr, st->entropy.data() + s0,
                        st->lse.data() + s0);
    }
  }
  if (entropy) std::memcpy(entropy, st->entropy.data(), static_cast<std::size_t>(T) * sizeof(float));
  if (!o.save) return nullptr;
  st->checkpointLayers = o.checkpointLayers;
  st->headChunk = HeadChunkRows(V, o.headChunk);
  if (chunks.size() == 2) st->logits = std::move(chunk);
  return st;
}

MoeParams Transformer::Moe(const BlockParams& p) const { return BlockMoeParams(config_, p, Weights, Val); }

void Transformer::CheckStoreLayout() const {
  if (store_->layoutVersion() != storeLayout_) {
    throw ArgumentError(
        "the store's parameters were added or removed since this model was made (LoRA adapters applied "
        "or merged): use the model made over the changed store");
  }
}

void Transformer::HeadBackward(TrainState& st, const float* dlogp, const float* dentropy, float* dn) const {
  const std::int64_t T = st.T, D = config_.width, V = config_.vocab;
  const float scale = 1.0f / st.temperature;
  const std::vector<std::int64_t> chunks = HeadChunks(T, st.headChunk);
  HostBuffer<float> own;
  if (st.logits.size() == 0) {
    std::int64_t widest = 0;
    for (std::size_t i = 0; i + 1 < chunks.size(); ++i) widest = std::max(widest, chunks[i + 1] - chunks[i]);
    own = Floats(widest * V, "transformer backward logits chunk");
  }
  // Row chunks at multiples of kGemmDepthBlock: the head's weight gradient (a sum over rows)
  // adds up in the order of one GEMM over all rows; each row's dn is its own product.
  // Kept logits are taken kGemmDepthBlock rows at a time (their gradient then the two products
  // while it is still in cache); recomputed ones a chunk at a time.
  std::vector<std::int64_t> parts = chunks;
  if (st.logits.size() != 0) {
    parts.clear();
    for (std::int64_t r = 0; r < T; r += kGemmDepthBlock) parts.push_back(r);
    if (parts.size() > 1 && T - parts.back() <= kGemmSmallRows) parts.pop_back();
    parts.push_back(T);
  }
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::int64_t r0 = parts[i], n = parts[i + 1] - r0;
    float* z = st.logits.size() != 0 ? st.logits.data() + r0 * V : own.data();
    if (st.logits.size() == 0) Project(st.nf.data() + r0 * D, head_, nullptr, z, n, D, V, false);
    LogSoftmaxBackward(z, st.targets.data() + r0, st.lse.data() + r0, st.entropy.data() + r0,
                       dlogp ? dlogp + r0 : nullptr, dentropy ? dentropy + r0 : nullptr, z, n, V, scale, false);
    ProjectBackward(st.nf.data() + r0 * D, head_, nullptr, z, dn + r0 * D, n, D, V, false);
  }
  st.logits.reset();
}

void Transformer::LayerBackward(std::int64_t l, TrainState& st, LayerActivations& a, HostBuffer<float>& dx,
                                HostBuffer<float>& dn, float* dsinks, float* dt) const {
  const ModelConfig& c = config_;
  const std::int64_t T = st.T, D = c.width, H = c.heads, KV = c.kvHeads, Dh = c.headDim, F = c.ffn;
  const std::int64_t qDim = H * Dh, kvDim = KV * Dh;
  const Shape shape = Shape::Self(1, T, H, KV, Dh);
  const BlockParams& p = blocks_[l];
  // LoRA: the adapter's part of the backward of a projection whose output gradient is dy (row
  // stride ldy) and whose input gradient dIn (+=) was just computed through the frozen weight.
  const std::int64_t R = c.lora.rank;
  auto lora = [&](LoraTarget target, const float* in, std::int64_t nIn, const float* dy, std::int64_t ldy,
                  std::int64_t nOut, float* dIn) {
    const int t = static_cast<int>(target);
    if (p.loraA[t] == nullptr) return;
    LoraBackward(in, p.loraA[t]->value.data(), p.loraB[t]->value.data(), loraScale_, a.loraT[t].data(), dy, ldy, dIn,
                 Grad(p.loraA[t]), Grad(p.loraB[t]), dt, T, nIn, nOut, R);
    a.loraT[t].reset();
  };

  if (c.experts > 0) {  // MoE: x_out = xmid + moe(norm(xmid))
    MoeGrads g;
    g.router = Grad(p.router);
    g.routerBias = Grad(p.routerBias);
    g.gateUp = Grad(p.expertsGateUp);
    g.gateUpBias = Grad(p.expertsGateUpBias);
    g.down = Grad(p.expertsDown);
    g.downBias = Grad(p.expertsDownBias);
    const int guT = static_cast<int>(LoraTarget::kExpertsGateUp), dnT = static_cast<int>(LoraTarget::kExpertsDown);
    if (p.loraA[guT] != nullptr) {
      g.gateUpLoraA = Grad(p.loraA[guT]);
      g.gateUpLoraB = Grad(p.loraB[guT]);
    }
    if (p.loraA[dnT] != nullptr) {
      g.downLoraA = Grad(p.loraA[dnT]);
      g.downLoraB = Grad(p.loraB[dnT]);
    }
    MoeBackward(Moe(p), a.n2.data(), dx.data(), a.moe, dn.data(), g, false, SavedUse::kConsume);
    a.moe = MoeSaved();
    a.n2.reset();
    RmsNormBackward(a.xmid.data(), p.mlpNorm->value.data(), a.rstd2.data(), dn.data(), dx.data(), Grad(p.mlpNorm), T, D,
                    true);
    a.xmid.reset();
  } else {  // dense MLP: x_out = xmid + down(swiglu(gate_up(norm(xmid))))
    HostBuffer<float> dact = Floats(T * F, "transformer backward d activation");
    ProjectBackward(a.act.data(), p.down, p.downBias, dx.data(), dact.data(), T, F, D, false);
    lora(LoraTarget::kDown, a.act.data(), F, dx.data(), D, D, dact.data());
    a.act.reset();
    HostBuffer<float> dh = Floats(T * 2 * F, "transformer backward d gate_up");
    SwiGluBackward(a.h.data(), dact.data(), dh.data(), T, F, c.swiglu, false);
    dact.reset();
    a.h.reset();
    ProjectBackward(a.n2.data(), p.gateUp, p.gateUpBias, dh.data(), dn.data(), T, D, 2 * F, false);
    lora(LoraTarget::kGate, a.n2.data(), D, dh.data(), 2 * F, F, dn.data());
    lora(LoraTarget::kUp, a.n2.data(), D, dh.data() + F, 2 * F, F, dn.data());
    dh.reset();
    a.n2.reset();
    RmsNormBackward(a.xmid.data(), p.mlpNorm->value.data(), a.rstd2.data(), dn.data(), dx.data(), Grad(p.mlpNorm), T, D,
                    true);
    a.xmid.reset();
  }
  {  // attention: xmid = x + o(attention(rope(norm?(q)), rope(norm?(k)), v))
    HostBuffer<float> dao = Floats(T * qDim, "transformer backward d attention out");
    ProjectBackward(a.ao.data(), p.o, p.oBias, dx.data(), dao.data(), T, qDim, D, false);
    lora(LoraTarget::kO, a.ao.data(), qDim, dx.data(), D, D, dao.data());
    HostBuffer<float> dq = Floats(T * qDim, "transformer backward dq");
    HostBuffer<float> dk = Floats(T * kvDim, "transformer backward dk");
    HostBuffer<float> dv = Floats(T * kvDim, "transformer backward dv");
    attention::Options ao;
    ao.mask = Sliding(l) ? &st.slidingMask : &st.fullMask;
    float* sinkGrad = p.sinks && p.sinks->trainable() ? dsinks : nullptr;
    const attention::BackwardArgs args{a.q.data(), a.k.data(), a.v.data(), Val(p.sinks), a.ao.data(), a.lse.data(),
                                       dao.data(), nullptr,    dq.data(),  dk.data(),    dv.data(),   sinkGrad};
    if (st.impl == AttentionImpl::kFused) {
      ao.blockMask = Sliding(l) ? st.slidingBlocks.get() : st.fullBlocks.get();
      attention::FusedBackward(shape, ao, args);
    } else {
      attention::EagerBackward(shape, ao, args, &a.eager);
      a.eager.probs.reset();
    }
    if (sinkGrad)
      for (std::int64_t h = 0; h < H; ++h) p.sinks->grad[h] += dsinks[h];
    dao.reset();
    a.ao.reset();
    a.lse.reset();
    a.q.reset();
    a.k.reset();
    a.v.reset();
    RopeBackward(rope_, dq.data(), dq.data(), st.positions.data(), T, H);
    RopeBackward(rope_, dk.data(), dk.data(), st.positions.data(), T, KV);
    if (p.qNorm) {
      RmsNormBackward(a.qRaw.data(), p.qNorm->value.data(), a.rstdQ.data(), dq.data(), dq.data(), Grad(p.qNorm), T * H,
                      Dh, false);
      RmsNormBackward(a.kRaw.data(), p.kNorm->value.data(), a.rstdK.data(), dk.data(), dk.data(), Grad(p.kNorm), T * KV,
                      Dh, false);
      a.qRaw.reset();
      a.kRaw.reset();
    }
    ProjectBackward(a.n1.data(), p.q, p.qBias, dq.data(), dn.data(), T, D, qDim, false);
    ProjectBackward(a.n1.data(), p.k, p.kBias, dk.data(), dn.data(), T, D, kvDim, true);
    ProjectBackward(a.n1.data(), p.v, p.vBias, dv.data(), dn.data(), T, D, kvDim, true);
    lora(LoraTarget::kQ, a.n1.data(), D, dq.data(), qDim, qDim, dn.data());
    lora(LoraTarget::kK, a.n1.data(), D, dk.data(), kvDim, kvDim, dn.data());
    lora(LoraTarget::kV, a.n1.data(), D, dv.data(), kvDim, kvDim, dn.data());
    a.n1.reset();
    RmsNormBackward(a.x.data(), p.attnNorm->value.data(), a.rstd1.data(), dn.data(), dx.data(), Grad(p.attnNorm), T, D,
                    true);
  }
  a = LayerActivations();
}

void Transformer::Backward(TrainState& st, const float* dlogp, const float* dentropy) const {
  const std::shared_lock<std::shared_mutex> layoutLock(store_->layoutMutex());
  CheckStoreLayout();
  if (device_ >= 0) return DeviceBackward(st, dlogp, dentropy);
  if (st.consumed) throw ArgumentError("this forward's activations were already used by a backward");
  if (st.layers.size() != static_cast<std::size_t>(config_.layers) || st.nf.size() == 0) {
    throw ArgumentError("the forward did not keep its activations (save was false)");
  }
  if (store_->step() != st.optimizerStep) {
    throw ArgumentError("the parameters changed (optimiser step " + std::to_string(st.optimizerStep) + " -> " +
                        std::to_string(store_->step()) + ") since this forward; run a new forward");
  }
  st.consumed = true;
  const ModelConfig& c = config_;
  const std::int64_t T = st.T, D = c.width, H = c.heads, V = c.vocab;

  // log-softmax and LM head per chunk (into embed's gradient when tied), final norm
  HostBuffer<float> dn = Floats(T * D, "transformer backward d norm");
  HeadBackward(st, dlogp, dentropy, dn.data());
  st.nf.reset();
  HostBuffer<float> dx = Floats(T * D, "transformer backward d residual");
  RmsNormBackward(st.xf.data(), norm_->value.data(), st.rstdf.data(), dn.data(), dx.data(), Grad(norm_), T, D, false);
  st.xf.reset();
  HostBuffer<float> dsinks = Floats(H, "transformer backward d sinks");
  const std::int64_t R = c.lora.rank;
  HostBuffer<float> dt = R > 0 ? Floats(T * R, "transformer backward lora dt") : HostBuffer<float>();

  for (std::int64_t l = c.layers - 1; l >= 0; --l) {
    LayerActivations& a = st.layers[l];
    if (st.checkpointLayers) {  // recompute the layer from its input (the same ops: the same activations)
      HostBuffer<float> x = std::move(a.x);
      LayerForward(l, st, a, x, true);
    }
    LayerBackward(l, st, a, dx, dn, dsinks.data(), dt.data());
  }
  if (embed_->trainable()) EmbeddingBackward(st.tokens.data(), dx.data(), embed_->grad.data(), T, V, D);
  if (shift_ != nullptr && (shift_->trainable() || embed_->trainable())) {
    // x += e . S^T with e = embed[prevTokens]: dS += dx^T . e, de = dx . S, embed[prevTokens] += de
    HostBuffer<float> e = Floats(T * D, "transformer previous-token embedding");
    if (embed_->bf16())
      EmbeddingForwardBf16(embed_->value16.data(), st.prevTokens.data(), e.data(), T, V, D);
    else
      EmbeddingForward(embed_->value.data(), st.prevTokens.data(), e.data(), T, V, D);
    HostBuffer<float> de =
        embed_->trainable() ? Floats(T * D, "transformer previous-token embedding gradient") : HostBuffer<float>();
    ProjectBackward(e.data(), shift_, nullptr, dx.data(), embed_->trainable() ? de.data() : nullptr, T, D, D, false);
    if (embed_->trainable()) EmbeddingBackward(st.prevTokens.data(), de.data(), embed_->grad.data(), T, V, D);
  }
  st.layers.clear();
}

}  // namespace sinkflex::model
