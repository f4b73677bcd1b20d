#include "moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "gemm.h"
#include "lora.h"
#include "mxfp4.h"
#include "kernel_table.h"
#include "ops.h"
#include "ops_table.h"

namespace sinkflex::model {
namespace {

constexpr std::int64_t kExpertParallelRows = 64;  // fewer rows per active expert: experts run side by side
constexpr std::int64_t kTokenChunk = 64;          // tokens per task of the per-token loops

HostBuffer<float> Floats(std::int64_t n, const char* what) {
  return HostBuffer<float>(static_cast<std::size_t>(n), what);
}

/**
 * C[n, N] = A[n, K] op(W_e) + beta C with W_e the matrix of expert e inside a [E, rows, cols]
 * tensor (float32, bfloat16 or MXFP4 elements); op transposes when transB (N = rows, K = cols),
 * else N = cols, K = rows.
 */
void ExpertGemm(bool transB, std::int64_t n, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
                const WeightData& w, std::int64_t e, std::int64_t rows, std::int64_t cols, float beta, float* C,
                std::int64_t ldc) {
  const std::int64_t off = e * rows * cols;
  if (w.mxfp4()) {
    const Mxfp4Ptr b{static_cast<const std::uint8_t*>(w.data), w.scales, off};
    GemmMxfp4B(transB, n, N, K, 1.0f, A, lda, b, cols, beta, C, ldc);
    return;
  }
  const void* b = w.bf16 ? static_cast<const void*>(static_cast<const std::uint16_t*>(w.data) + off)
                         : static_cast<const void*>(static_cast<const float*>(w.data) + off);
  GemmMixed(false, transB, n, N, K, 1.0f, A, false, lda, b, w.bf16, cols, beta, C, ldc);
}

/** Runs fn(i) for i in [0, n): on the pool when `parallel`, else in order. */
template <typename Fn>
void Each(bool parallel, std::int64_t n, Fn&& fn) {
  if (parallel && n > 1) {
    ThreadPool::Global().ParallelFor(n, [&](std::int64_t i, int) { fn(i); });
  } else {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
  }
}

/** Runs fn(t0, t1) over token chunks, on the pool when the work is large enough. */
template <typename Fn>
void TokenChunks(std::int64_t T, std::int64_t costPerToken, Fn&& fn) {
  const std::int64_t chunks = (T + kTokenChunk - 1) / kTokenChunk;
  Each(T * costPerToken >= (1 << 15), chunks,
       [&](std::int64_t c) { fn(c * kTokenChunk, std::min(T, (c + 1) * kTokenChunk)); });
}

/** rows[r, 0:cols] = bias (each of n rows). */
void FillRows(float* rows, const float* bias, std::int64_t n, std::int64_t cols) {
  for (std::int64_t r = 0; r < n; ++r)
    std::memcpy(rows + r * cols, bias, static_cast<std::size_t>(cols) * sizeof(float));
}

/** The experts that have assignments, and whether to run them side by side. */
struct ActiveExperts {
  std::vector<std::int64_t> list;
  bool parallel = false;
};

ActiveExperts Active(const MoeSaved& s, std::int64_t E) {
  ActiveExperts a;
  for (std::int64_t e = 0; e < E; ++e)
    if (s.offsets[e + 1] > s.offsets[e]) a.list.push_back(e);
  const std::int64_t rows = s.offsets[E];
  a.parallel = a.list.size() > 1 && rows < kExpertParallelRows * static_cast<std::int64_t>(a.list.size());
  return a;
}

/** Router: top-k per token (descending; ties to the lower index), softmax over the chosen logits. */
void Route(const MoeParams& p, const float* logits, std::int64_t T, std::int32_t* index, float* weight) {
  const std::int64_t E = p.experts, K = p.topK;
  TokenChunks(T, E * K, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<char> taken(static_cast<std::size_t>(E));
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* z = logits + t * E;
      std::fill(taken.begin(), taken.end(), 0);
      for (std::int64_t s = 0; s < K; ++s) {
        std::int64_t best = -1;
        for (std::int64_t e = 0; e < E; ++e) {
          if (taken[e]) continue;
          // strictly greater keeps the lower index among equal logits; NaN never wins over a number
          if (best < 0 || z[e] > z[best] || (std::isnan(z[best]) && !std::isnan(z[e]))) best = e;
        }
        taken[best] = 1;
        index[t * K + s] = static_cast<std::int32_t>(best);
      }
      const double m = z[index[t * K]];
      double sum = 0.0;
      for (std::int64_t s = 0; s < K; ++s) sum += std::exp(static_cast<double>(z[index[t * K + s]]) - m);
      for (std::int64_t s = 0; s < K; ++s) {
        weight[t * K + s] = static_cast<float>(std::exp(static_cast<double>(z[index[t * K + s]]) - m) / sum);
      }
    }
  });
}

/** xg[row] = x[token[row]] for rows [r0, r1). */
void Gather(const float* x, const std::int32_t* token, std::int64_t r0, std::int64_t r1, std::int64_t D, float* xg) {
  for (std::int64_t r = r0; r < r1; ++r) {
    std::memcpy(xg + r * D, x + static_cast<std::int64_t>(token[r]) * D, static_cast<std::size_t>(D) * sizeof(float));
  }
}

}  // namespace

std::size_t MoeSaved::Bytes() const {
  return index.size() * 4 + weight.size() * 4 + offsets.size() * 8 + token.size() * 4 + rowOf.size() * 4 +
         (h.size() + act.size() + y.size()) * 4;
}

void CheckMoeParams(const MoeParams& p) {
  auto range = [](const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < lo || v > hi) {
      throw ArgumentError(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got " + std::to_string(v));
    }
  };
  range("width", p.width, 1, std::int64_t{1} << 20);
  range("ffn", p.ffn, 1, std::int64_t{1} << 20);
  range("experts", p.experts, 1, 1 << 16);
  range("topK", p.topK, 1, p.experts);
  CheckSwiGluParams(p.swiglu);
  if (p.router.data == nullptr) throw ArgumentError("router weight is null");
  if (p.gateUp.data == nullptr) throw ArgumentError("gateUp weight is null");
  if (p.down.data == nullptr) throw ArgumentError("down weight is null");
  if (p.router.mxfp4()) throw ArgumentError("the router weight cannot be MXFP4 (float32 or bfloat16 only)");
  if ((p.gateUp.mxfp4() && p.width % kMxfp4Block != 0) || (p.down.mxfp4() && p.ffn % kMxfp4Block != 0)) {
    throw ArgumentError(
        "an MXFP4 expert weight needs its input size (width for gateUp, ffn for down) to be a multiple of 32");
  }
  const MoeLora& l = p.lora;
  if ((l.gateUpA == nullptr) != (l.gateUpB == nullptr) || (l.downA == nullptr) != (l.downB == nullptr)) {
    throw ArgumentError("lora: an expert adapter needs both A and B (gateUpA/gateUpB, downA/downB)");
  }
  if (l.gateUp() || l.down()) {
    range("lora.rank", l.rank, 1, 1 << 16);
    if (!std::isfinite(l.scale)) throw ArgumentError("lora.scale must be finite");
  }
}

void MoeForward(const MoeParams& p, const float* x, float* out, std::int64_t T, MoeSaved* saved, float* logitsOut) {
  CheckMoeParams(p);
  if (T < 0) throw ArgumentError("T must be non-negative, got " + std::to_string(T));
  if (T == 0) return;
  if (x == nullptr || out == nullptr) throw ArgumentError("x and out are required");
  const std::int64_t D = p.width, F = p.ffn, E = p.experts, K = p.topK, A = T * K;

  // router logits and the choice of experts
  HostBuffer<float> ownLogits;
  float* logits = logitsOut;
  if (logits == nullptr) {
    ownLogits = Floats(T * E, "moe router logits");
    logits = ownLogits.data();
  }
  if (p.routerBias) FillRows(logits, p.routerBias, T, E);
  GemmMixed(false, true, T, E, D, 1.0f, x, false, D, p.router.data, p.router.bf16, D, p.routerBias ? 1.0f : 0.0f,
            logits, E);
  MoeSaved local;
  MoeSaved& s = saved ? *saved : local;
  s.T = T;
  s.index = HostBuffer<std::int32_t>(static_cast<std::size_t>(A), "moe expert index");
  s.weight = Floats(A, "moe expert weights");
  Route(p, logits, T, s.index.data(), s.weight.data());

  // group the (token, slot) assignments by expert, tokens ascending within an expert
  s.offsets = HostBuffer<std::int64_t>(static_cast<std::size_t>(E + 1), "moe expert offsets");
  std::fill(s.offsets.data(), s.offsets.data() + E + 1, std::int64_t{0});
  for (std::int64_t a = 0; a < A; ++a) ++s.offsets[s.index[a] + 1];
  for (std::int64_t e = 0; e < E; ++e) s.offsets[e + 1] += s.offsets[e];
  s.token = HostBuffer<std::int32_t>(static_cast<std::size_t>(A), "moe assignment tokens");
  s.rowOf = HostBuffer<std::int32_t>(static_cast<std::size_t>(A), "moe assignment rows");
  {
    std::vector<std::int64_t> cursor(s.offsets.data(), s.offsets.data() + E);
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t row = cursor[s.index[t * K + k]]++;
        s.token[row] = static_cast<std::int32_t>(t);
        s.rowOf[t * K + k] = static_cast<std::int32_t>(row);
      }
    }
  }

  // experts: gather their rows, gate_up, SwiGLU, down
  HostBuffer<float> xg = Floats(A * D, "moe gathered rows");
  TokenChunks(A, D, [&](std::int64_t r0, std::int64_t r1) { Gather(x, s.token.data(), r0, r1, D, xg.data()); });
  s.h = Floats(A * 2 * F, "moe gate_up");
  s.act = Floats(A * F, "moe activation");
  s.y = Floats(A * D, "moe expert outputs");
  const ActiveExperts active = Active(s, E);
  const MoeLora& l = p.lora;
  const std::int64_t R = l.rank;
  HostBuffer<float> loraT = (l.gateUp() || l.down()) ? Floats(A * R, "moe expert lora x A^T") : HostBuffer<float>();
  Each(active.parallel, static_cast<std::int64_t>(active.list.size()), [&](std::int64_t i) {
    const std::int64_t e = active.list[static_cast<std::size_t>(i)];
    const std::int64_t r0 = s.offsets[e], n = s.offsets[e + 1] - r0;
    float* h = s.h.data() + r0 * 2 * F;
    float* act = s.act.data() + r0 * F;
    float* y = s.y.data() + r0 * D;
    if (p.gateUpBias) FillRows(h, p.gateUpBias + e * 2 * F, n, 2 * F);
    ExpertGemm(true, n, 2 * F, D, xg.data() + r0 * D, D, p.gateUp, e, 2 * F, D, p.gateUpBias ? 1.0f : 0.0f, h, 2 * F);
    if (l.gateUp()) {
      LoraForward(xg.data() + r0 * D, l.gateUpA + e * R * D, l.gateUpB + e * 2 * F * R, l.scale, loraT.data() + r0 * R,
                  h, 2 * F, n, D, 2 * F, R);
    }
    SwiGluForward(h, act, n, F, p.swiglu);
    if (p.downBias) FillRows(y, p.downBias + e * D, n, D);
    ExpertGemm(true, n, D, F, act, F, p.down, e, D, F, p.downBias ? 1.0f : 0.0f, y, D);
    if (l.down()) {
      LoraForward(act, l.downA + e * R * F, l.downB + e * D * R, l.scale, loraT.data() + r0 * R, y, D, n, F, D, R);
    }
  });

  // out[t] = sum over slots, in slot order
  TokenChunks(T, K * D, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      float* o = out + t * D;
      for (std::int64_t k = 0; k < K; ++k) {
        const float w = s.weight[t * K + k];
        const float* y = s.y.data() + static_cast<std::int64_t>(s.rowOf[t * K + k]) * D;
        if (k == 0) {
          for (std::int64_t d = 0; d < D; ++d) o[d] = w * y[d];
        } else {
          for (std::int64_t d = 0; d < D; ++d) o[d] += w * y[d];
        }
      }
    }
  });
}

void MoeBackward(const MoeParams& p, const float* x, const float* dout, MoeSaved& s, float* dx, const MoeGrads& g,
                 bool accumulateDx, SavedUse use) {
  CheckMoeParams(p);
  const std::int64_t T = s.T, D = p.width, F = p.ffn, E = p.experts, K = p.topK, A = T * K;
  if (T == 0) return;
  if (x == nullptr || dout == nullptr || dx == nullptr) throw ArgumentError("x, dout and dx are required");
  if (s.index.size() != static_cast<std::size_t>(A) || s.y.size() != static_cast<std::size_t>(A * D) ||
      s.offsets.size() != static_cast<std::size_t>(E + 1)) {
    throw ArgumentError("the saved MoE state does not match these shapes (or the forward did not save it)");
  }
  if ((p.router.frozen() && (g.router != nullptr)) || (p.gateUp.frozen() && g.gateUp != nullptr) ||
      (p.down.frozen() && g.down != nullptr)) {
    throw ArgumentError("a bfloat16 or MXFP4 MoE weight is frozen: its gradient must be null");
  }
  const MoeLora& l = p.lora;
  if ((!l.gateUp() && (g.gateUpLoraA || g.gateUpLoraB)) || (!l.down() && (g.downLoraA || g.downLoraB))) {
    throw ArgumentError(
        "an expert adapter gradient is set, but the adapter is not (lora.gateUpA / lora.downA is null)");
  }
  const std::int64_t R = l.rank;
  const bool consume = use == SavedUse::kConsume;
  // scratch per assignment row: x A^T (recomputed) and the adapter's dt
  HostBuffer<float> loraT = (l.gateUp() || l.down()) ? Floats(A * R, "moe expert lora x A^T") : HostBuffer<float>();
  HostBuffer<float> loraDt = (l.gateUp() || l.down()) ? Floats(A * R, "moe expert lora dt") : HostBuffer<float>();
  const KernelTable& kt = ActiveKernels();

  // router: d weight[t, s] = dout[t] . y[t, s]; softmax over the chosen k; scatter to the logits
  HostBuffer<float> dlogits = Floats(T * E, "moe router logit gradients");
  // consumed: each expert output row becomes its gradient once read (same row, read first)
  HostBuffer<float> ownDy = consume ? HostBuffer<float>() : Floats(A * D, "moe expert output gradients");
  float* dYa = consume ? s.y.data() : ownDy.data();
  TokenChunks(T, K * D, [&](std::int64_t t0, std::int64_t t1) {
    std::vector<double> dw(static_cast<std::size_t>(K));
    for (std::int64_t t = t0; t < t1; ++t) {
      const float* go = dout + t * D;
      double mix = 0.0;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t row = s.rowOf[t * K + k];
        const float* y = s.y.data() + row * D;
        double acc = 0.0;
        for (std::int64_t d = 0; d < D; ++d) acc += static_cast<double>(go[d]) * y[d];
        dw[k] = acc;
        mix += static_cast<double>(s.weight[t * K + k]) * acc;
        const float w = s.weight[t * K + k];
        float* dy = dYa + row * D;
        for (std::int64_t d = 0; d < D; ++d) dy[d] = w * go[d];
      }
      float* dz = dlogits.data() + t * E;
      std::fill(dz, dz + E, 0.0f);
      for (std::int64_t k = 0; k < K; ++k) {
        dz[s.index[t * K + k]] = static_cast<float>(static_cast<double>(s.weight[t * K + k]) * (dw[k] - mix));
      }
    }
  });
  if (g.router) Gemm(true, false, E, D, T, 1.0f, dlogits.data(), E, x, D, 1.0f, g.router, D);
  if (g.routerBias) kt.addRows(dlogits.data(), T, E, E, g.routerBias);
  HostBuffer<float> dxRouter = Floats(T * D, "moe router input gradients");
  GemmMixed(false, false, T, D, E, 1.0f, dlogits.data(), false, E, p.router.data, p.router.bf16, D, 0.0f,
            dxRouter.data(), D);

  // experts, grouped as in the forward; the gathered inputs only when a gate_up gradient needs them
  HostBuffer<float> xg = (g.gateUp != nullptr || l.gateUp()) ? Floats(A * D, "moe gathered rows") : HostBuffer<float>();
  if (xg.size() != 0) {
    TokenChunks(A, D, [&](std::int64_t r0, std::int64_t r1) { Gather(x, s.token.data(), r0, r1, D, xg.data()); });
  }
  // consumed: the SwiGLU outputs (read by the down weight's gradient before) become their gradient
  // unless a down adapter reads them after; the gate_up outputs become theirs (an elementwise pass)
  const bool dactInAct = consume && !l.down();
  HostBuffer<float> ownDact = dactInAct ? HostBuffer<float>() : Floats(A * F, "moe activation gradients");
  HostBuffer<float> ownDh = consume ? HostBuffer<float>() : Floats(A * 2 * F, "moe gate_up gradients");
  float* dact = dactInAct ? s.act.data() : ownDact.data();
  float* dh = consume ? s.h.data() : ownDh.data();
  HostBuffer<float> dXa = Floats(A * D, "moe expert input gradients");
  const ActiveExperts active = Active(s, E);
  Each(active.parallel, static_cast<std::int64_t>(active.list.size()), [&](std::int64_t i) {
    const std::int64_t e = active.list[static_cast<std::size_t>(i)];
    const std::int64_t r0 = s.offsets[e], n = s.offsets[e + 1] - r0;
    const float* dy = dYa + r0 * D;
    const float* act = s.act.data() + r0 * F;
    const float* h = s.h.data() + r0 * 2 * F;
    const float* xe = xg.size() == 0 ? nullptr : xg.data() + r0 * D;
    float* da = dact + r0 * F;
    float* dhe = dh + r0 * 2 * F;
    if (g.downBias) kt.addRows(dy, n, D, D, g.downBias + e * D);
    if (g.down) Gemm(true, false, D, F, n, 1.0f, dy, D, act, F, 1.0f, g.down + e * D * F, F);
    ExpertGemm(false, n, F, D, dy, D, p.down, e, D, F, 0.0f, da, F);
    float* t = loraT.data() + r0 * R;
    float* dt = loraDt.data() + r0 * R;
    if (l.down()) {
      const float* a = l.downA + e * R * F;
      Gemm(false, true, n, R, F, 1.0f, act, F, a, F, 0.0f, t, R);
      LoraBackward(act, a, l.downB + e * D * R, l.scale, t, dy, D, da, g.downLoraA ? g.downLoraA + e * R * F : nullptr,
                   g.downLoraB ? g.downLoraB + e * D * R : nullptr, dt, n, F, D, R);
    }
    SwiGluBackward(h, da, dhe, n, F, p.swiglu, false);
    if (g.gateUpBias) kt.addRows(dhe, n, 2 * F, 2 * F, g.gateUpBias + e * 2 * F);
    if (g.gateUp) Gemm(true, false, 2 * F, D, n, 1.0f, dhe, 2 * F, xe, D, 1.0f, g.gateUp + e * 2 * F * D, D);
    ExpertGemm(false, n, D, 2 * F, dhe, 2 * F, p.gateUp, e, 2 * F, D, 0.0f, dXa.data() + r0 * D, D);
    if (l.gateUp()) {
      const float* a = l.gateUpA + e * R * D;
      Gemm(false, true, n, R, D, 1.0f, xe, D, a, D, 0.0f, t, R);
      LoraBackward(xe, a, l.gateUpB + e * 2 * F * R, l.scale, t, dhe, 2 * F, dXa.data() + r0 * D,
                   g.gateUpLoraA ? g.gateUpLoraA + e * R * D : nullptr,
                   g.gateUpLoraB ? g.gateUpLoraB + e * 2 * F * R : nullptr, dt, n, D, 2 * F, R);
    }
  });

  // dx[t] (+)= router part + the experts' parts in slot order
  TokenChunks(T, K * D, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      float* o = dx + t * D;
      const float* r = dxRouter.data() + t * D;
      if (accumulateDx) {
        for (std::int64_t d = 0; d < D; ++d) o[d] += r[d];
      } else {
        std::memcpy(o, r, static_cast<std::size_t>(D) * sizeof(float));
      }
      for (std::int64_t k = 0; k < K; ++k) {
        const float* part = dXa.data() + static_cast<std::int64_t>(s.rowOf[t * K + k]) * D;
        for (std::int64_t d = 0; d < D; ++d) o[d] += part[d];
      }
    }
  });
  if (consume) s = MoeSaved();  // its buffers now hold gradients: no second backward
}

}  // namespace sinkflex::model
