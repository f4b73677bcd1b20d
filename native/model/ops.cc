// The model ops on the CPU (ops.h): argument checks and the threaded drivers of the kernels.
// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
#include "ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "kernel_table.h"
#include "ops_table.h"

namespace sinkflex::model {
namespace {

constexpr std::int64_t kMinParallelWork = 1 << 15;  // elements of work below which ops stay serial
constexpr std::int64_t kTaskWork = 1 << 14;         // target elements of work per task

void Require(bool ok, const std::string& msg) {
  if (!ok) throw ArgumentError(msg);
}

void RequireSizes(std::initializer_list<std::pair<const char*, std::int64_t>> sizes) {
  for (const auto& [name, v] : sizes) {
    if (v < 0) throw ArgumentError(std::string(name) + " must be non-negative, got " + std::to_string(v));
  }
}

void RequirePtr(const void* p, const char* name) {
  if (p == nullptr) throw ArgumentError(std::string(name) + " is null");
}

/**
 * Splits [0, n) into fixed chunks of `chunk` items (the split depends only on the sizes, so
 * per-chunk reductions are deterministic) and runs fn(chunkIndex, begin, end), on the pool when
 * the total work n * cost is large enough.
 */
template <typename Fn>
void ForChunks(std::int64_t n, std::int64_t chunk, std::int64_t cost, Fn&& fn) {
  if (n <= 0) return;
  chunk = std::max<std::int64_t>(1, chunk);
  const std::int64_t tasks = (n + chunk - 1) / chunk;
  auto body = [&](std::int64_t t) { fn(t, t * chunk, std::min(n, (t + 1) * chunk)); };
  if (tasks > 1 && n * cost >= kMinParallelWork) {
    ThreadPool::Global().ParallelFor(tasks, [&](std::int64_t t, int) { body(t); });
  } else {
    for (std::int64_t t = 0; t < tasks; ++t) body(t);
  }
}

/** Rows per task for rows costing `cost` elements each. */
std::int64_t RowChunk(std::int64_t cost) {
  return std::max<std::int64_t>(1, kTaskWork / std::max<std::int64_t>(1, cost));
}

/** acc[0:cols] += sum over rows of src[r * ld + c], parallel over column blocks (deterministic). */
void AddRowsParallel(const KernelTable& kt, const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     float* acc) {
  const std::int64_t block = 4 * kt.vectorWidth;
  ForChunks(cols, std::max<std::int64_t>(block, (kTaskWork / std::max<std::int64_t>(1, rows)) / block * block), rows,
            [&](std::int64_t, std::int64_t c0, std::int64_t c1) { kt.addRows(src + c0, rows, c1 - c0, ld, acc + c0); });
}

void CheckIds(const std::int32_t* ids, std::int64_t T, std::int64_t V, const char* name, bool allowNegative) {
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int32_t id = ids[t];
    if (id >= V || (id < 0 && !allowNegative)) {
      throw ArgumentError(std::string(name) + "[" + std::to_string(t) + "] = " + std::to_string(id) +
                          " is out of range [" + (allowNegative ? "-1" : "0") + ", " + std::to_string(V) + ")");
    }
  }
}

}  // namespace

const char* OpsIsa() { return ActiveKernels().name; }

void CheckTokenIds(const std::int32_t* ids, std::int64_t T, std::int64_t V, const char* name, bool allowNegative) {
  CheckIds(ids, T, V, name, allowNegative);
}

// ---- linear -----------------------------------------------------------------------------------

void LinearForward(const float* x, const float* w, const float* b, float* y, std::int64_t T, std::int64_t in,
                   std::int64_t out) {
  RequireSizes({{"T", T}, {"in", in}, {"out", out}});
  if (T == 0 || out == 0) return;
  RequirePtr(y, "y");
  if (in > 0) {
    RequirePtr(x, "x");
    RequirePtr(w, "w");
  }
  float beta = 0.0f;
  if (b != nullptr) {
    ForChunks(T, RowChunk(out), out, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) std::memcpy(y + r * out, b, static_cast<std::size_t>(out) * sizeof(float));
    });
    beta = 1.0f;
  }
  Gemm(false, true, T, out, in, 1.0f, x, std::max<std::int64_t>(1, in), w, std::max<std::int64_t>(1, in), beta, y, out);
}

void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, std::int64_t T,
                    std::int64_t in, std::int64_t out, bool accumulateDx) {
  RequireSizes({{"T", T}, {"in", in}, {"out", out}});
  if (T == 0 && !dx) return;
  const std::int64_t ldIn = std::max<std::int64_t>(1, in), ldOut = std::max<std::int64_t>(1, out);
  if (dx) Gemm(false, false, T, in, out, 1.0f, dy, ldOut, w, ldIn, accumulateDx ? 1.0f : 0.0f, dx, ldIn);
  if (dw) Gemm(true, false, out, in, T, 1.0f, dy, ldOut, x, ldIn, 1.0f, dw, ldIn);
  if (db && T > 0) {
    RequirePtr(dy, "dy");
    AddRowsParallel(ActiveKernels(), dy, T, out, out, db);
  }
}

void LinearForwardBf16(const float* x, const std::uint16_t* w, const float* b, float* y, std::int64_t T,
                       std::int64_t in, std::int64_t out) {
  RequireSizes({{"T", T}, {"in", in}, {"out", out}});
  if (T == 0 || out == 0) return;
  RequirePtr(y, "y");
  if (in > 0) {
    RequirePtr(x, "x");
    RequirePtr(w, "w");
  }
  float beta = 0.0f;
  if (b != nullptr) {
    ForChunks(T, RowChunk(out), out, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) std::memcpy(y + r * out, b, static_cast<std::size_t>(out) * sizeof(float));
    });
    beta = 1.0f;
  }
  const std::int64_t ld = std::max<std::int64_t>(1, in);
  GemmMixed(false, true, T, out, in, 1.0f, x, false, ld, w, true, ld, beta, y, out);
}

void LinearBackwardBf16(const std::uint16_t* w, const float* dy, float* dx, float* db, std::int64_t T, std::int64_t in,
                        std::int64_t out, bool accumulateDx) {
  RequireSizes({{"T", T}, {"in", in}, {"out", out}});
  const std::int64_t ldIn = std::max<std::int64_t>(1, in), ldOut = std::max<std::int64_t>(1, out);
  if (dx)
    GemmMixed(false, false, T, in, out, 1.0f, dy, false, ldOut, w, true, ldIn, accumulateDx ? 1.0f : 0.0f, dx, ldIn);
  if (db && T > 0) {
    RequirePtr(dy, "dy");
    AddRowsParallel(ActiveKernels(), dy, T, out, out, db);
  }
}

// ---- RMSNorm ----------------------------------------------------------------------------------

void RmsNormForward(const float* x, const float* g, float* y, float* rstd, std::int64_t T, std::int64_t D, float eps) {
  RequireSizes({{"T", T}, {"D", D}});
  Require(D > 0, "D must be positive");
  Require(eps > 0.0f && std::isfinite(eps), "eps must be a positive finite number");
  if (T == 0) return;
  RequirePtr(x, "x");
  RequirePtr(g, "g");
  RequirePtr(y, "y");
  RequirePtr(rstd, "rstd");
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(D), D, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.rmsNormForward(x + r0 * D, g, y + r0 * D, rstd + r0, r1 - r0, D, eps);
  });
}

void RmsNormBackward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                     std::int64_t T, std::int64_t D, bool accumulateDx) {
  RequireSizes({{"T", T}, {"D", D}});
  Require(D > 0, "D must be positive");
  if (T == 0) return;
  for (const auto& [p, n] :
       {std::pair<const void*, const char*>{x, "x"}, {g, "g"}, {rstd, "rstd"}, {dy, "dy"}, {dx, "dx"}}) {
    RequirePtr(p, n);
  }
  const KernelTable& kt = ActiveKernels();
  const std::int64_t chunk = RowChunk(D);
  const std::int64_t chunks = (T + chunk - 1) / chunk;
  HostBuffer<float> partial(static_cast<std::size_t>(chunks * D), "rmsnorm backward partial dg");
  partial.zero();
  ForChunks(T, chunk, D, [&](std::int64_t c, std::int64_t r0, std::int64_t r1) {
    kt.rmsNormBackward(x + r0 * D, g, rstd + r0, dy + r0 * D, dx + r0 * D, partial.data() + c * D, r1 - r0, D,
                       accumulateDx);
  });
  if (dg) AddRowsParallel(kt, partial.data(), chunks, D, D, dg);
}

// ---- RoPE -------------------------------------------------------------------------------------

void RopeScaling::Validate(const char* prefix) const {
  const std::string pre(prefix);
  auto positive = [&](const char* field, double v) {
    if (!(std::isfinite(v) && v > 0.0)) {
      throw ArgumentError(pre + "." + field + " must be a positive finite number, got " + std::to_string(v));
    }
  };
  auto context = [&] {
    if (originalContext < 1 || originalContext > (std::int64_t{1} << 24)) {
      throw ArgumentError(pre + ".originalContext must be in [1, 16777216], got " + std::to_string(originalContext));
    }
  };
  switch (type) {
    case Type::kNone:
      return;
    case Type::kLinear:
      positive("factor", factor);
      return;
    case Type::kLlama3:
      positive("factor", factor);
      positive("lowFreqFactor", lowFreqFactor);
      positive("highFreqFactor", highFreqFactor);
      if (!(highFreqFactor > lowFreqFactor)) {
        throw ArgumentError(pre + ".highFreqFactor (" + std::to_string(highFreqFactor) +
                            ") must exceed lowFreqFactor (" + std::to_string(lowFreqFactor) + ")");
      }
      context();
      return;
    case Type::kYarn:
      positive("factor", factor);
      positive("betaFast", betaFast);
      positive("betaSlow", betaSlow);
      context();
      if (attentionFactor >= 0.0 || !std::isfinite(attentionFactor)) positive("attentionFactor", attentionFactor);
      for (const auto& [field, v] :
           {std::pair<const char*, double>{"mscale", mscale}, {"mscaleAllDim", mscaleAllDim}}) {
        if (!(std::isfinite(v) && v >= 0.0)) {
          throw ArgumentError(pre + "." + field + " must be a finite number >= 0, got " + std::to_string(v));
        }
      }
      return;
  }
}

namespace {

constexpr double kPi = 3.14159265358979323846;

/** transformers' get_mscale: 1 for scale <= 1, else 0.1 mscale ln(scale) + 1. */
double YarnMscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

/** The dimension index at which a frequency turns `rotations` times over `context` positions. */
double YarnCorrectionDim(double rotations, double dim, double base, double context) {
  return dim * std::log(context / (rotations * 2.0 * kPi)) / (2.0 * std::log(base));
}

}  // namespace

bool SameRopeScaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.originalContext == b.originalContext &&
         a.lowFreqFactor == b.lowFreqFactor && a.highFreqFactor == b.highFreqFactor && a.betaFast == b.betaFast &&
         a.betaSlow == b.betaSlow && a.truncate == b.truncate && a.attentionFactor == b.attentionFactor &&
         a.mscale == b.mscale && a.mscaleAllDim == b.mscaleAllDim;
}

RopeTable::RopeTable(std::int64_t headDim, std::int64_t maxPositions, double theta, const RopeScaling& scaling)
    : headDim_(headDim), maxPositions_(maxPositions), theta_(theta), scaling_(scaling) {
  Require(headDim > 0 && headDim % 2 == 0, "headDim must be a positive even number, got " + std::to_string(headDim));
  Require(maxPositions > 0, "maxPositions must be positive");
  Require(theta > 0.0 && std::isfinite(theta), "theta must be a positive finite number");
  scaling.Validate("ropeScaling");
  const std::int64_t half = headDim / 2;
  const double dim = static_cast<double>(headDim);
  cos_ = HostBuffer<float>(static_cast<std::size_t>(maxPositions * half), "rope cos table");
  sin_ = HostBuffer<float>(static_cast<std::size_t>(maxPositions * half), "rope sin table");
  invFreq_.resize(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    invFreq_[i] = std::pow(theta, -2.0 * static_cast<double>(i) / dim);
  }
  using Type = RopeScaling::Type;
  const RopeScaling& s = scaling;
  if (s.type == Type::kLinear) {
    for (double& f : invFreq_) f /= s.factor;
  } else if (s.type == Type::kLlama3) {
    const double old = static_cast<double>(s.originalContext);
    const double lowWavelen = old / s.lowFreqFactor, highWavelen = old / s.highFreqFactor;
    for (double& f : invFreq_) {
      const double wavelen = 2.0 * kPi / f;
      if (wavelen > lowWavelen) {
        f /= s.factor;  // low frequencies: interpolated
      } else if (!(wavelen < highWavelen)) {
        // the band between: a smooth mix of the interpolated and the original frequency
        const double smooth = (old / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }  // high frequencies: unchanged
    }
  } else if (s.type == Type::kYarn) {
    const double context = static_cast<double>(s.originalContext);
    double low = YarnCorrectionDim(s.betaFast, dim, theta, context);
    double high = YarnCorrectionDim(s.betaSlow, dim, theta, context);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // no zero-width ramp
    for (std::int64_t i = 0; i < half; ++i) {
      const double posFreq = std::pow(theta, 2.0 * static_cast<double>(i) / dim);
      const double extrapolation = 1.0 / posFreq, interpolation = 1.0 / (s.factor * posFreq);
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolationWeight = 1.0 - ramp;
      invFreq_[i] = interpolation * (1.0 - extrapolationWeight) + extrapolation * extrapolationWeight;
    }
    if (s.attentionFactor > 0.0) {
      attentionFactor_ = s.attentionFactor;
    } else if (s.mscale != 0.0 && s.mscaleAllDim != 0.0) {
      attentionFactor_ = YarnMscale(s.factor, s.mscale) / YarnMscale(s.factor, s.mscaleAllDim);
    } else {
      attentionFactor_ = YarnMscale(s.factor, 1.0);
    }
  }
  const double af = attentionFactor_;
  ForChunks(maxPositions, RowChunk(half * 16), half * 16, [&](std::int64_t, std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(p) * invFreq_[i];
        cos_[p * half + i] = static_cast<float>(std::cos(a) * af);
        sin_[p * half + i] = static_cast<float>(std::sin(a) * af);
      }
    }
  });
}

namespace {
void RopeApply(const RopeTable& table, const float* x, float* out, const std::int32_t* pos, std::int64_t T,
               std::int64_t H, float sign) {
  RequireSizes({{"T", T}, {"H", H}});
  if (T == 0 || H == 0) return;
  RequirePtr(x, "x");
  RequirePtr(out, "out");
  RequirePtr(pos, "pos");
  for (std::int64_t t = 0; t < T; ++t) {
    if (pos[t] < 0 || pos[t] >= table.maxPositions()) {
      throw ArgumentError("positions[" + std::to_string(t) + "] = " + std::to_string(pos[t]) + " is out of range [0, " +
                          std::to_string(table.maxPositions()) + ")");
    }
  }
  const KernelTable& kt = ActiveKernels();
  const std::int64_t Dh = table.headDim();
  ForChunks(T, RowChunk(H * Dh), H * Dh, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.rope(x + r0 * H * Dh, out + r0 * H * Dh, pos + r0, r1 - r0, H, Dh, table.cos(), table.sin(), sign);
  });
}
}  // namespace

void RopeForward(const RopeTable& table, const float* x, float* out, const std::int32_t* pos, std::int64_t T,
                 std::int64_t H) {
  RopeApply(table, x, out, pos, T, H, 1.0f);
}

void RopeBackward(const RopeTable& table, const float* dy, float* dx, const std::int32_t* pos, std::int64_t T,
                  std::int64_t H) {
  RopeApply(table, dy, dx, pos, T, H, -1.0f);
}

// ---- SwiGLU -----------------------------------------------------------------------------------

void CheckSwiGluParams(const SwiGluParams& p) {
  Require(std::isfinite(p.alpha) && p.alpha > 0.0f, "swiglu alpha must be a positive finite number");
  Require(std::isfinite(p.limit) && p.limit >= 0.0f, "swiglu limit must be >= 0 (0 = no clamp)");
  Require(std::isfinite(p.upBias), "swiglu upBias must be finite");
}

namespace {
void CheckSwiGlu(const SwiGluParams& p) { CheckSwiGluParams(p); }
}  // namespace

void SwiGluForward(const float* h, float* out, std::int64_t T, std::int64_t F, SwiGluParams p) {
  RequireSizes({{"T", T}, {"F", F}});
  CheckSwiGlu(p);
  if (T == 0 || F == 0) return;
  RequirePtr(h, "h");
  RequirePtr(out, "out");
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(4 * F), 4 * F, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.swiGluForward(h + r0 * 2 * F, out + r0 * F, r1 - r0, F, p);
  });
}

void SwiGluBackward(const float* h, const float* dout, float* dh, std::int64_t T, std::int64_t F, SwiGluParams p,
                    bool accumulate) {
  RequireSizes({{"T", T}, {"F", F}});
  CheckSwiGlu(p);
  if (T == 0 || F == 0) return;
  RequirePtr(h, "h");
  RequirePtr(dout, "dout");
  RequirePtr(dh, "dh");
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(6 * F), 6 * F, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.swiGluBackward(h + r0 * 2 * F, dout + r0 * F, dh + r0 * 2 * F, r1 - r0, F, p, accumulate);
  });
}

// ---- embedding --------------------------------------------------------------------------------

void EmbeddingForward(const float* table, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t V,
                      std::int64_t D) {
  RequireSizes({{"T", T}, {"V", V}, {"D", D}});
  if (T == 0 || D == 0) return;
  RequirePtr(table, "table");
  RequirePtr(ids, "ids");
  RequirePtr(out, "out");
  CheckIds(ids, T, V, "ids", false);
  ForChunks(T, RowChunk(D), D, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    for (std::int64_t t = r0; t < r1; ++t) {
      std::memcpy(out + t * D, table + static_cast<std::int64_t>(ids[t]) * D,
                  static_cast<std::size_t>(D) * sizeof(float));
    }
  });
}

void EmbeddingForwardBf16(const std::uint16_t* table, const std::int32_t* ids, float* out, std::int64_t T,
                          std::int64_t V, std::int64_t D) {
  RequireSizes({{"T", T}, {"V", V}, {"D", D}});
  if (T == 0 || D == 0) return;
  RequirePtr(table, "table");
  RequirePtr(ids, "ids");
  RequirePtr(out, "out");
  CheckIds(ids, T, V, "ids", false);
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(D), D, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    for (std::int64_t t = r0; t < r1; ++t) kt.widenBf16(table + static_cast<std::int64_t>(ids[t]) * D, out + t * D, D);
  });
}

void EmbeddingBackward(const std::int32_t* ids, const float* dout, float* dtable, std::int64_t T, std::int64_t V,
                       std::int64_t D) {
  RequireSizes({{"T", T}, {"V", V}, {"D", D}});
  if (T == 0 || D == 0) return;
  RequirePtr(ids, "ids");
  RequirePtr(dout, "dout");
  RequirePtr(dtable, "dtable");
  CheckIds(ids, T, V, "ids", false);
  const KernelTable& kt = ActiveKernels();
  // Each task owns a range of vocabulary rows and adds the tokens that hit it in token order,
  // so the result does not depend on the split.
  const std::int64_t tasks = std::min<std::int64_t>(V, 4 * ThreadPool::Global().size());
  const std::int64_t rowsPer = (V + tasks - 1) / tasks;
  ForChunks(V, rowsPer, T * D / std::max<std::int64_t>(1, tasks), [&](std::int64_t, std::int64_t v0, std::int64_t v1) {
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t id = ids[t];
      if (id >= v0 && id < v1) kt.add(dtable + id * D, dout + t * D, D);
    }
  });
}

// ---- log-softmax / cross-entropy --------------------------------------------------------------

void LogSoftmaxForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V, float scale,
                       float* logp, float* entropy, float* lse) {
  RequireSizes({{"T", T}, {"V", V}});
  Require(V > 0, "V must be positive");
  Require(scale > 0.0f && std::isfinite(scale), "scale must be a positive finite number");
  if (T == 0) return;
  RequirePtr(logits, "logits");
  RequirePtr(lse, "lse");
  if (logp) RequirePtr(targets, "targets");
  if (targets) CheckIds(targets, T, V, "targets", true);
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(2 * V), 2 * V, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.logSoftmaxForward(logits + r0 * V, targets ? targets + r0 : nullptr, r1 - r0, V, scale,
                         logp ? logp + r0 : nullptr, entropy ? entropy + r0 : nullptr, lse + r0);
  });
}

void LogSoftmaxBackward(const float* logits, const std::int32_t* targets, const float* lse, const float* entropy,
                        const float* dlogp, const float* dentropy, float* dlogits, std::int64_t T, std::int64_t V,
                        float scale, bool accumulate) {
  RequireSizes({{"T", T}, {"V", V}});
  Require(V > 0, "V must be positive");
  Require(scale > 0.0f && std::isfinite(scale), "scale must be a positive finite number");
  Require(!(accumulate && dlogits == logits), "dlogits may alias logits only when not accumulating");
  if (T == 0) return;
  RequirePtr(logits, "logits");
  RequirePtr(lse, "lse");
  RequirePtr(dlogits, "dlogits");
  if (dlogp) RequirePtr(targets, "targets");
  if (dentropy) RequirePtr(entropy, "entropy");
  if (targets) CheckIds(targets, T, V, "targets", true);
  const KernelTable& kt = ActiveKernels();
  ForChunks(T, RowChunk(V), V, [&](std::int64_t, std::int64_t r0, std::int64_t r1) {
    kt.logSoftmaxBackward(logits + r0 * V, targets ? targets + r0 : nullptr, lse + r0, entropy ? entropy + r0 : nullptr,
                          dlogp ? dlogp + r0 : nullptr, dentropy ? dentropy + r0 : nullptr, dlogits + r0 * V, r1 - r0,
                          V, scale, accumulate);
  });
}

CrossEntropyResult CrossEntropyForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V,
                                       float* losses, float* lse) {
  RequireSizes({{"T", T}, {"V", V}});
  RequirePtr(targets, "targets");
  HostBuffer<float> own;
  if (!losses) {
    own = HostBuffer<float>(static_cast<std::size_t>(T), "cross-entropy losses");
    losses = own.data();
  }
  LogSoftmaxForward(logits, targets, T, V, 1.0f, losses, nullptr, lse);
  CrossEntropyResult r{0.0, 0};
  double sum = 0.0;
  for (std::int64_t t = 0; t < T; ++t) {
    losses[t] = targets[t] >= 0 ? -losses[t] : 0.0f;
    if (targets[t] >= 0) {
      sum += losses[t];
      ++r.count;
    }
  }
  r.loss = r.count > 0 ? sum / static_cast<double>(r.count) : 0.0;
  return r;
}

void CrossEntropyBackward(const float* logits, const std::int32_t* targets, const float* lse, float* dlogits,
                          std::int64_t T, std::int64_t V, float gradScale, bool accumulate) {
  RequireSizes({{"T", T}, {"V", V}});
  Require(std::isfinite(gradScale), "gradScale must be finite");
  RequirePtr(targets, "targets");
  HostBuffer<float> dlogp(static_cast<std::size_t>(std::max<std::int64_t>(T, 1)), "cross-entropy dlogp");
  for (std::int64_t t = 0; t < T; ++t) dlogp[t] = -gradScale;
  LogSoftmaxBackward(logits, targets, lse, nullptr, dlogp.data(), nullptr, dlogits, T, V, 1.0f, accumulate);
}

// ---- optimiser --------------------------------------------------------------------------------

void CheckAdamWOptions(const AdamWOptions& o) {
  Require(std::isfinite(o.lr) && o.lr >= 0.0, "lr must be a finite number >= 0");
  Require(o.beta1 >= 0.0 && o.beta1 < 1.0, "beta1 must be in [0, 1)");
  Require(o.beta2 >= 0.0 && o.beta2 < 1.0, "beta2 must be in [0, 1)");
  Require(std::isfinite(o.eps) && o.eps > 0.0, "eps must be a positive finite number");
  Require(std::isfinite(o.weightDecay) && o.weightDecay >= 0.0, "weightDecay must be a finite number >= 0");
}

void AdamWUpdate(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWOptions& o, std::int64_t step,
                 float gradScale, bool decay) {
  CheckAdamWOptions(o);
  RequireSizes({{"n", n}});
  Require(step >= 1, "step must be >= 1 (1-based)");
  Require(std::isfinite(gradScale), "gradScale must be finite");
  if (n == 0) return;
  for (const auto& [ptr, name] : {std::pair<const void*, const char*>{p, "param"}, {g, "grad"}, {m, "m"}, {v, "v"}}) {
    RequirePtr(ptr, name);
  }
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  AdamWScalars s{};
  s.beta1 = static_cast<float>(o.beta1);
  s.beta2 = static_cast<float>(o.beta2);
  s.eps = static_cast<float>(o.eps);
  s.decayFactor = decay ? static_cast<float>(1.0 - o.lr * o.weightDecay) : 1.0f;
  s.gradScale = gradScale;
  s.stepSize = static_cast<float>(o.lr / bc1);
  s.invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const KernelTable& kt = ActiveKernels();
  ForChunks(n, kTaskWork, 4, [&](std::int64_t, std::int64_t i0, std::int64_t i1) {
    kt.adamw(p + i0, g + i0, m + i0, v + i0, i1 - i0, s);
  });
}

double SumSquares(const float* x, std::int64_t n) {
  RequireSizes({{"n", n}});
  if (n == 0) return 0.0;
  RequirePtr(x, "x");
  const KernelTable& kt = ActiveKernels();
  const std::int64_t chunk = kTaskWork;
  HostBuffer<double> partial(static_cast<std::size_t>((n + chunk - 1) / chunk), "sum of squares partials");
  ForChunks(n, chunk, 1,
            [&](std::int64_t c, std::int64_t i0, std::int64_t i1) { partial[c] = kt.sumSquares(x + i0, i1 - i0); });
  double s = 0.0;
  for (std::size_t c = 0; c < partial.size(); ++c) s += partial[c];
  return s;
}

}  // namespace sinkflex::model
