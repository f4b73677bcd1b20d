// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/transformer-reference.ts.
// Tests: test/model/transformer-inference.test.ts (cached, chunked and batched decoding, sampling),
//   transformer-policy.test.ts.
// Inference of the transformer: per-sequence KV caches, batched forward steps over many
// sessions of different lengths (chunked prefill and decoding in the same pass), and sampling.
//
// A batched forward concatenates the tokens every session processes in this step into one
// [R, width] matrix, so the projections, norms and MLPs run as single GEMMs over all sessions;
// each session then attends to its own cache with FusedForward (qLen = its new tokens, kvLen =
// its cached keys including them, qOffset = kvLen - qLen). Sliding-window layers keep only the
// last window - 1 keys between steps (a trimmed buffer, shifted to the front when it fills),
// full layers keep every key (grown geometrically up to the context).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "../attention/kernels.h"
#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "kernel_table.h"
#include "lora.h"
#include "transformer.h"
#include "transformer_params.h"

namespace sinkflex::model {
namespace {

using attention::Shape;

constexpr std::int64_t kMinCacheRows = 64;
constexpr std::int64_t kDecodeRows = 8;     // sessions with at most this many new tokens use DecodeAttention
constexpr std::int64_t kBigAttention = 32;  // sessions with at least this many new tokens get the whole pool

HostBuffer<float> Floats(std::int64_t n, const char* what) {
  return HostBuffer<float>(static_cast<std::size_t>(n), what);
}

/** Makes room for n more rows after dropping what a sliding window no longer needs. */
void PrepareCache(LayerCache& c, std::int64_t n, std::int64_t rowFloats, std::int64_t window, std::int64_t maxRows) {
  if (window > 0) {
    const std::int64_t keep = std::min(c.count, window - 1);
    c.start += c.count - keep;
    c.count = keep;
  }
  const std::int64_t need = c.count + n;
  if (c.start + need <= c.capacity) return;
  const std::size_t rowBytes = static_cast<std::size_t>(rowFloats) * sizeof(float);
  if (need <= c.capacity && 2 * c.count <= c.capacity) {  // shift to the front
    std::memmove(c.k.data(), c.k.data() + c.start * rowFloats, static_cast<std::size_t>(c.count) * rowBytes);
    std::memmove(c.v.data(), c.v.data() + c.start * rowFloats, static_cast<std::size_t>(c.count) * rowBytes);
    c.start = 0;
    return;
  }
  std::int64_t cap = std::max({need, 2 * c.capacity, kMinCacheRows, window > 0 ? 2 * window : 0});
  cap = std::max(need, std::min(cap, maxRows));
  HostBuffer<float> k = Floats(cap * rowFloats, "kv cache keys");
  HostBuffer<float> v = Floats(cap * rowFloats, "kv cache values");
  if (c.count > 0) {
    std::memcpy(k.data(), c.k.data() + c.start * rowFloats, static_cast<std::size_t>(c.count) * rowBytes);
    std::memcpy(v.data(), c.v.data() + c.start * rowFloats, static_cast<std::size_t>(c.count) * rowBytes);
  }
  c.k = std::move(k);
  c.v = std::move(v);
  c.capacity = cap;
  c.start = 0;
}

/** Floats of DecodeAttention's scratch for `rows` query rows, caches of up to maxKv keys. */
std::int64_t DecodeScratch(std::int64_t rows, std::int64_t G, std::int64_t Dh, std::int64_t maxKv) {
  const std::int64_t cols = rows * G, colsPad = (cols + 15) / 16 * 16;
  return Dh * colsPad + maxKv * colsPad + cols * maxKv + cols * Dh + 64;
}

/**
 * Sink attention of a few query rows against a session's cache, read in place: for row r at
 * absolute position P = qOffset + r and head h, the visible keys are the contiguous range
 * [max(0, P - window + 1), P] (window 0: [0, P]); z_j = c q.k_j, m = max(z, s_h),
 * out = sum_j exp(z_j - m) v_j / (sum_j exp(z_j - m) + exp(s_h - m)) (sinks may be null: no s_h term) — the semantics
 * of FusedForward with a causal (+ window) mask, without its per-call packing of every cached key and value into tiles,
 * which costs more than the attention itself for one new token. Per kv head, the scores of all its query rows and heads
 * come from one product K [keys x Dh] . Q^T [Dh x cols] (columns padded to a vector), the outputs from P . V.
 */
void DecodeAttention(const attention::KernelTable& kt, const float* q, const float* k, const float* v,
                     const float* sinks, float* out, std::int64_t rows, std::int64_t kvLen, std::int64_t window,
                     std::int64_t H, std::int64_t KV, std::int64_t Dh, float* scratch) {
  const std::int64_t G = H / KV, rowStride = KV * Dh;
  const std::int64_t cols = rows * G, colsPad = (cols + 15) / 16 * 16;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  const std::int64_t qOffset = kvLen - rows;
  const std::int64_t lo0 = window > 0 ? std::max<std::int64_t>(0, qOffset - window + 1) : 0;
  const std::int64_t n = kvLen - lo0;  // keys visible to some row
  float* qT = scratch;                 // [Dh][colsPad]
  float* st = qT + Dh * colsPad;       // [n][colsPad] raw scores
  float* pr = st + n * colsPad;        // [cols][n] probabilities (unnormalised)
  float* o = pr + cols * n;            // [cols][Dh]
  float inv[64];
  for (std::int64_t g = 0; g < KV; ++g) {
    // column c = r * G + i is query row r, head g * G + i
    for (std::int64_t d = 0; d < Dh; ++d) {
      float* dst = qT + d * colsPad;
      for (std::int64_t c = 0; c < colsPad; ++c) dst[c] = c < cols ? q[((c / G) * H + g * G + c % G) * Dh + d] : 0.0f;
    }
    const float* kg = k + lo0 * rowStride + g * Dh;
    const float* vg = v + lo0 * rowStride + g * Dh;
    kt.gemm(attention::GemmArgs{n, colsPad, Dh, kg, rowStride, 1, qT, colsPad, st, colsPad, false});
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t r = c / G, pos = qOffset + r;
      const std::int64_t lo = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
      float* z = pr + c * n;
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int64_t abs = lo0 + j;
        z[j] = abs >= lo && abs <= pos ? st[j * colsPad + c] * scale : -INFINITY;
      }
      const float sink = sinks ? sinks[g * G + c % G] : -INFINITY;  // no sinks: plain softmax
      const float m = std::max(kt.rowMax(z, n), sink);
      inv[c % 64] = 1.0f / (kt.expSubSum(z, z, n, m) + std::exp(sink - m));
      if (c % 64 == 63 || c == cols - 1) {
        // outputs of columns [c0, c]
        const std::int64_t c0 = c - c % 64;
        kt.gemm(attention::GemmArgs{c - c0 + 1, Dh, n, pr + c0 * n, n, 1, vg, rowStride, o, Dh, false});
        for (std::int64_t cc = c0; cc <= c; ++cc) {
          float* dst = out + ((cc / G) * H + g * G + cc % G) * Dh;
          const float f = inv[cc - c0];
          for (std::int64_t d = 0; d < Dh; ++d) dst[d] = o[(cc - c0) * Dh + d] * f;
        }
      }
    }
  }
}

/**
 * y[R, out] = x[R, in] W^T (+ b), or y += that with `accumulate`, for the rows of a decoding
 * step. The GEMM computes each row the same way whatever R (up to 128 rows it packs W one
 * panel at a time and reads it once, so a bfloat16 head is never widened whole), so a session's
 * logits do not depend on the sessions batched with it.
 */
void RowsLinear(const float* x, const Parameter* w, const Parameter* b, float* y, std::int64_t R, std::int64_t in,
                std::int64_t out, bool accumulate) {
  const KernelTable& kt = ActiveKernels();
  const WeightData wd = Weights(w);
  GemmMixed(false, true, R, out, in, 1.0f, x, false, in, wd.data, wd.bf16, in, accumulate ? 1.0f : 0.0f, y, out);
  if (b)
    for (std::int64_t r = 0; r < R; ++r) kt.add(y + r * out, b->value.data(), out);
}

}  // namespace

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
    default:
      return "";
  }
}

namespace {

/** The logits after vLLM's penalties (repetition over the whole history, frequency and presence over the job's output).
 */
const float* PenalisedLogits(const float* logits, std::int64_t V, const SampleParams& params, SampleScratch* scratch,
                             const SampleHistory* history) {
  const bool repetition = params.repetitionPenalty != 1.0;
  const bool output = params.presencePenalty != 0.0 || params.frequencyPenalty != 0.0;
  if ((!repetition && !output) || history == nullptr || history->total == 0) return logits;
  std::vector<float>& x = scratch->penalised;
  x.assign(logits, logits + V);
  if (repetition) {
    std::vector<std::uint8_t>& seen = scratch->seen;
    seen.assign(static_cast<std::size_t>(V), 0);
    for (std::int64_t i = 0; i < history->total; ++i) seen[static_cast<std::size_t>(history->tokens[i])] = 1;
    const float p = static_cast<float>(params.repetitionPenalty);
    for (std::int64_t i = 0; i < V; ++i) {
      if (seen[static_cast<std::size_t>(i)] != 0) x[i] = x[i] > 0.0f ? x[i] / p : x[i] * p;
    }
  }
  if (output && history->total > history->promptLen) {
    std::vector<std::int32_t>& counts = scratch->counts;
    counts.assign(static_cast<std::size_t>(V), 0);
    for (std::int64_t i = history->promptLen; i < history->total; ++i)
      ++counts[static_cast<std::size_t>(history->tokens[i])];
    const float fp = static_cast<float>(params.frequencyPenalty);
    const float pp = static_cast<float>(params.presencePenalty);
    for (std::int64_t i = 0; i < V; ++i) {
      const std::int32_t n = counts[static_cast<std::size_t>(i)];
      if (n > 0) x[i] = x[i] - fp * static_cast<float>(n) - pp;
    }
  }
  return x.data();
}

}  // namespace

std::pair<std::int32_t, float> SampleToken(const float* rawLogits, std::int64_t V, const SampleParams& params, Rng& rng,
                                           SampleScratch* scratch, const SampleHistory* history) {
  float rawMax = -INFINITY;
  for (std::int64_t i = 0; i < V; ++i) {
    const float x = rawLogits[i];
    if (!std::isfinite(x)) throw std::runtime_error("sampling: logits[" + std::to_string(i) + "] is not finite");
    if (x > rawMax) rawMax = x;
  }
  const attention::KernelTable& kt = attention::KernelsFor(attention::CpuIsa::kAuto);
  std::vector<float>& w = scratch->weights;
  w.resize(static_cast<std::size_t>(V));
  // vLLM's raw_logprobs: log_softmax of the model's own logits
  const double rawLogZ =
      params.logprobsMode == LogprobsMode::kRaw ? std::log(kt.expSubSum(rawLogits, w.data(), V, rawMax)) : 0.0;
  auto rawLogp = [&](std::int32_t token) {
    return static_cast<float>(static_cast<double>(rawLogits[token] - rawMax) - rawLogZ);
  };
  const float* logits = PenalisedLogits(rawLogits, V, params, scratch, history);
  float m = -INFINITY;
  std::int32_t arg = 0;
  for (std::int64_t i = 0; i < V; ++i) {
    if (logits[i] > m) {
      m = logits[i];
      arg = static_cast<std::int32_t>(i);
    }
  }
  if (params.temperature == 0.0) {
    if (params.logprobsMode == LogprobsMode::kRaw) return {arg, rawLogp(arg)};
    const double z = kt.expSubSum(logits, w.data(), V, m);
    return {arg, static_cast<float>(-std::log(z))};
  }
  // w_i = exp((x_i - m) / T), unnormalised (the most likely token's is 1)
  const float invT = static_cast<float>(1.0 / params.temperature);
  for (std::int64_t i = 0; i < V; ++i) w[i] = (logits[i] - m) * invT;
  const double z = kt.expSubSum(w.data(), w.data(), V, 0.0f);
  // min_p: keep the tokens whose probability is at least minP times the largest (weight >= minP)
  const bool minP = params.minP > 0.0;
  if (minP) {
    const float floor = static_cast<float>(params.minP);
    for (std::int64_t i = 0; i < V; ++i) {
      if (w[i] < floor) w[i] = 0.0f;
    }
    w[arg] = 1.0f;
  }
  std::int32_t token = -1;
  double mass = z;
  const bool truncate = minP || (params.topK > 0 && params.topK < V) || params.topP < 1.0;
  if (!truncate) {
    const double u = rng.Uniform() * z;
    double acc = 0.0;
    for (std::int64_t i = 0; i < V; ++i) {
      acc += w[i];
      if (acc > u && w[i] > 0.0f) {
        token = static_cast<std::int32_t>(i);
        break;
      }
    }
    if (token < 0) token = arg;  // u at the very top of the (rounded) total
  } else {
    // Most likely first, lower id first among equals: a deterministic order.
    auto& order = scratch->order;
    order.resize(static_cast<std::size_t>(V));
    for (std::int64_t i = 0; i < V; ++i) order[i] = {w[i], static_cast<std::int32_t>(i)};
    auto before = [](const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::int64_t kept = V;
    if (params.topK > 0 && params.topK < V) {
      kept = params.topK;
      std::partial_sort(order.begin(), order.begin() + kept, order.end(), before);
    } else {
      std::sort(order.begin(), order.end(), before);
    }
    // tokens min_p dropped (weight 0) are never kept
    while (kept > 1 && order[kept - 1].first <= 0.0f) --kept;
    mass = 0.0;
    for (std::int64_t i = 0; i < kept; ++i) mass += order[i].first;
    if (params.topP < 1.0) {
      const double target = params.topP * mass;
      double acc = 0.0;
      for (std::int64_t i = 0; i < kept; ++i) {
        acc += order[i].first;
        if (acc >= target) {
          kept = i + 1;
          mass = acc;
          break;
        }
      }
    }
    const double u = rng.Uniform() * mass;
    double acc = 0.0;
    token = order[0].second;
    for (std::int64_t i = 0; i < kept; ++i) {
      acc += order[i].first;
      if (acc > u) {
        token = order[i].second;
        break;
      }
    }
  }
  if (params.logprobsMode == LogprobsMode::kRaw) return {token, rawLogp(token)};
  // tempered: normalised over every token; processed: over the tokens min_p, top-k and top-p kept
  const double norm = params.logprobsMode == LogprobsMode::kProcessed ? mass : z;
  const double logp = static_cast<double>((logits[token] - m) * invT) - std::log(norm);
  return {token, static_cast<float>(logp)};
}

// ---- Session ----------------------------------------------------------------------------------

Session::Session(const Transformer& model, std::uint64_t seed)
    : model_(&model),
      layers_(static_cast<std::size_t>(model.config().layers)),
      logits_(static_cast<std::size_t>(model.config().vocab), "session logits"),
      rng_(seed) {}

void Session::Append(const std::int32_t* tokens, std::int64_t n) {
  const ModelConfig& c = model_->config();
  if (n < 0) throw ArgumentError("token count must be >= 0");
  for (std::int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab) {
      throw ArgumentError("tokens[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) + " is out of range [0, " +
                          std::to_string(c.vocab) + ")");
    }
  }
  if (length() + n > c.context) {
    throw ArgumentError("appending " + std::to_string(n) + " tokens to a session of " + std::to_string(length()) +
                        " would exceed the context (" + std::to_string(c.context) + ")");
  }
  pending_.insert(pending_.end(), tokens, tokens + n);
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

void Session::StartSample(const SampleParams& p) {
  if (jobActive_) throw ArgumentError("the session already has a job running");
  if (length() == 0) throw ArgumentError("append a prompt before sampling (the session is empty)");
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) throw ArgumentError("temperature must be >= 0");
  if (!(p.topP > 0.0 && p.topP <= 1.0)) throw ArgumentError("topP must be in (0, 1]");
  if (p.topK < 0) throw ArgumentError("topK must be >= 0");
  if (!(p.minP >= 0.0 && p.minP <= 1.0)) throw ArgumentError("minP must be in [0, 1]");
  if (!(p.repetitionPenalty > 0.0) || !std::isfinite(p.repetitionPenalty))
    throw ArgumentError("repetitionPenalty must be > 0");
  if (!(p.presencePenalty >= -2.0 && p.presencePenalty <= 2.0))
    throw ArgumentError("presencePenalty must be in [-2, 2]");
  if (!(p.frequencyPenalty >= -2.0 && p.frequencyPenalty <= 2.0))
    throw ArgumentError("frequencyPenalty must be in [-2, 2]");
  if (p.maxTokens < 0) throw ArgumentError("maxTokens must be >= 0");
  for (std::int32_t s : p.stop) {
    if (s < 0 || s >= model_->config().vocab)
      throw ArgumentError("stop token " + std::to_string(s) + " is out of range");
  }
  params_ = p;
  jobStart_ = static_cast<std::int64_t>(tokens_.size());
  jobActive_ = true;
  jobSamples_ = true;
  generated_ = 0;
  finish_ = FinishReason::kNone;
  outTokens_.clear();
  outLogps_.clear();
}

void Session::StartPrefill() {
  if (jobActive_) throw ArgumentError("the session already has a job running");
  jobActive_ = true;
  jobSamples_ = false;
  finish_ = FinishReason::kNone;
  outTokens_.clear();
  outLogps_.clear();
}

void Session::Drain(std::vector<std::int32_t>* tokens, std::vector<float>* logps) {
  tokens->swap(outTokens_);
  logps->swap(outLogps_);
  outTokens_.clear();
  outLogps_.clear();
}

std::unique_ptr<Session> Session::Fork(std::uint64_t seed) const {
  if (jobActive_) throw ArgumentError("cannot fork a session while a job is running");
  auto s = std::make_unique<Session>(*model_, seed);
  const ModelConfig& c = model_->config();
  const std::int64_t rowFloats = c.kvHeads * c.headDim;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerCache& from = layers_[l];
    LayerCache& to = s->layers_[l];
    if (from.count == 0) continue;
    if (model_->device() >= 0) {
      model_->DeviceCopyCache(from, to);
      continue;
    }
    PrepareCache(to, from.count, rowFloats, 0, from.count);
    const std::size_t bytes = static_cast<std::size_t>(from.count * rowFloats) * sizeof(float);
    std::memcpy(to.k.data(), from.k.data() + from.start * rowFloats, bytes);
    std::memcpy(to.v.data(), from.v.data() + from.start * rowFloats, bytes);
    to.count = from.count;
  }
  s->processed_ = processed_;
  s->lastToken_ = lastToken_;
  s->pending_ = pending_;
  s->tokens_ = tokens_;
  s->hasLogits_ = hasLogits_;
  std::memcpy(s->logits_.data(), logits_.data(), logits_.size() * sizeof(float));
  return s;
}

std::size_t Session::Bytes() const {
  const ModelConfig& c = model_->config();
  std::size_t n = logits_.size() * sizeof(float);
  for (const LayerCache& l : layers_)
    n += 2 * static_cast<std::size_t>(l.capacity * c.kvHeads * c.headDim) * sizeof(float);
  return n;
}

// ---- batched steps ------------------------------------------------------------------------------

ChunkRows Transformer::GatherChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const {
  const std::size_t S = work.size();
  ChunkRows r;
  r.offset.assign(S + 1, 0);
  for (std::size_t s = 0; s < S; ++s) r.offset[s + 1] = r.offset[s] + counts[s];
  r.rows = r.offset[S];
  r.tokens = HostBuffer<std::int32_t>(static_cast<std::size_t>(r.rows), "decode tokens");
  r.positions = HostBuffer<std::int32_t>(static_cast<std::size_t>(r.rows), "decode positions");
  for (std::size_t s = 0; s < S; ++s) {
    for (std::int64_t i = 0; i < counts[s]; ++i) {
      r.tokens[r.offset[s] + i] = work[s]->pending_[i];
      r.positions[r.offset[s] + i] = static_cast<std::int32_t>(work[s]->processed_ + i);
    }
  }
  // config.tokenShift: the token before each row (the session's last processed one for its first)
  if (shift_ != nullptr) {
    r.prevTokens = HostBuffer<std::int32_t>(static_cast<std::size_t>(r.rows), "decode previous tokens");
    for (std::size_t s = 0; s < S; ++s) {
      for (std::int64_t i = 0; i < counts[s]; ++i)
        r.prevTokens[r.offset[s] + i] = i == 0 ? work[s]->lastToken_ : work[s]->pending_[i - 1];
    }
  }
  return r;
}

void Transformer::ForwardChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const {
  if (device_ >= 0) return DeviceForwardChunk(work, counts);
  const ModelConfig& c = config_;
  const std::int64_t D = c.width, H = c.heads, KV = c.kvHeads, Dh = c.headDim, F = c.ffn, V = c.vocab;
  const std::int64_t qDim = H * Dh, kvDim = KV * Dh;
  const float eps = static_cast<float>(c.normEps);
  const std::size_t S = work.size();
  const ChunkRows rows = GatherChunk(work, counts);
  const std::vector<std::int64_t>& offset = rows.offset;
  const std::int64_t R = rows.rows;
  const HostBuffer<std::int32_t>& tokens = rows.tokens;
  const HostBuffer<std::int32_t>& positions = rows.positions;
  const HostBuffer<std::int32_t>& prevTokens = rows.prevTokens;
  HostBuffer<float> x = Floats(R * D, "decode residual");
  HostBuffer<float> n = Floats(R * D, "decode norm");
  HostBuffer<float> rstd = Floats(R, "decode rstd");
  HostBuffer<float> q = Floats(R * qDim, "decode q");
  HostBuffer<float> k = Floats(R * kvDim, "decode k");
  HostBuffer<float> v = Floats(R * kvDim, "decode v");
  HostBuffer<float> ao = Floats(R * qDim, "decode attention out");
  HostBuffer<float> lse = Floats(R * H, "decode attention lse");
  const bool moe = c.experts > 0;
  HostBuffer<float> h = moe ? HostBuffer<float>() : Floats(R * 2 * F, "decode mlp gate_up");
  HostBuffer<float> act = moe ? HostBuffer<float>() : Floats(R * F, "decode mlp activation");
  HostBuffer<float> mlpOut = moe ? Floats(R * D, "decode moe output") : HostBuffer<float>();
  HostBuffer<float> headRstd = c.qkNorm ? Floats(R * H, "decode q/k norm rstd") : HostBuffer<float>();
  // LoRA: y (row stride ldy) += scale (x A^T) B^T for the adapted projections.
  HostBuffer<float> loraT = c.lora.enabled() ? Floats(R * c.lora.rank, "decode lora x A^T") : HostBuffer<float>();
  auto lora = [&](const BlockParams& p, LoraTarget target, const float* in, std::int64_t nIn, float* y,
                  std::int64_t ldy, std::int64_t nOut) {
    const int t = static_cast<int>(target);
    if (p.loraA[t] == nullptr) return;
    LoraForward(in, p.loraA[t]->value.data(), p.loraB[t]->value.data(), loraScale_, loraT.data(), y, ldy, R, nIn, nOut,
                c.lora.rank);
  };

  // Attention scratch (scores of one row) per thread, sized for the longest cache of this step.
  const attention::KernelTable& akt = attention::KernelsFor(attention::CpuIsa::kAuto);
  std::int64_t maxKv = 1;
  for (std::size_t s = 0; s < S; ++s) maxKv = std::max(maxKv, work[s]->length());
  const std::int64_t zStride = (DecodeScratch(kDecodeRows, H / KV, Dh, maxKv) + 15) / 16 * 16;
  HostBuffer<float> zScratch = Floats(zStride * ThreadPool::Global().size(), "decode attention scores");

  // Attention work per session: big ones use the whole pool, the rest run side by side.
  std::vector<std::size_t> big, small;
  for (std::size_t s = 0; s < S; ++s) (counts[s] >= kBigAttention || S == 1 ? big : small).push_back(s);

  if (embed_->bf16())
    EmbeddingForwardBf16(embed_->value16.data(), tokens.data(), x.data(), R, V, D);
  else
    EmbeddingForward(embed_->value.data(), tokens.data(), x.data(), R, V, D);
  if (shift_ != nullptr) {  // x += embed[prevTokens] . token_shift^T
    HostBuffer<float> e = Floats(R * D, "decode previous-token embedding");
    if (embed_->bf16())
      EmbeddingForwardBf16(embed_->value16.data(), prevTokens.data(), e.data(), R, V, D);
    else
      EmbeddingForward(embed_->value.data(), prevTokens.data(), e.data(), R, V, D);
    RowsLinear(e.data(), shift_, nullptr, x.data(), R, D, D, true);
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const BlockParams& p = blocks_[l];
    const bool sliding = Sliding(l);
    RmsNormForward(x.data(), p.attnNorm->value.data(), n.data(), rstd.data(), R, D, eps);
    RowsLinear(n.data(), p.q, p.qBias, q.data(), R, D, qDim, false);
    RowsLinear(n.data(), p.k, p.kBias, k.data(), R, D, kvDim, false);
    RowsLinear(n.data(), p.v, p.vBias, v.data(), R, D, kvDim, false);
    lora(p, LoraTarget::kQ, n.data(), D, q.data(), qDim, qDim);
    lora(p, LoraTarget::kK, n.data(), D, k.data(), kvDim, kvDim);
    lora(p, LoraTarget::kV, n.data(), D, v.data(), kvDim, kvDim);
    if (p.qNorm) {
      RmsNormForward(q.data(), p.qNorm->value.data(), q.data(), headRstd.data(), R * H, Dh, eps);
      RmsNormForward(k.data(), p.kNorm->value.data(), k.data(), headRstd.data(), R * KV, Dh, eps);
    }
    RopeForward(rope_, q.data(), q.data(), positions.data(), R, H);
    RopeForward(rope_, k.data(), k.data(), positions.data(), R, KV);
    for (std::size_t s = 0; s < S; ++s) {
      LayerCache& cache = work[s]->layers_[l];
      PrepareCache(cache, counts[s], kvDim, sliding ? c.window : 0, c.context);
      const std::size_t bytes = static_cast<std::size_t>(counts[s] * kvDim) * sizeof(float);
      std::memcpy(cache.k.data() + (cache.start + cache.count) * kvDim, k.data() + offset[s] * kvDim, bytes);
      std::memcpy(cache.v.data() + (cache.start + cache.count) * kvDim, v.data() + offset[s] * kvDim, bytes);
      cache.count += counts[s];
    }
    auto attend = [&](std::size_t s, int thread) {
      const LayerCache& cache = work[s]->layers_[l];
      const float* kc = cache.k.data() + cache.start * kvDim;
      const float* vc = cache.v.data() + cache.start * kvDim;
      if (counts[s] <= kDecodeRows) {
        float* z = zScratch.data() + static_cast<std::size_t>(thread) * zStride;
        DecodeAttention(akt, q.data() + offset[s] * qDim, kc, vc, Val(p.sinks), ao.data() + offset[s] * qDim, counts[s],
                        cache.count, sliding ? c.window : 0, H, KV, Dh, z);
        return;
      }
      Shape shape{1, counts[s], cache.count, H, KV, Dh, cache.count - counts[s]};
      attention::Options opts;
      opts.mask = sliding ? &window_ : &causal_;
      // lse is laid out [H, qLen] per call: session s uses rows offset[s] * H .. offset[s + 1] * H.
      attention::FusedForward(shape, opts,
                              attention::ForwardArgs{q.data() + offset[s] * qDim, kc, vc, Val(p.sinks),
                                                     ao.data() + offset[s] * qDim, lse.data() + offset[s] * H});
    };
    for (std::size_t s : big) attend(s, 0);
    if (!small.empty()) {
      ThreadPool::Global().ParallelFor(static_cast<std::int64_t>(small.size()), [&](std::int64_t i, int thread) {
        attend(small[static_cast<std::size_t>(i)], thread);
      });
    }
    RowsLinear(ao.data(), p.o, p.oBias, x.data(), R, qDim, D, true);
    lora(p, LoraTarget::kO, ao.data(), qDim, x.data(), D, D);
    RmsNormForward(x.data(), p.mlpNorm->value.data(), n.data(), rstd.data(), R, D, eps);
    if (moe) {
      MoeForward(Moe(p), n.data(), mlpOut.data(), R, nullptr, nullptr);
      ActiveKernels().add(x.data(), mlpOut.data(), R * D);
    } else {
      RowsLinear(n.data(), p.gateUp, p.gateUpBias, h.data(), R, D, 2 * F, false);
      lora(p, LoraTarget::kGate, n.data(), D, h.data(), 2 * F, F);
      lora(p, LoraTarget::kUp, n.data(), D, h.data() + F, 2 * F, F);
      SwiGluForward(h.data(), act.data(), R, F, c.swiglu);
      RowsLinear(act.data(), p.down, p.downBias, x.data(), R, F, D, true);
      lora(p, LoraTarget::kDown, act.data(), F, x.data(), D, D);
    }
  }

  // Logits only for sessions whose pending tokens are all processed now (their last row).
  std::vector<std::size_t> needs;
  for (std::size_t s = 0; s < S; ++s) {
    if (counts[s] == static_cast<std::int64_t>(work[s]->pending_.size())) needs.push_back(s);
  }
  if (!needs.empty()) {
    const std::int64_t L = static_cast<std::int64_t>(needs.size());
    HostBuffer<float> last = Floats(L * D, "decode last rows");
    for (std::int64_t i = 0; i < L; ++i) {
      std::memcpy(last.data() + i * D, x.data() + (offset[needs[i] + 1] - 1) * D,
                  static_cast<std::size_t>(D) * sizeof(float));
    }
    RmsNormForward(last.data(), norm_->value.data(), last.data(), rstd.data(), L, D, eps);
    HostBuffer<float> logits = Floats(L * V, "decode logits");
    RowsLinear(last.data(), head_, nullptr, logits.data(), L, D, V, false);
    for (std::int64_t i = 0; i < L; ++i) {
      std::memcpy(work[needs[i]]->logits_.data(), logits.data() + i * V, static_cast<std::size_t>(V) * sizeof(float));
    }
  }
  for (std::size_t s = 0; s < S; ++s) {
    Session& ss = *work[s];
    if (counts[s] > 0) ss.lastToken_ = ss.pending_[counts[s] - 1];
    ss.pending_.erase(ss.pending_.begin(), ss.pending_.begin() + counts[s]);
    ss.processed_ += counts[s];
    ss.hasLogits_ = ss.pending_.empty();
  }
}

void Transformer::Run(const std::vector<Session*>& sessions, const RunOptions& opts) const {
  const std::shared_lock<std::shared_mutex> layoutLock(store_->layoutMutex());
  CheckStoreLayout();
  if (opts.maxForwards < 0) throw ArgumentError("maxForwards must be >= 0");
  if (opts.prefillChunk < 1) throw ArgumentError("prefillChunk must be >= 1");
  std::unordered_set<const Session*> seen;
  for (const Session* s : sessions) {
    if (s == nullptr || s->model_ != this) throw ArgumentError("every session must belong to this model");
    if (!seen.insert(s).second) throw ArgumentError("a session appears twice in one run");
  }
  const ModelConfig& c = config_;
  ThreadPool& pool = ThreadPool::Global();
  std::vector<SampleScratch> scratch(static_cast<std::size_t>(pool.size()));
  auto sampleOne = [&](Session& s, int thread) {
    if (!s.jobActive_) return;
    if (!s.jobSamples_) {
      if (s.pending_.empty()) s.jobActive_ = false;  // prefill done
      return;
    }
    if (!s.pending_.empty() || !s.hasLogits_) return;
    auto finish = [&](FinishReason r) {
      s.finish_ = r;
      s.jobActive_ = false;
    };
    if (s.generated_ >= s.params_.maxTokens) return finish(FinishReason::kLength);
    if (s.length() >= c.context) return finish(FinishReason::kContext);
    const SampleHistory history{s.tokens_.data(), s.jobStart_, static_cast<std::int64_t>(s.tokens_.size())};
    const auto [tok, logp] = SampleToken(s.logits_.data(), c.vocab, s.params_, s.rng_, &scratch[thread], &history);
    s.tokens_.push_back(tok);
    s.outTokens_.push_back(tok);
    s.outLogps_.push_back(logp);
    ++s.generated_;
    s.pending_.push_back(tok);
    s.hasLogits_ = false;
    if (std::find(s.params_.stop.begin(), s.params_.stop.end(), tok) != s.params_.stop.end()) {
      finish(FinishReason::kStop);
    } else if (s.generated_ >= s.params_.maxTokens) {
      finish(FinishReason::kLength);
    } else if (s.length() >= c.context) {
      finish(FinishReason::kContext);
    }
  };
  for (std::int64_t forwards = 0;; ++forwards) {
    pool.ParallelFor(static_cast<std::int64_t>(sessions.size()),
                     [&](std::int64_t i, int thread) { sampleOne(*sessions[static_cast<std::size_t>(i)], thread); });
    if (forwards >= opts.maxForwards) break;
    std::vector<Session*> work;
    std::vector<std::int64_t> counts;
    for (Session* s : sessions) {
      if (s->jobActive_ && !s->pending_.empty()) {
        work.push_back(s);
        counts.push_back(std::min<std::int64_t>(opts.prefillChunk, static_cast<std::int64_t>(s->pending_.size())));
      }
    }
    if (work.empty()) break;
    ForwardChunk(work, counts);
  }
}

}  // namespace sinkflex::model
