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

using attention::DeviceBackwardArgs;
using attention::DeviceForwardArgs;
using attention::Shape;

constexpr std::int64_t kSoftmaxRows = 32768;  // rows per CUDA log-softmax backward call (< 65536)

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
    throw DeviceError(
        "the transformer on cuda needs the CUDA model and attention kernels, which this build does not have");
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
    if (w->bf16())
      ops.linearForwardBf16(x, w->dValue16.data(), DVal(b), y, T, in, out);
    else
      ops.linearForward(x, w->dValue.data(), DVal(b), y, T, in, out);
    return;
  }
  if (w->bf16())
    ops.gemmMixed(false, true, T, out, in, 1.0f, x, false, in, w->dValue16.data(), true, in, 1.0f, y, out);
  else
    ops.gemm(false, true, T, out, in, 1.0f, x, in, w->dValue.data(), in, 1.0f, y, out);
  if (b != nullptr) kernels.addRows(y, b->dValue.data(), T, out);
}

void DeviceContext::ProjectBackward(const float* x, const Parameter* w, const Parameter* b, const float* dy, float* dx,
                                    std::int64_t T, std::int64_t in, std::int64_t out, bool accumulateDx) const {
  if (w->bf16())
    ops.linearBackwardBf16(w->dValue16.data(), dy, dx, DGrad(b), T, in, out, accumulateDx);
  else
    ops.linearBackward(x, w->dValue.data(), dy, dx, DGrad(w), DGrad(b), T, in, out, accumulateDx);
}

void DeviceContext::Embed(const Parameter* w, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t V,
                          std::int64_t D) const {
  if (w->bf16())
    ops.embeddingForwardBf16(w->dValue16.data(), ids, out, T, V, D);
  else
    ops.embeddingForward(w->dValue.data(), ids, out, T, V, D);
}

const DeviceMoe& DeviceContext::Moe() const {
  const DeviceMoe* moe = GetCudaMoe();
  if (moe == nullptr)
    throw DeviceError("the MoE layer on cuda needs the CUDA MoE kernels, which this build does not have");
  return *moe;
}

/** The CUDA MoE's view of a block's router and experts (device pointers). */
MoeParams DeviceMoeParams(const ModelConfig& c, const BlockParams& p) { return BlockMoeParams(c, p, DWeights, DVal); }

void DeviceLoraForward(const DeviceContext& cx, const Parameter* A, const Parameter* B, float scale, const float* x,
                       float* t, float* y, std::int64_t ldy, std::int64_t T, std::int64_t in, std::int64_t out,
                       std::int64_t r) {
  cx.ops.gemm(false, true, T, r, in, 1.0f, x, in, A->dValue.data(), in, 0.0f, t, r);
  cx.ops.gemm(false, true, T, out, r, scale, t, r, B->dValue.data(), r, 1.0f, y, ldy);
}

void DeviceLoraBackward(const DeviceContext& cx, const Parameter* A, const Parameter* B, float scale, const float* x,
                        const float* t, const float* dy, std::int64_t ldy, float* dx, float* dt, std::int64_t T,
                        std::int64_t in, std::int64_t out, std::int64_t r) {
  float* dA = DGrad(A);
  float* dB = DGrad(B);
  if (dB) cx.ops.gemm(true, false, out, r, T, scale, dy, ldy, t, r, 1.0f, dB, r);
  if (!dA && !dx) return;
  cx.ops.gemm(false, false, T, r, out, scale, dy, ldy, B->dValue.data(), r, 0.0f, dt, r);
  if (dA) cx.ops.gemm(true, false, r, in, T, 1.0f, dt, r, x, in, 1.0f, dA, in);
  if (dx) cx.ops.gemm(false, false, T, in, r, 1.0f, dt, r, A->dValue.data(), in, 1.0f, dx, in);
}

std::size_t DeviceTrainStateBytes(const DeviceTrainState& s) {
  std::size_t n = s.tokens.bytes() + s.targets.bytes() + s.positions.bytes();
  n += Sum({s.xf.bytes(), s.nf.bytes(), s.rstdf.bytes(), s.logits.bytes(), s.lse.bytes(), s.entropy.bytes()});
  for (const DeviceLayerActivations& a : s.layers) {
    n += Sum({a.x.bytes(), a.n1.bytes(), a.rstd1.bytes(), a.q.bytes(), a.k.bytes(), a.v.bytes(), a.ao.bytes(),
              a.lse.bytes(), a.xmid.bytes(), a.n2.bytes(), a.rstd2.bytes(), a.h.bytes(), a.act.bytes(), a.qRaw.bytes(),
              a.kRaw.bytes(), a.rstdQ.bytes(), a.rstdK.bytes(), a.moe.Bytes()});
    if (a.eager) n += a.eager->bytes();
    for (const DeviceBuffer<float>& t : a.loraT) n += t.bytes();
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

void Transformer::DeviceLayerForward(const DeviceContext& cx, std::int64_t l, const TrainState& st,
                                     DeviceTrainState& ds, DeviceLayerActivations& a, DeviceBuffer<float>& x,
                                     bool save) const {
  const ModelOps& ops = cx.ops;
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
    a.loraT[t] = cx.Floats(T * R, "transformer lora x A^T (cuda)");
    DeviceLoraForward(cx, p.loraA[t], p.loraB[t], loraScale_, in, a.loraT[t].data(), y, ldy, T, nIn, nOut, R);
  };
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
  lora(LoraTarget::kQ, a.n1.data(), D, a.q.data(), qDim, qDim);
  lora(LoraTarget::kK, a.n1.data(), D, a.k.data(), kvDim, kvDim);
  lora(LoraTarget::kV, a.n1.data(), D, a.v.data(), kvDim, kvDim);
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
  cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, a.q.data(), a.q.data(), ds.positions.data(), T, H, false);
  cx.kernels.rope(ropeCos_.data(), ropeSin_.data(), Dh, a.k.data(), a.k.data(), ds.positions.data(), T, KV, false);
  a.ao = cx.Floats(T * qDim, "transformer attention out (cuda)");
  a.lse = cx.Floats(H * T, "transformer attention lse (cuda)");
  attention::Options ao;
  ao.mask = Sliding(l) ? &st.slidingMask : &st.fullMask;
  DeviceForwardArgs args;
  args.q = a.q.data();
  args.k = a.k.data();
  args.v = a.v.data();
  args.sinks = DVal(p.sinks);  // null without sinks: plain softmax
  args.out = a.ao.data();
  args.lse = a.lse.data();
  if (st.impl == AttentionImpl::kFused) {
    ao.blockMask = Sliding(l) ? st.slidingBlocks.get() : st.fullBlocks.get();
    cx.attention.fusedForward(device_, shape, ao, args);
  } else {
    cx.attention.eagerForward(device_, shape, ao, args, save ? &a.eager : nullptr);
  }
  a.xmid = cx.Copy(a.x.data(), T * D, "transformer residual (cuda)");
  cx.LinearAdd(a.ao.data(), p.o, p.oBias, a.xmid.data(), T, qDim, D);
  lora(LoraTarget::kO, a.ao.data(), qDim, a.xmid.data(), D, D);
  a.n2 = cx.Floats(T * D, "transformer mlp norm (cuda)");
  a.rstd2 = cx.Floats(T, "transformer rstd (cuda)");
  ops.rmsNormForward(a.xmid.data(), p.mlpNorm->dValue.data(), a.n2.data(), a.rstd2.data(), T, D, eps);
  x = cx.Copy(a.xmid.data(), T * D, "transformer residual (cuda)");
  if (c.experts > 0) {
    DeviceBuffer<float> y = cx.Floats(T * D, "transformer moe output (cuda)");
    cx.Moe().forward(DeviceMoeParams(c, p), a.n2.data(), y.data(), T, save ? &a.moe : nullptr, nullptr);
    cx.kernels.add(x.data(), y.data(), T * D);
  } else {
    a.h = cx.Floats(T * 2 * F, "transformer mlp gate_up (cuda)");
    cx.Project(a.n2.data(), p.gateUp, p.gateUpBias, a.h.data(), T, D, 2 * F, false);
    lora(LoraTarget::kGate, a.n2.data(), D, a.h.data(), 2 * F, F);
    lora(LoraTarget::kUp, a.n2.data(), D, a.h.data() + F, 2 * F, F);
    a.act = cx.Floats(T * F, "transformer mlp activation (cuda)");
    ops.swiGluForward(a.h.data(), a.act.data(), T, F, c.swiglu);
    cx.LinearAdd(a.act.data(), p.down, p.downBias, x.data(), T, F, D);
    lora(LoraTarget::kDown, a.act.data(), F, x.data(), D, D);
  }
}

std::unique_ptr<TrainState> Transformer::DeviceForward(const TokenBatch& b, const TrainForwardOptions& o, float* logp,
                                                       float* entropy) const {
  const DeviceContext cx = DeviceContext::Get(device_);
  const ModelOps& ops = cx.ops;
  const ModelConfig& c = config_;
  const std::int64_t T = b.T, D = c.width, V = c.vocab;
  const float eps = static_cast<float>(c.normEps);
  const float scale = 1.0f / o.temperature;

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
  const bool keepAll = o.save && !o.checkpointLayers;
  if (o.save) ds->layers.resize(static_cast<std::size_t>(c.layers));
  for (std::int64_t l = 0; l < c.layers; ++l) {
    DeviceLayerActivations local;
    DeviceLayerForward(cx, l, *st, *ds, keepAll ? ds->layers[l] : local, x, keepAll);
    if (o.save && !keepAll) ds->layers[l].x = std::move(local.x);  // checkpointing: the input only
  }

  ds->xf = std::move(x);
  ds->nf = cx.Floats(T * D, "transformer final norm (cuda)");
  ds->rstdf = cx.Floats(T, "transformer rstd (cuda)");
  ops.rmsNormForward(ds->xf.data(), norm_->dValue.data(), ds->nf.data(), ds->rstdf.data(), T, D, eps);
  ds->lse = cx.Floats(T, "transformer logits lse (cuda)");
  ds->entropy = cx.Floats(T, "transformer entropy (cuda)");
  DeviceBuffer<float> lp = cx.Floats(T, "transformer logp (cuda)");
  // The LM head a chunk of rows at a time; a batch that is one chunk keeps its logits for the
  // backward, else the backward recomputes each chunk's.
  const std::int64_t rows = HeadChunkRows(V, o.headChunk);
  const std::vector<std::int64_t> chunks = HeadChunks(T, rows);
  std::int64_t widest = 0;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) widest = std::max(widest, chunks[i + 1] - chunks[i]);
  DeviceBuffer<float> chunk = cx.Floats(widest * V, "transformer logits chunk (cuda)");
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    const std::int64_t r0 = chunks[i], n = chunks[i + 1] - r0;
    cx.Project(ds->nf.data() + r0 * D, head_, nullptr, chunk.data(), n, D, V, false);
    ops.logSoftmaxForward(chunk.data(), ds->targets.data() + r0, n, V, scale, lp.data() + r0, ds->entropy.data() + r0,
                          ds->lse.data() + r0);
  }
  if (logp) CopyToHost(device_, logp, lp.data(), static_cast<std::size_t>(T) * sizeof(float));
  if (entropy) CopyToHost(device_, entropy, ds->entropy.data(), static_cast<std::size_t>(T) * sizeof(float));
  if (!o.save) return nullptr;
  if (chunks.size() == 2) ds->logits = std::move(chunk);
  st->checkpointLayers = o.checkpointLayers;
  st->headChunk = rows;
  ds->saved = true;
  st->device = std::move(ds);
  return st;
}

void Transformer::DeviceHeadBackward(const DeviceContext& cx, TrainState& st, const float* dlogp, const float* dentropy,
                                     float* dn) const {
  DeviceTrainState& ds = *st.device;
  const std::int64_t T = st.T, D = config_.width, V = config_.vocab;
  const std::vector<std::int64_t> chunks = HeadChunks(T, st.headChunk);
  DeviceBuffer<float> own;
  if (ds.logits.size() == 0) {
    std::int64_t widest = 0;
    for (std::size_t i = 0; i + 1 < chunks.size(); ++i) widest = std::max(widest, chunks[i + 1] - chunks[i]);
    own = cx.Floats(widest * V, "transformer backward logits chunk (cuda)");
  }
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    const std::int64_t c0 = chunks[i], rows = chunks[i + 1] - c0;
    float* zc = ds.logits.size() != 0 ? ds.logits.data() + c0 * V : own.data();
    if (ds.logits.size() == 0) cx.Project(ds.nf.data() + c0 * D, head_, nullptr, zc, rows, D, V, false);
    for (std::int64_t r = 0; r < rows; r += kSoftmaxRows) {  // log-softmax (in place over the logits)
      const std::int64_t r0 = c0 + r, n = std::min(kSoftmaxRows, rows - r);
      float* z = zc + r * V;
      cx.ops.logSoftmaxBackward(z, ds.targets.data() + r0, ds.lse.data() + r0, ds.entropy.data() + r0,
                                dlogp ? dlogp + r0 : nullptr, dentropy ? dentropy + r0 : nullptr, z, n, V,
                                1.0f / st.temperature, false);
    }
    cx.ProjectBackward(ds.nf.data() + c0 * D, head_, nullptr, zc, dn + c0 * D, rows, D, V, false);
  }
  ds.logits.reset();
}

void Transformer::DeviceLayerBackward(const DeviceContext& cx, std::int64_t l, TrainState& st, DeviceTrainState& ds,
                                      DeviceLayerActivations& a, DeviceBuffer<float>& dx, DeviceBuffer<float>& dn,
                                      float* dsinks, float* dt) const {
  const ModelOps& ops = cx.ops;
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
    DeviceLoraBackward(cx, p.loraA[t], p.loraB[t], loraScale_, in, a.loraT[t].data(), dy, ldy, dIn, dt, T, nIn, nOut,
                       R);
    a.loraT[t].reset();
  };
  if (c.experts > 0) {  // MoE: x_out = xmid + moe(norm(xmid))
    MoeGrads g;
    g.router = DGrad(p.router);
    g.routerBias = DGrad(p.routerBias);
    g.gateUp = DGrad(p.expertsGateUp);
    g.gateUpBias = DGrad(p.expertsGateUpBias);
    g.down = DGrad(p.expertsDown);
    const int guT = static_cast<int>(LoraTarget::kExpertsGateUp), dnT = static_cast<int>(LoraTarget::kExpertsDown);
    if (p.loraA[guT] != nullptr) {
      g.gateUpLoraA = DGrad(p.loraA[guT]);
      g.gateUpLoraB = DGrad(p.loraB[guT]);
    }
    if (p.loraA[dnT] != nullptr) {
      g.downLoraA = DGrad(p.loraA[dnT]);
      g.downLoraB = DGrad(p.loraB[dnT]);
    }
    g.downBias = DGrad(p.expertsDownBias);
    cx.Moe().backward(DeviceMoeParams(c, p), a.n2.data(), dx.data(), a.moe, dn.data(), g, false, SavedUse::kConsume);
    a.moe = DeviceMoeSaved();
    a.n2.reset();
    ops.rmsNormBackward(a.xmid.data(), p.mlpNorm->dValue.data(), a.rstd2.data(), dn.data(), dx.data(), DGrad(p.mlpNorm),
                        T, D, true);
    a.xmid.reset();
  } else {  // dense MLP: x_out = xmid + down(swiglu(gate_up(norm(xmid))))
    DeviceBuffer<float> dact = cx.Floats(T * F, "transformer backward d activation (cuda)");
    cx.ProjectBackward(a.act.data(), p.down, p.downBias, dx.data(), dact.data(), T, F, D, false);
    lora(LoraTarget::kDown, a.act.data(), F, dx.data(), D, D, dact.data());
    a.act.reset();
    DeviceBuffer<float> dh = cx.Floats(T * 2 * F, "transformer backward d gate_up (cuda)");
    ops.swiGluBackward(a.h.data(), dact.data(), dh.data(), T, F, c.swiglu, false);
    dact.reset();
    a.h.reset();
    cx.ProjectBackward(a.n2.data(), p.gateUp, p.gateUpBias, dh.data(), dn.data(), T, D, 2 * F, false);
    lora(LoraTarget::kGate, a.n2.data(), D, dh.data(), 2 * F, F, dn.data());
    lora(LoraTarget::kUp, a.n2.data(), D, dh.data() + F, 2 * F, F, dn.data());
    dh.reset();
    a.n2.reset();
    ops.rmsNormBackward(a.xmid.data(), p.mlpNorm->dValue.data(), a.rstd2.data(), dn.data(), dx.data(), DGrad(p.mlpNorm),
                        T, D, true);
    a.xmid.reset();
  }
  {  // attention: xmid = x + o(attention(rope(norm?(q)), rope(norm?(k)), v))
    DeviceBuffer<float> dao = cx.Floats(T * qDim, "transformer backward d attention out (cuda)");
    cx.ProjectBackward(a.ao.data(), p.o, p.oBias, dx.data(), dao.data(), T, qDim, D, false);
    lora(LoraTarget::kO, a.ao.data(), qDim, dx.data(), D, D, dao.data());
    DeviceBuffer<float> dq = cx.Floats(T * qDim, "transformer backward dq (cuda)");
    DeviceBuffer<float> dk = cx.Floats(T * kvDim, "transformer backward dk (cuda)");
    DeviceBuffer<float> dv = cx.Floats(T * kvDim, "transformer backward dv (cuda)");
    attention::Options ao;
    ao.mask = Sliding(l) ? &st.slidingMask : &st.fullMask;
    float* sinkGrad = p.sinks && p.sinks->trainable() ? dsinks : nullptr;
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
    if (sinkGrad) cx.kernels.add(p.sinks->dGrad.data(), dsinks, H);
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
    lora(LoraTarget::kQ, a.n1.data(), D, dq.data(), qDim, qDim, dn.data());
    lora(LoraTarget::kK, a.n1.data(), D, dk.data(), kvDim, kvDim, dn.data());
    lora(LoraTarget::kV, a.n1.data(), D, dv.data(), kvDim, kvDim, dn.data());
    a.n1.reset();
    ops.rmsNormBackward(a.x.data(), p.attnNorm->dValue.data(), a.rstd1.data(), dn.data(), dx.data(), DGrad(p.attnNorm),
                        T, D, true);
  }
  a = DeviceLayerActivations();
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
  const std::int64_t T = st.T, D = c.width, H = c.heads, V = c.vocab;
  // Inputs first (a failed copy leaves the state usable), then the state is used up.
  const DeviceBuffer<float> gl = cx.Upload(dlogp, T, "transformer dlogp (cuda)");
  const DeviceBuffer<float> ge = cx.Upload(dentropy, T, "transformer dentropy (cuda)");
  st.consumed = true;

  // log-softmax and LM head per chunk (into embed's gradient when tied), final norm
  DeviceBuffer<float> dn = cx.Floats(T * D, "transformer backward d norm (cuda)");
  DeviceHeadBackward(cx, st, gl.data(), ge.data(), dn.data());
  ds.nf.reset();
  DeviceBuffer<float> dx = cx.Floats(T * D, "transformer backward d residual (cuda)");
  ops.rmsNormBackward(ds.xf.data(), norm_->dValue.data(), ds.rstdf.data(), dn.data(), dx.data(), DGrad(norm_), T, D,
                      false);
  ds.xf.reset();
  DeviceBuffer<float> dsinks = c.sinks ? cx.Floats(H, "transformer backward d sinks (cuda)") : DeviceBuffer<float>();
  const std::int64_t R = c.lora.rank;
  DeviceBuffer<float> dt = R > 0 ? cx.Floats(T * R, "transformer backward lora dt (cuda)") : DeviceBuffer<float>();

  for (std::int64_t l = c.layers - 1; l >= 0; --l) {
    DeviceLayerActivations& a = ds.layers[l];
    if (st.checkpointLayers) {  // recompute the layer from its input (the same ops: the same activations)
      DeviceBuffer<float> x = std::move(a.x);
      DeviceLayerForward(cx, l, st, ds, a, x, true);
    }
    DeviceLayerBackward(cx, l, st, ds, a, dx, dn, dsinks.data(), dt.data());
  }
  if (embed_->trainable()) ops.embeddingBackward(ds.tokens.data(), dx.data(), embed_->dGrad.data(), T, V, D);
  if (shift_ != nullptr && (shift_->trainable() || embed_->trainable())) {
    // x += e . S^T with e = embed[prevTokens]: dS += dx^T . e, de = dx . S, embed[prevTokens] += de
    const DeviceBuffer<std::int32_t> dPrev = cx.Upload(st.prevTokens.data(), T, "transformer previous tokens (cuda)");
    DeviceBuffer<float> e = cx.Floats(T * D, "transformer previous-token embedding (cuda)");
    cx.Embed(embed_, dPrev.data(), e.data(), T, V, D);
    DeviceBuffer<float> de = embed_->trainable()
                                 ? cx.Floats(T * D, "transformer previous-token embedding gradient (cuda)")
                                 : DeviceBuffer<float>();
    cx.ProjectBackward(e.data(), shift_, nullptr, dx.data(), embed_->trainable() ? de.data() : nullptr, T, D, D, false);
    if (embed_->trainable()) ops.embeddingBackward(dPrev.data(), de.data(), embed_->dGrad.data(), T, V, D);
  }
  ds.layers.clear();
  st.device.reset();
}

}  // namespace sinkflex::model
