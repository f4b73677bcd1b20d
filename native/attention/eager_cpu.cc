// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Eager sink attention on the CPU: the baseline a user of a plain tensor framework writes.
// Every step is its own pass over a materialised [batch, qHeads, qLen, kvLen + 1] tensor (the
// sink is the last column), as separate framework ops would be:
//   forward   mask = dense bool mask; S = Q K^T; S *= c; (softcap); S[~mask] = -inf;
//             S[..., kvLen] = sink; P = softmax(S) (saved for backward); out = P[..., :kvLen] V
//   backward  dP = dO V^T (sink column 0); D = rowsum(P * dP) - dLse; dS = P * (dP - D);
//             dsink = sum dS[..., kvLen]; (softcap: dS *= 1 - tanh^2); dS *= c;
//             dq = dS K; dk = dS^T Q; dv = P^T dO (dk, dv summed over the group's heads)
// Peak memory: 2 tensors in the forward (scores, probabilities), 3 in the backward (P, dP, dS).
// The matrix products use the same vectorised GEMM as the fused kernels.
#include <cmath>

#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "kernels.h"
#include "sink_attention.h"

namespace sinkflex::attention {
namespace {

constexpr std::int64_t kRowChunk = 64;

struct Eager {
  Shape s;
  Resolved r;
  const KernelTable* kt;
  std::int64_t T, Tk, Tk1, D, Hq, Hkv, G, chunks;

  Eager(const Shape& shape, const Options& opts) : s(shape), r(Resolve(shape, opts)), kt(&KernelsFor(opts.isa)) {
    T = s.qLen;
    Tk = s.kvLen;
    Tk1 = Tk + 1;
    D = s.headDim;
    Hq = s.qHeads;
    Hkv = s.kvHeads;
    G = s.group();
    chunks = (T + kRowChunk - 1) / kRowChunk;
  }

  std::size_t TensorElems() const { return static_cast<std::size_t>(s.batch * Hq * T * Tk1); }
  // Row i of head (b, h) in a [B, Hq, T, Tk1] tensor.
  std::int64_t Row(std::int64_t b, std::int64_t h, std::int64_t i) const { return ((b * Hq + h) * T + i) * Tk1; }

  // fn(b, h, i0, rows) over chunks of rows of every (batch, head), in parallel.
  template <typename Fn>
  void ForRows(Fn fn) const {
    ThreadPool::Global().ParallelFor(s.batch * Hq * chunks, [&](std::int64_t t, int) {
      const std::int64_t c = t % chunks, bh = t / chunks;
      const std::int64_t i0 = c * kRowChunk;
      fn(bh / Hq, bh % Hq, i0, std::min(kRowChunk, T - i0));
    });
  }

  // [B, Hkv, D, Tk] transpose of a k- or v-shaped tensor.
  HostBuffer<float> Transposed(const float* x, const char* what) const {
    HostBuffer<float> t(static_cast<std::size_t>(s.batch * Hkv * D * Tk), what);
    ThreadPool::Global().ParallelFor(s.batch * Hkv, [&](std::int64_t bk, int) {
      const std::int64_t b = bk / Hkv, kvh = bk % Hkv;
      float* dst = t.data() + bk * D * Tk;
      for (std::int64_t j = 0; j < Tk; ++j) {
        const float* src = x + ((b * Tk + j) * Hkv + kvh) * D;
        for (std::int64_t d = 0; d < D; ++d) dst[d * Tk + j] = src[d];
      }
    });
    return t;
  }

  // dst[b, h, i, :Tk] = (Q K^T)[i, :] for every (b, h) (raw dot products, unscaled).
  void QKt(const float* q, const float* kT, float* dst) const {
    ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {
      kt->gemm(GemmArgs{rows, Tk, D, q + ((b * T + i0) * Hq + h) * D, Hq * D, 1, kT + (b * Hkv + h / G) * D * Tk, Tk,
                        dst + Row(b, h, i0), Tk1, false});
    });
  }

  // Materialises the probabilities (and lse when not nullptr).
  HostBuffer<float> Probabilities(const float* q, const float* k, const float* sinks, float* lse) const {
    const Shape& sh = s;
    HostBuffer<std::uint8_t> mask(static_cast<std::size_t>(DenseMaskSize(*r.mask, sh)), "eager attention mask");
    DenseMask(*r.mask, sh, mask.data());
    const std::int64_t maskBatch = r.mask->UsesDocuments() ? s.batch : 1;
    HostBuffer<float> scores(TensorElems(), "eager attention scores");
    {
      HostBuffer<float> kT = Transposed(k, "eager attention K^T");
      QKt(q, kT.data(), scores.data());
    }
    float* S = scores.data();
    const float scale = r.scale, cap = r.softcap;
    ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {  // S *= c, softcap
      for (std::int64_t i = i0; i < i0 + rows; ++i) {
        float* row = S + Row(b, h, i);
        kt->scale(row, Tk, scale);
        if (cap > 0.0f) {
          for (std::int64_t j = 0; j < Tk; ++j) row[j] = cap * std::tanh(row[j] / cap);
        }
      }
    });
    ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {  // mask, sink column
      const float sink = sinks ? sinks[h] : -INFINITY;
      for (std::int64_t i = i0; i < i0 + rows; ++i) {
        float* row = S + Row(b, h, i);
        const std::uint8_t* m = mask.data() + ((maskBatch == 1 ? 0 : b) * T + i) * Tk;
        for (std::int64_t j = 0; j < Tk; ++j) {
          if (!m[j]) row[j] = -INFINITY;
        }
        row[Tk] = sink;
      }
    });
    mask.reset();
    HostBuffer<float> probs(TensorElems(), "eager attention probabilities");
    float* P = probs.data();
    ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {  // softmax over Tk + 1
      for (std::int64_t i = i0; i < i0 + rows; ++i) {
        const float* x = S + Row(b, h, i);
        float* p = P + Row(b, h, i);
        const float mx = kt->rowMax(x, Tk1);
        float L = -INFINITY;
        if (mx == -INFINITY) {  // nothing visible and no sink
          for (std::int64_t j = 0; j < Tk1; ++j) p[j] = 0.0f;
        } else {
          const float sum = kt->expSubSum(x, p, Tk1, mx);
          kt->scale(p, Tk1, 1.0f / sum);
          L = mx + std::log(sum);
        }
        if (lse) lse[(b * Hq + h) * T + i] = L;
      }
    });
    return probs;
  }

  // out = P[..., :Tk] V
  void Output(const float* P, const float* v, float* out) const {
    ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {
      kt->gemm(GemmArgs{rows, D, Tk, P + Row(b, h, i0), Tk1, 1, v + (b * Tk * Hkv + h / G) * D, Hkv * D,
                        out + ((b * T + i0) * Hq + h) * D, Hq * D, false});
    });
  }

  // dst_j = sum over the group's heads of A[b, h]^T src_h: dk (A = dS, src = q) or dv (A = P, src = dO).
  void KeyGrad(const float* A, const float* src, float* dst) const {
    const std::int64_t kChunks = (Tk + kRowChunk - 1) / kRowChunk;
    ThreadPool::Global().ParallelFor(s.batch * Hkv * kChunks, [&](std::int64_t t, int) {
      const std::int64_t c = t % kChunks, bk = t / kChunks;
      const std::int64_t b = bk / Hkv, kvh = bk % Hkv, j0 = c * kRowChunk, cols = std::min(kRowChunk, Tk - j0);
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int64_t h = kvh * G + g;
        kt->gemm(GemmArgs{cols, D, T, A + Row(b, h, 0) + j0, 1, Tk1, src + (b * T * Hq + h) * D, Hq * D,
                          dst + ((b * Tk + j0) * Hkv + kvh) * D, Hkv * D, g > 0});
      }
    });
  }
};

}  // namespace

void EagerForward(const Shape& shape, const Options& opts, const ForwardArgs& a, EagerSaved* save) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  RequirePtr(a.out, "out");
  RequirePtr(a.lse, "lse");
  const Eager e(shape, opts);
  HostBuffer<float> probs = e.Probabilities(a.q, a.k, a.sinks, a.lse);
  e.Output(probs.data(), a.v, a.out);
  if (save) {
    save->shape = shape;
    save->probs = std::move(probs);
  }
}

void EagerBackward(const Shape& shape, const Options& opts, const BackwardArgs& a, const EagerSaved* saved) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  RequirePtr(a.dOut, "dOut");
  RequirePtr(a.dq, "dq");
  RequirePtr(a.dk, "dk");
  RequirePtr(a.dv, "dv");
  const Eager e(shape, opts);
  const std::int64_t T = e.T, Tk = e.Tk, Tk1 = e.Tk1, D = e.D, Hq = e.Hq;
  HostBuffer<float> own;
  const float* P = nullptr;
  if (saved != nullptr) {
    const Shape& o = saved->shape;
    if (saved->probs.data() == nullptr || o.batch != shape.batch || o.qLen != shape.qLen || o.kvLen != shape.kvLen ||
        o.qHeads != shape.qHeads || o.kvHeads != shape.kvHeads || o.headDim != shape.headDim ||
        o.qOffset != shape.qOffset) {
      throw ArgumentError("saved eager probabilities do not match this call (released, or another shape)");
    }
    P = saved->probs.data();
  } else {
    own = e.Probabilities(a.q, a.k, a.sinks, nullptr);
    P = own.data();
  }

  HostBuffer<float> dP(e.TensorElems(), "eager attention dP");
  {
    HostBuffer<float> vT = e.Transposed(a.v, "eager attention V^T");
    e.QKt(a.dOut, vT.data(), dP.data());  // dO V^T has the same form as Q K^T
  }
  const std::int64_t B = shape.batch;
  HostBuffer<float> delta(static_cast<std::size_t>(shape.lseElems()), "eager attention D");
  e.ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {
    for (std::int64_t i = i0; i < i0 + rows; ++i) {
      float* dp = dP.data() + e.Row(b, h, i);
      dp[Tk] = 0.0f;  // the sink's value vector is zero
      float d = e.kt->dot(P + e.Row(b, h, i), dp, Tk1);
      if (a.dLse) d -= a.dLse[(b * Hq + h) * T + i];
      delta[(b * Hq + h) * T + i] = d;
    }
  });
  HostBuffer<float> dS(e.TensorElems(), "eager attention dS");
  e.ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {
    for (std::int64_t i = i0; i < i0 + rows; ++i) {
      const std::int64_t o = e.Row(b, h, i);
      e.kt->softmaxGrad(P + o, dP.data() + o, dS.data() + o, Tk1, delta[(b * Hq + h) * T + i]);
    }
  });
  delta.reset();
  if (a.sinks && a.dSinks) {
    for (std::int64_t h = 0; h < Hq; ++h) {
      double s = 0.0;
      for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t i = 0; i < T; ++i) s += dS[e.Row(b, h, i) + Tk];
      }
      a.dSinks[h] = static_cast<float>(s);
    }
  }
  if (e.r.softcap > 0.0f) {  // recompute the raw scores (into dP, no longer needed) for tanh'
    {
      HostBuffer<float> kT = e.Transposed(a.k, "eager attention K^T");
      e.QKt(a.q, kT.data(), dP.data());
    }
    const float scale = e.r.scale, cap = e.r.softcap;
    e.ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {
      for (std::int64_t i = i0; i < i0 + rows; ++i) {
        const std::int64_t o = e.Row(b, h, i);
        for (std::int64_t j = 0; j < Tk; ++j) {
          const float t = std::tanh(dP[o + j] * scale / cap);
          dS[o + j] *= 1.0f - t * t;
        }
      }
    });
  }
  dP.reset();
  e.ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {  // dS *= c
    for (std::int64_t i = i0; i < i0 + rows; ++i) e.kt->scale(dS.data() + e.Row(b, h, i), Tk, e.r.scale);
  });
  e.ForRows([&](std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows) {  // dq = dS K
    e.kt->gemm(GemmArgs{rows, D, Tk, dS.data() + e.Row(b, h, i0), Tk1, 1, a.k + (b * Tk * e.Hkv + h / e.G) * D,
                        e.Hkv * D, a.dq + ((b * T + i0) * Hq + h) * D, Hq * D, false});
  });
  e.KeyGrad(dS.data(), a.q, a.dk);  // dk = dS^T Q
  e.KeyGrad(P, a.dOut, a.dv);       // dv = P^T dO
}

}  // namespace sinkflex::attention
