// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU transformer
//   (itself checked against test/model/fixtures/transformer-reference.ts).
// Tests: test/model/transformer-cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// Inference of the transformer on a CUDA device: one batched forward step over the pending
// tokens of many sessions (transformer_infer.cc's ForwardChunk, op for op, over the CUDA ops
// table), with each session's KV cache in device memory. Sessions with a few new tokens
// (decoding) attend to their caches in one launch for all of them (decodeAttention); longer
// chunks (prefill) use the fused CUDA attention with qOffset = cached keys. Every config the CPU
// runs runs here (q/k norm, no sinks, tied or bfloat16 embeddings and head, MoE MLPs). The
// logits of the last rows are copied to the host, where Run samples exactly as on the CPU.
#include <algorithm>
#include <cstring>

#include "../core/cuda_device.h"
#include "../core/errors.h"
#include "transformer_device.h"

namespace sinkflex::model {
namespace {

using attention::Shape;

constexpr std::int64_t kMinCacheRows = 64;
constexpr std::int64_t kDecodeRows = 8;  // sessions with at most this many new tokens use decodeAttention

/**
 * Makes room for n more rows after dropping what a sliding window no longer needs (the CPU's
 * PrepareCache, except that the live rows move to a new buffer instead of in place: device
 * copies must not overlap).
 */
void PrepareDeviceCache(LayerCache& c, std::int64_t n, std::int64_t rowFloats, std::int64_t window,
                        std::int64_t maxRows, int device) {
  if (window > 0) {
    const std::int64_t keep = std::min(c.count, window - 1);
    c.start += c.count - keep;
    c.count = keep;
  }
  const std::int64_t need = c.count + n;
  if (c.start + need <= c.capacity) return;
  std::int64_t cap = c.capacity;
  if (!(need <= c.capacity && 2 * c.count <= c.capacity)) {  // grow (else: the same size, rows moved to the front)
    cap = std::max({need, 2 * c.capacity, kMinCacheRows, window > 0 ? 2 * window : 0});
    cap = std::max(need, std::min(cap, maxRows));
  }
  const std::size_t rows = static_cast<std::size_t>(cap * rowFloats);
  DeviceBuffer<float> k(device, rows, "kv cache keys (cuda)");
  DeviceBuffer<float> v(device, rows, "kv cache values (cuda)");
  if (c.count > 0) {
    const std::size_t bytes = static_cast<std::size_t>(c.count * rowFloats) * sizeof(float);
    CopyOnDevice(device, k.data(), c.dk.data() + c.start * rowFloats, bytes);
    CopyOnDevice(device, v.data(), c.dv.data() + c.start * rowFloats, bytes);
  }
  c.dk = std::move(k);
  c.dv = std::move(v);
  c.capacity = cap;
  c.start = 0;
}

}  // namespace

void Transformer::DeviceCopyCache(const LayerCache& from, LayerCache& to) const {
  if (from.count == 0) return;
  const std::int64_t rowFloats = config_.kvHeads * config_.headDim;
  const std::size_t n = static_cast<std::size_t>(from.count * rowFloats);
  to.dk = DeviceBuffer<float>(device_, n, "kv cache keys (cuda)");
  to.dv = DeviceBuffer<float>(device_, n, "kv cache values (cuda)");
  CopyOnDevice(device_, to.dk.data(), from.dk.data() + from.start * rowFloats, n * sizeof(float));
  CopyOnDevice(device_, to.dv.data(), from.dv.data() + from.start * rowFloats, n * sizeof(float));
  to.capacity = from.count;
  to.start = 0;
  to.count = from.count;
}

void Transformer::DeviceForwardChunk(const std::vector<Session*>& work, const std::vector<std::int64_t>& counts) const {
  const DeviceContext cx = DeviceContext::Get(device_);
  const ModelOps& ops = cx.ops;
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
  const DeviceBuffer<std::int32_t> dTokens = cx.Upload(tokens.data(), R, "decode tokens (cuda)");
  const DeviceBuffer<std::int32_t> dPositions = cx.Upload(positions.data(), R, "decode positions (cuda)");
  DeviceBuffer<float> x = cx.Floats(R * D, "decode residual (cuda)");
  DeviceBuffer<float> n = cx.Floats(R * D, "decode norm (cuda)");
  DeviceBuffer<float> rstd = cx.Floats(R, "decode rstd (cuda)");
  DeviceBuffer<float> q = cx.Floats(R * qDim, "decode q (cuda)");
  DeviceBuffer<float> k = cx.Floats(R * kvDim, "decode k (cuda)");
  DeviceBuffer<float> v = cx.Floats(R * kvDim, "decode v (cuda)");
  DeviceBuffer<float> ao = cx.Floats(R * qDim, "decode attention out (cuda)");
  DeviceBuffer<float> lse = cx.Floats(R * H, "decode attention lse (cuda)");
  const bool moe = c.experts > 0;
  const DeviceMoe* moeOps = moe ? &cx.Moe() : nullptr;
  DeviceBuffer<float> h = moe ? DeviceBuffer<float>() : cx.Floats(R * 2 * F, "decode mlp gate_up (cuda)");
  DeviceBuffer<float> act = moe ? DeviceBuffer<float>() : cx.Floats(R * F, "decode mlp activation (cuda)");
  DeviceBuffer<float> mlpOut = moe ? cx.Floats(R * D, "decode moe output (cuda)") : DeviceBuffer<float>();
  DeviceBuffer<float> headRstd = c.qkNorm ? cx.Floats(R * H, "decode q/k norm rstd (cuda)") : DeviceBuffer<float>();

  // LoRA: y (row stride ldy) += scale (x A^T) B^T for the adapted projections.
  DeviceBuffer<float> loraT =
      c.lora.enabled() ? cx.Floats(R * c.lora.rank, "decode lora x A^T (cuda)") : DeviceBuffer<float>();
  auto lora = [&](const BlockParams& p, LoraTarget target, const float* in, std::int64_t nIn, float* y,
                  std::int64_t ldy, std::int64_t nOut) {
    const int t = static_cast<int>(target);
    if (p.loraA[t] == nullptr) return;
    DeviceLoraForward(cx, p.loraA[t], p.loraB[t], loraScale_, in, loraT.data(), y, ldy, R, nIn, nOut, c.lora.rank);
  };

  cx.Embed(embed_, dTokens.data(), x.data(), R, V, D);
  if (shift_ != nullptr) {  // x += embed[prevTokens] . token_shift^T
    const DeviceBuffer<std::int32_t> dPrev = cx.Upload(prevTokens.data(), R, "decode previous tokens (cuda)");
    DeviceBuffer<float> e = cx.Floats(R * D, "decode previous-token embedding (cuda)");
    cx.Embed(embed_, dPrev.data(), e.data(), R, V, D);
    cx.LinearAdd(e.data(), shift_, nullptr, x.data(), R, D, D);
  }
  std::vector<DecodeRow> decode;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const BlockParams& p = blocks_[l];
    const bool sliding = Sliding(l);
    ops.rmsNormForward(x.data(), p.attnNorm->dValue.data(), n.data(), rstd.data(), R, D, eps);
    cx.Project(n.data(), p.q, p.qBias, q.data(), R, D, qDim, false);
    cx.Project(n.data(), p.k, p.kBias, k.data(), R, D, kvDim, false);
    cx.Project(n.data(), p.v, p.vBias, v.data(), R, D, kvDim, false);
    lora(p, LoraTarget::kQ, n.data(), D, q.data(), qDim, qDim);
    lora(p, LoraTarget::kK, n.data(), D, k.data(), kvDim, kvDim);
    lora(p, LoraTarget::kV, n.data(), D, v.data(), kvDim, kvDim);
    if (p.qNorm) {
      ops.rmsNormForward(q.data(), p.qNorm->dValue.data(), q.data(), headRstd.data(), R * H, Dh, eps);
      ops.rmsNormForward(k.data(), p.kNorm->dValue.data(), k.data(), headRstd.data(), R * KV, Dh, eps);
    }
    cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, q.data(), q.data(), dPositions.data(), R, H, false);
    cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, k.data(), k.data(), dPositions.data(), R, KV, false);
    decode.clear();
    for (std::size_t s = 0; s < S; ++s) {
      LayerCache& cache = work[s]->layers_[l];
      PrepareDeviceCache(cache, counts[s], kvDim, sliding ? c.window : 0, c.context, device_);
      const std::size_t bytes = static_cast<std::size_t>(counts[s] * kvDim) * sizeof(float);
      CopyOnDevice(device_, cache.dk.data() + (cache.start + cache.count) * kvDim, k.data() + offset[s] * kvDim, bytes);
      CopyOnDevice(device_, cache.dv.data() + (cache.start + cache.count) * kvDim, v.data() + offset[s] * kvDim, bytes);
      cache.count += counts[s];
      const float* kc = cache.dk.data() + cache.start * kvDim;
      const float* vc = cache.dv.data() + cache.start * kvDim;
      if (counts[s] <= kDecodeRows) {
        // Row i sits at cache row pos = count - counts + i and sees [pos - window + 1, pos] (window 0: [0, pos]).
        for (std::int64_t i = 0; i < counts[s]; ++i) {
          const std::int64_t pos = cache.count - counts[s] + i;
          const std::int64_t lo = sliding ? std::max<std::int64_t>(0, pos - c.window + 1) : 0;
          decode.push_back(DecodeRow{offset[s] + i, kc, vc, lo, pos - lo + 1});
        }
        continue;
      }
      attention::Options opts;
      opts.mask = sliding ? &window_ : &causal_;
      attention::DeviceForwardArgs args;
      args.q = q.data() + offset[s] * qDim;
      args.k = kc;
      args.v = vc;
      args.sinks = DVal(p.sinks);
      args.out = ao.data() + offset[s] * qDim;
      args.lse = lse.data() + offset[s] * H;  // [H, qLen] per call: rows offset[s] * H .. offset[s + 1] * H
      cx.attention.fusedForward(device_, Shape{1, counts[s], cache.count, H, KV, Dh, cache.count - counts[s]}, opts,
                                args);
    }
    cx.kernels.decodeAttention(decode.data(), static_cast<std::int64_t>(decode.size()), q.data(), DVal(p.sinks),
                               ao.data(), H, KV, Dh);
    cx.LinearAdd(ao.data(), p.o, p.oBias, x.data(), R, qDim, D);
    lora(p, LoraTarget::kO, ao.data(), qDim, x.data(), D, D);
    ops.rmsNormForward(x.data(), p.mlpNorm->dValue.data(), n.data(), rstd.data(), R, D, eps);
    if (moe) {
      moeOps->forward(DeviceMoeParams(c, p), n.data(), mlpOut.data(), R, nullptr, nullptr);
      cx.kernels.add(x.data(), mlpOut.data(), R * D);
    } else {
      cx.Project(n.data(), p.gateUp, p.gateUpBias, h.data(), R, D, 2 * F, false);
      lora(p, LoraTarget::kGate, n.data(), D, h.data(), 2 * F, F);
      lora(p, LoraTarget::kUp, n.data(), D, h.data() + F, 2 * F, F);
      ops.swiGluForward(h.data(), act.data(), R, F, c.swiglu);
      cx.LinearAdd(act.data(), p.down, p.downBias, x.data(), R, F, D);
      lora(p, LoraTarget::kDown, act.data(), F, x.data(), D, D);
    }
  }

  // Logits only for sessions whose pending tokens are all processed now (their last row).
  std::vector<std::size_t> needs;
  std::vector<std::int32_t> lastRows;
  for (std::size_t s = 0; s < S; ++s) {
    if (counts[s] == static_cast<std::int64_t>(work[s]->pending_.size())) {
      needs.push_back(s);
      lastRows.push_back(static_cast<std::int32_t>(offset[s + 1] - 1));
    }
  }
  if (!needs.empty()) {
    const std::int64_t L = static_cast<std::int64_t>(needs.size());
    const DeviceBuffer<std::int32_t> rows = cx.Upload(lastRows.data(), L, "decode last rows (cuda)");
    DeviceBuffer<float> last = cx.Floats(L * D, "decode last rows (cuda)");
    cx.kernels.gatherRows(x.data(), rows.data(), last.data(), L, D);
    ops.rmsNormForward(last.data(), norm_->dValue.data(), n.data(), rstd.data(), L, D, eps);
    DeviceBuffer<float> logits = cx.Floats(L * V, "decode logits (cuda)");
    cx.Project(n.data(), head_, nullptr, logits.data(), L, D, V, false);
    HostBuffer<float> host(static_cast<std::size_t>(L * V), "decode logits");
    logits.Download(host.data());
    for (std::int64_t i = 0; i < L; ++i) {
      std::memcpy(work[needs[i]]->logits_.data(), host.data() + i * V, static_cast<std::size_t>(V) * sizeof(float));
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

}  // namespace sinkflex::model
