// Reference: docs/design.md, "The built-in model — semantics"; checked against the CPU transformer
//   (itself checked against test/model/fixtures/transformer-reference.ts).
// Tests: test/model/transformer-cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The transformer on a CUDA device: its set-up and its training forward and backward over
// packed batches, for every config the CPU runs (biases per projection, q/k norm, sinks or none,
// tied embeddings, layer types, RoPE scaling, dense or MoE MLPs; bfloat16 and frozen weights).
// The sequence of ops is the CPU one (transformer_train.cc), step for step, over the CUDA ops
// table with device activations, the CUDA MoE layer (moe_device.h) and the CUDA sink attention
// (fused, or eager with its probabilities kept on the device); ids and masks are checked and
// built on the host (the attention backend uploads the mask program and tile lists it needs).
// A separate file
// rather than one implementation templated over host and device buffers: the CPU path stays
// exactly as it was (bit for bit), and each file reads as a plain list of ops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../core/cuda_device.h"
#include "../core/errors.h"
#include "transformer_device.h"

namespace sinkflex::model {
namespace {

using attention::DeviceForwardArgs;
using attention::DeviceBackwardArgs;
using attention::Shape;

constexpr std::int64_t kHeadChunk = 1024;      // rows of logits at a time when they are not kept
constexpr std::int64_t kSoftmaxRows = 32768;   // rows per CUDA log-softmax backward call (< 65536)

std::size_t Sum(std::initializer_list<std::size_t> sizes) {
  std::size_t n = 0;
  for (std::size_t s : sizes) n += s;
  return n;
}

}  // namespace

DeviceContext DeviceContext::Get(int device) {
  const ModelOps* ops = GetCudaOps();
  const DeviceKernels* kernels = GetCudaDeviceKernels();
  const attention::CudaBackend* att = attention::GetCudaBackend();
  if (ops == nullptr || kernels == nullptr || att == nullptr) {
    throw DeviceError("the transformer on cuda needs the CUDA model and attention kernels, which this build does not have");
  }
  ops->useDevice(device);
  return DeviceContext{*ops, *kernels, *att, device};
}

DeviceBuffer<float> DeviceContext::Copy(const float* src, std::int64_t n, const char* what) const {
  DeviceBuffer<float> b = Floats(n, what);
  CopyOnDevice(device, b.data(), src, static_cast<std::size_t>(n) * sizeof(float));
  return b;
}

DeviceBuffer<std::int32_t> DeviceContext::Upload(const std::int32_t* src, std::int64_t n, const char* what) const {
  DeviceBuffer<std::int32_t> b(device, static_cast<std::size_t>(n), what);
  b.Upload(src);
  return b;
}

DeviceBuffer<float> DeviceContext::Upload(const float* src, std::int64_t n, const char* what) const {
  if (src == nullptr) return DeviceBuffer<float>();
  DeviceBuffer<float> b = Floats(n, what);
  b.Upload(src);
  return b;
}

void DeviceContext::Project(const float* x, const Parameter* w, const Parameter* b, float* y, std::int64_t T,
                            std::int64_t in, std::int64_t out, bool accumulate) const {
  if (!accumulate) {
    if (w->bf16()) ops.linearForwardBf16(x, w->dValue16.data(), DVal(b), y, T, in, out);
    else ops.linearForward(x, w->dValue.data(), DVal(b), y, T, in, out);
    return;
  }
  if (w->bf16()) ops.gemmMixed(false, true, T, out, in, 1.0f, x, false, in, w->dValue16.data(), true, in, 1.0f, y, out);
  else ops.gemm(false, true, T, out, in, 1.0f, x, in, w->dValue.data(), in, 1.0f, y, out);
  if (b != nullptr) kernels.addRows(y, b->dValue.data(), T, out);
}

void DeviceContext::ProjectBackward(const float* x, const Parameter* w, const Parameter* b, const float* dy, float* dx,
                                    std::int64_t T, std::int64_t in, std::int64_t out, bool accumulateDx) const {
  if (w->bf16()) ops.linearBackwardBf16(w->dValue16.data(), dy, dx, DGrad(b), T, in, out, accumulateDx);
  else ops.linearBackward(x, w->dValue.data(), dy, dx, DGrad(w), DGrad(b), T, in, out, accumulateDx);
}

void DeviceContext::Embed(const Parameter* w, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t V,
                          std::int64_t D) const {
  if (w->bf16()) ops.embeddingForwardBf16(w->dValue16.data(), ids, out, T, V, D);
  else ops.embeddingForward(w->dValue.data(), ids, out, T, V, D);
}

const DeviceMoe& DeviceContext::Moe() const {
  const DeviceMoe* moe = GetCudaMoe();
  if (moe == nullptr) throw DeviceError("the MoE layer on cuda needs the CUDA MoE kernels, which this build does not have");
  return *moe;
}

/** The CUDA MoE's view of a block's router and experts (device pointers). */
MoeParams DeviceMoeParams(const ModelConfig& c, const BlockParams& p) { return BlockMoeParams(c, p, DWeights, DVal); }

std::size_t DeviceTrainStateBytes(const DeviceTrainState& s) {
  std::size_t n = s.tokens.bytes() + s.targets.bytes() + s.positions.bytes();
  n += Sum({s.xf.bytes(), s.nf.bytes(), s.rstdf.bytes(), s.logits.bytes(), s.lse.bytes(), s.entropy.bytes()});
  for (const DeviceLayerActivations& a : s.layers) {
    n += Sum({a.x.bytes(), a.n1.bytes(), a.rstd1.bytes(), a.q.bytes(), a.k.bytes(), a.v.bytes(), a.ao.bytes(),
              a.lse.bytes(), a.xmid.bytes(), a.n2.bytes(), a.rstd2.bytes(), a.h.bytes(), a.act.bytes(), a.qRaw.bytes(),
              a.kRaw.bytes(), a.rstdQ.bytes(), a.rstdK.bytes(), a.moe.Bytes()});
    if (a.eager) n += a.eager->bytes();
  }
  return n;
}

void Transformer::InitDevice() {
  device_ = store_->device();
  const DeviceContext cx = DeviceContext::Get(device_);
  const std::int64_t n = rope_.maxPositions() * (rope_.headDim() / 2);
  ropeCos_ = cx.Upload(rope_.cos(), n, "rope cos table (cuda)");
  ropeSin_ = cx.Upload(rope_.sin(), n, "rope sin table (cuda)");
}

std::unique_ptr<TrainState> Transformer::DeviceForward(const TokenBatch& b, const TrainForwardOptions& o, float* logp,
                                                       float* entropy) const {
  const DeviceContext cx = DeviceContext::Get(device_);
  const ModelOps& ops = cx.ops;
  const ModelConfig& c = config_;
  const std::int64_t T = b.T, D = c.width, H = c.heads, KV = c.kvHeads, Dh = c.headDim, F = c.ffn, V = c.vocab;
  const std::int64_t qDim = H * Dh, kvDim = KV * Dh;
  const float eps = static_cast<float>(c.normEps);
  const float scale = 1.0f / o.temperature;
  const DeviceMoe* moe = c.experts > 0 ? &cx.Moe() : nullptr;

  const Shape shape = Shape::Self(1, T, H, KV, Dh);
  std::unique_ptr<TrainState> st = NewTrainState(b, o, true);
  auto ds = std::make_shared<DeviceTrainState>();
  ds->tokens = cx.Upload(st->tokens.data(), T, "transformer tokens (cuda)");
  ds->targets = cx.Upload(st->targets.data(), T, "transformer targets (cuda)");
  ds->positions = cx.Upload(st->positions.data(), T, "transformer positions (cuda)");

  DeviceBuffer<float> x = cx.Floats(T * D, "transformer residual (cuda)");
  cx.Embed(embed_, ds->tokens.data(), x.data(), T, V, D);
  if (shift_ != nullptr) {  // x += embed[prevTokens] . token_shift^T
    const DeviceBuffer<std::int32_t> dPrev = cx.Upload(st->prevTokens.data(), T, "transformer previous tokens (cuda)");
    DeviceBuffer<float> e = cx.Floats(T * D, "transformer previous-token embedding (cuda)");
    cx.Embed(embed_, dPrev.data(), e.data(), T, V, D);
    cx.LinearAdd(e.data(), shift_, nullptr, x.data(), T, D, D);
  }
  if (o.save) ds->layers.resize(static_cast<std::size_t>(c.layers));
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const BlockParams& p = blocks_[l];
    DeviceLayerActivations local;
    DeviceLayerActivations& a = o.save ? ds->layers[l] : local;
    a.x = std::move(x);
    a.n1 = cx.Floats(T * D, "transformer attention norm (cuda)");
    a.rstd1 = cx.Floats(T, "transformer rstd (cuda)");
    ops.rmsNormForward(a.x.data(), p.attnNorm->dValue.data(), a.n1.data(), a.rstd1.data(), T, D, eps);
    a.q = cx.Floats(T * qDim, "transformer q (cuda)");
    a.k = cx.Floats(T * kvDim, "transformer k (cuda)");
    a.v = cx.Floats(T * kvDim, "transformer v (cuda)");
    cx.Project(a.n1.data(), p.q, p.qBias, a.q.data(), T, D, qDim, false);
    cx.Project(a.n1.data(), p.k, p.kBias, a.k.data(), T, D, kvDim, false);
    cx.Project(a.n1.data(), p.v, p.vBias, a.v.data(), T, D, kvDim, false);
    if (p.qNorm) {  // RMSNorm over every head of q and k (rows of headDim), before RoPE
      a.qRaw = std::move(a.q);
      a.kRaw = std::move(a.k);
      a.q = cx.Floats(T * qDim, "transformer q (cuda)");
      a.k = cx.Floats(T * kvDim, "transformer k (cuda)");
      a.rstdQ = cx.Floats(T * H, "transformer q norm rstd (cuda)");
      a.rstdK = cx.Floats(T * KV, "transformer k norm rstd (cuda)");
      ops.rmsNormForward(a.qRaw.data(), p.qNorm->dValue.data(), a.q.data(), a.rstdQ.data(), T * H, Dh, eps);
      ops.rmsNormForward(a.kRaw.data(), p.kNorm->dValue.data(), a.k.data(), a.rstdK.data(), T * KV, Dh, eps);
    }
    cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, a.q.data(), a.q.data(), ds->positions.data(), T, H, false);
    cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, a.k.data(), a.k.data(), ds->positions.data(), T, KV, false);
    a.ao = cx.Floats(T * qDim, "transformer attention out (cuda)");
    a.lse = cx.Floats(H * T, "transformer attention lse (cuda)");
    attention::Options ao;
    ao.mask = Sliding(l) ? &st->slidingMask : &st->fullMask;
    DeviceForwardArgs args;
    args.q = a.q.data();
    args.k = a.k.data();
    args.v = a.v.data();
    args.sinks = DVal(p.sinks);  // null without sinks: plain softmax
    args.out = a.ao.data();
    args.lse = a.lse.data();
    if (o.impl == AttentionImpl::kFused) {
      ao.blockMask = Sliding(l) ? st->slidingBlocks.get() : st->fullBlocks.get();
      cx.attention.fusedForward(device_, shape, ao, args);
    } else {
      cx.attention.eagerForward(device_, shape, ao, args, o.save ? &a.eager : nullptr);
    }
    a.xmid = cx.Copy(a.x.data(), T * D, "transformer residual (cuda)");
    cx.LinearAdd(a.ao.data(), p.o, p.oBias, a.xmid.data(), T, qDim, D);
    a.n2 = cx.Floats(T * D, "transformer mlp norm (cuda)");
    a.rstd2 = cx.Floats(T, "transformer rstd (cuda)");
    ops.rmsNormForward(a.xmid.data(), p.mlpNorm->dValue.data(), a.n2.data(), a.rstd2.data(), T, D, eps);
    x = cx.Copy(a.xmid.data(), T * D, "transformer residual (cuda)");
    if (moe) {
      DeviceBuffer<float> y = cx.Floats(T * D, "transformer moe output (cuda)");
      moe->forward(DeviceMoeParams(c, p), a.n2.data(), y.data(), T, o.save ? &a.moe : nullptr, nullptr);
      cx.kernels.add(x.data(), y.data(), T * D);
    } else {
      a.h = cx.Floats(T * 2 * F, "transformer mlp gate_up (cuda)");
      cx.Project(a.n2.data(), p.gateUp, p.gateUpBias, a.h.data(), T, D, 2 * F, false);
      a.act = cx.Floats(T * F, "transformer mlp activation (cuda)");
      ops.swiGluForward(a.h.data(), a.act.data(), T, F, c.swiglu);
      cx.LinearAdd(a.act.data(), p.down, p.downBias, x.data(), T, F, D);
    }
  }

  ds->xf = std::move(x);
  ds->nf = cx.Floats(T * D, "transformer final norm (cuda)");
  ds->rstdf = cx.Floats(T, "transformer rstd (cuda)");
  ops.rmsNormForward(ds->xf.data(), norm_->dValue.data(), ds->nf.data(), ds->rstdf.data(), T, D, eps);
  ds->lse = cx.Floats(T, "transformer logits lse (cuda)");
  ds->entropy = cx.Floats(T, "transformer entropy (cuda)");
  DeviceBuffer<float> lp = cx.Floats(T, "transformer logp (cuda)");
  if (o.save) {
    ds->logits = cx.Floats(T * V, "transformer logits (cuda)");
    cx.Project(ds->nf.data(), head_, nullptr, ds->logits.data(), T, D, V, false);
    ops.logSoftmaxForward(ds->logits.data(), ds->targets.data(), T, V, scale, lp.data(), ds->entropy.data(),
                          ds->lse.data());
  } else {
    DeviceBuffer<float> chunk = cx.Floats(std::min(T, kHeadChunk) * V, "transformer logits chunk (cuda)");
    for (std::int64_t r0 = 0; r0 < T; r0 += kHeadChunk) {
      const std::int64_t n = std::min(kHeadChunk, T - r0);
      cx.Project(ds->nf.data() + r0 * D, head_, nullptr, chunk.data(), n, D, V, false);
      ops.logSoftmaxForward(chunk.data(), ds->targets.data() + r0, n, V, scale, lp.data() + r0,
                            ds->entropy.data() + r0, ds->lse.data() + r0);
    }
  }
  if (logp) CopyToHost(device_, logp, lp.data(), static_cast<std::size_t>(T) * sizeof(float));
  if (entropy) CopyToHost(device_, entropy, ds->entropy.data(), static_cast<std::size_t>(T) * sizeof(float));
  if (!o.save) return nullptr;
  ds->saved = true;
  st->device = std::move(ds);
  return st;
}

void Transformer::DeviceBackward(TrainState& st, const float* dlogp, const float* dentropy) const {
  if (st.consumed) throw ArgumentError("this forward's activations were already used by a backward");
  if (!st.device || !st.device->saved) throw ArgumentError("the forward did not keep its activations (save was false)");
  if (store_->step() != st.optimizerStep) {
    throw ArgumentError("the parameters changed (optimiser step " + std::to_string(st.optimizerStep) + " -> " +
                        std::to_string(store_->step()) + ") since this forward; run a new forward");
  }
  const DeviceContext cx = DeviceContext::Get(device_);
  const ModelOps& ops = cx.ops;
  DeviceTrainState& ds = *st.device;
  const ModelConfig& c = config_;
  const std::int64_t T = st.T, D = c.width, H = c.heads, KV = c.kvHeads, Dh = c.headDim, F = c.ffn, V = c.vocab;
  const std::int64_t qDim = H * Dh, kvDim = KV * Dh;
  const Shape shape = Shape::Self(1, T, H, KV, Dh);
  const DeviceMoe* moe = c.experts > 0 ? &cx.Moe() : nullptr;
  // Inputs first (a failed copy leaves the state usable), then the state is used up.
  const DeviceBuffer<float> gl = cx.Upload(dlogp, T, "transformer dlogp (cuda)");
  const DeviceBuffer<float> ge = cx.Upload(dentropy, T, "transformer dentropy (cuda)");
  st.consumed = true;

  // log-softmax (in place over the logits), LM head (into embed's gradient when tied), final norm
  for (std::int64_t r0 = 0; r0 < T; r0 += kSoftmaxRows) {
    const std::int64_t n = std::min(kSoftmaxRows, T - r0);
    float* z = ds.logits.data() + r0 * V;
    ops.logSoftmaxBackward(z, ds.targets.data() + r0, ds.lse.data() + r0, ds.entropy.data() + r0,
                           gl.data() ? gl.data() + r0 : nullptr, ge.data() ? ge.data() + r0 : nullptr, z, n, V,
                           1.0f / st.temperature, false);
  }
  DeviceBuffer<float> dn = cx.Floats(T * D, "transformer backward d norm (cuda)");
  cx.ProjectBackward(ds.nf.data(), head_, nullptr, ds.logits.data(), dn.data(), T, D, V, false);
  ds.logits.reset();
  ds.nf.reset();
  DeviceBuffer<float> dx = cx.Floats(T * D, "transformer backward d residual (cuda)");
  ops.rmsNormBackward(ds.xf.data(), norm_->dValue.data(), ds.rstdf.data(), dn.data(), dx.data(), DGrad(norm_), T, D,
                      false);
  ds.xf.reset();
  DeviceBuffer<float> dsinks = c.sinks ? cx.Floats(H, "transformer backward d sinks (cuda)") : DeviceBuffer<float>();

  for (std::int64_t l = c.layers - 1; l >= 0; --l) {
    const BlockParams& p = blocks_[l];
    DeviceLayerActivations& a = ds.layers[l];
    if (moe) {  // MoE: x_out = xmid + moe(norm(xmid))
      MoeGrads g;
      g.router = DGrad(p.router);
      g.routerBias = DGrad(p.routerBias);
      g.gateUp = DGrad(p.expertsGateUp);
      g.gateUpBias = DGrad(p.expertsGateUpBias);
      g.down = DGrad(p.expertsDown);
      g.downBias = DGrad(p.expertsDownBias);
      moe->backward(DeviceMoeParams(c, p), a.n2.data(), dx.data(), a.moe, dn.data(), g, false);
      a.moe = DeviceMoeSaved();
      a.n2.reset();
      ops.rmsNormBackward(a.xmid.data(), p.mlpNorm->dValue.data(), a.rstd2.data(), dn.data(), dx.data(),
                          DGrad(p.mlpNorm), T, D, true);
      a.xmid.reset();
    } else {  // dense MLP: x_out = xmid + down(swiglu(gate_up(norm(xmid))))
      DeviceBuffer<float> dact = cx.Floats(T * F, "transformer backward d activation (cuda)");
      cx.ProjectBackward(a.act.data(), p.down, p.downBias, dx.data(), dact.data(), T, F, D, false);
      a.act.reset();
      DeviceBuffer<float> dh = cx.Floats(T * 2 * F, "transformer backward d gate_up (cuda)");
      ops.swiGluBackward(a.h.data(), dact.data(), dh.data(), T, F, c.swiglu, false);
      dact.reset();
      a.h.reset();
      cx.ProjectBackward(a.n2.data(), p.gateUp, p.gateUpBias, dh.data(), dn.data(), T, D, 2 * F, false);
      dh.reset();
      a.n2.reset();
      ops.rmsNormBackward(a.xmid.data(), p.mlpNorm->dValue.data(), a.rstd2.data(), dn.data(), dx.data(),
                          DGrad(p.mlpNorm), T, D, true);
      a.xmid.reset();
    }
    {  // attention: xmid = x + o(attention(rope(norm?(q)), rope(norm?(k)), v))
      DeviceBuffer<float> dao = cx.Floats(T * qDim, "transformer backward d attention out (cuda)");
      cx.ProjectBackward(a.ao.data(), p.o, p.oBias, dx.data(), dao.data(), T, qDim, D, false);
      DeviceBuffer<float> dq = cx.Floats(T * qDim, "transformer backward dq (cuda)");
      DeviceBuffer<float> dk = cx.Floats(T * kvDim, "transformer backward dk (cuda)");
      DeviceBuffer<float> dv = cx.Floats(T * kvDim, "transformer backward dv (cuda)");
      attention::Options ao;
      ao.mask = Sliding(l) ? &st.slidingMask : &st.fullMask;
      float* sinkGrad = p.sinks && p.sinks->trainable() ? dsinks.data() : nullptr;
      DeviceBackwardArgs args;
      args.q = a.q.data();
      args.k = a.k.data();
      args.v = a.v.data();
      args.sinks = DVal(p.sinks);
      args.out = a.ao.data();
      args.lse = a.lse.data();
      args.dOut = dao.data();
      args.dq = dq.data();
      args.dk = dk.data();
      args.dv = dv.data();
      args.dSinks = sinkGrad;
      if (st.impl == AttentionImpl::kFused) {
        ao.blockMask = Sliding(l) ? st.slidingBlocks.get() : st.fullBlocks.get();
        cx.attention.fusedBackward(device_, shape, ao, args);
      } else {
        cx.attention.eagerBackward(device_, shape, ao, args, a.eager.get());
        a.eager.reset();
      }
      if (sinkGrad) cx.kernels.add(p.sinks->dGrad.data(), dsinks.data(), H);
      dao.reset();
      a.ao.reset();
      a.lse.reset();
      a.q.reset();
      a.k.reset();
      a.v.reset();
      cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, dq.data(), dq.data(), ds.positions.data(), T, H, true);
      cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, dk.data(), dk.data(), ds.positions.data(), T, KV, true);
      if (p.qNorm) {
        ops.rmsNormBackward(a.qRaw.data(), p.qNorm->dValue.data(), a.rstdQ.data(), dq.data(), dq.data(), DGrad(p.qNorm),
                            T * H, Dh, false);
        ops.rmsNormBackward(a.kRaw.data(), p.kNorm->dValue.data(), a.rstdK.data(), dk.data(), dk.data(), DGrad(p.kNorm),
                            T * KV, Dh, false);
        a.qRaw.reset();
        a.kRaw.reset();
      }
      cx.ProjectBackward(a.n1.data(), p.q, p.qBias, dq.data(), dn.data(), T, D, qDim, false);
      cx.ProjectBackward(a.n1.data(), p.k, p.kBias, dk.data(), dn.data(), T, D, kvDim, true);
      cx.ProjectBackward(a.n1.data(), p.v, p.vBias, dv.data(), dn.data(), T, D, kvDim, true);
      a.n1.reset();
      ops.rmsNormBackward(a.x.data(), p.attnNorm->dValue.data(), a.rstd1.data(), dn.data(), dx.data(),
                          DGrad(p.attnNorm), T, D, true);
    }
    a = DeviceLayerActivations();
  }
  if (embed_->trainable()) ops.embeddingBackward(ds.tokens.data(), dx.data(), embed_->dGrad.data(), T, V, D);
  if (shift_ != nullptr && (shift_->trainable() || embed_->trainable())) {
    // x += e . S^T with e = embed[prevTokens]: dS += dx^T . e, de = dx . S, embed[prevTokens] += de
    const DeviceBuffer<std::int32_t> dPrev = cx.Upload(st.prevTokens.data(), T, "transformer previous tokens (cuda)");
    DeviceBuffer<float> e = cx.Floats(T * D, "transformer previous-token embedding (cuda)");
    cx.Embed(embed_, dPrev.data(), e.data(), T, V, D);
    DeviceBuffer<float> de = embed_->trainable() ? cx.Floats(T * D, "transformer previous-token embedding gradient (cuda)")
                                                 : DeviceBuffer<float>();
    cx.ProjectBackward(e.data(), shift_, nullptr, dx.data(), embed_->trainable() ? de.data() : nullptr, T, D, D, false);
    if (embed_->trainable()) ops.embeddingBackward(dPrev.data(), de.data(), embed_->dGrad.data(), T, V, D);
  }
  ds.layers.clear();
  st.device.reset();
}

}  // namespace sinkflex::model
