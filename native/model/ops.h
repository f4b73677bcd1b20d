// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// The ops of the built-in policy model on CPU: float32, row-major, multi-threaded over the
// global thread pool, vectorised (AVX-512 / AVX2+FMA / portable, chosen at run time) and
// deterministic (same inputs → same bits, whatever the thread count). Every op has a forward
// and a backward; gradients of parameters are accumulated (+=), gradients of activations are
// written, or accumulated when `accumulate` is set. Arguments are validated (ArgumentError).
//
// Shapes: T = rows (tokens of a packed batch), D = model width, V = vocabulary size.
#pragma once

#include <cstdint>
#include <vector>

#include "../core/allocator.h"
#include "gemm.h"
#include "swiglu_params.h"

namespace sinkflex::model {

// ---- linear -----------------------------------------------------------------------------------

/** y[T, out] = x[T, in] . W[out, in]^T (+ b[out]); W in the PyTorch layout; b may be null. */
void LinearForward(const float* x, const float* w, const float* b, float* y, std::int64_t T, std::int64_t in,
                   std::int64_t out);
/**
 * dx[T, in] = dy . W (or += when accumulateDx), dw[out, in] += dy^T . x, db[out] += sum_t dy.
 * Any of dx, dw, db may be null (that gradient is skipped).
 */
void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, std::int64_t T,
                    std::int64_t in, std::int64_t out, bool accumulateDx);

/**
 * LinearForward with W[out, in] stored as bfloat16 bits: widened exactly inside the GEMM (while
 * packing or streaming), so y equals LinearForward over the widened weights bit for bit.
 */
void LinearForwardBf16(const float* x, const std::uint16_t* w, const float* b, float* y, std::int64_t T,
                       std::int64_t in, std::int64_t out);
/**
 * The backward of LinearForwardBf16 without a weight gradient (bfloat16 weights are frozen):
 * dx[T, in] = dy . W (or += when accumulateDx; dx may be null), db[out] += sum_t dy (db may be null).
 */
void LinearBackwardBf16(const std::uint16_t* w, const float* dy, float* dx, float* db, std::int64_t T, std::int64_t in,
                        std::int64_t out, bool accumulateDx);

// ---- RMSNorm ----------------------------------------------------------------------------------

/** y = x / sqrt(mean(x^2) + eps) * g per row of x[T, D]; rstd[T] keeps 1/sqrt(...) for backward. y may be x. */
void RmsNormForward(const float* x, const float* g, float* y, float* rstd, std::int64_t T, std::int64_t D, float eps);
/** dx (= or +=), dg[D] += (dg may be null: a frozen gain). dx may be dy. */
void RmsNormBackward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                     std::int64_t T, std::int64_t D, bool accumulateDx);

// ---- RoPE -------------------------------------------------------------------------------------

/**
 * Scaling of the RoPE frequencies, as transformers' modeling_rope_utils defines it (rope_type
 * default / linear / llama3 / yarn). Fields a type does not use are ignored.
 */
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn };
  Type type = Type::kNone;
  double factor = 1.0;               // linear, llama3, yarn
  std::int64_t originalContext = 0;  // llama3, yarn: original_max_position_embeddings
  double lowFreqFactor = 1.0;        // llama3
  double highFreqFactor = 4.0;       // llama3
  double betaFast = 32.0;            // yarn
  double betaSlow = 1.0;             // yarn
  bool truncate = true;              // yarn: floor/ceil the correction range (absent in HF = true)
  double attentionFactor = -1.0;     // yarn: < 0 = derived from factor (and mscale / mscaleAllDim)
  double mscale = 0.0;               // yarn: 0 = absent
  double mscaleAllDim = 0.0;         // yarn: 0 = absent

  /** Throws ArgumentError naming the first invalid field as `<prefix>.<field>`. */
  void Validate(const char* prefix) const;
};

/**
 * cos/sin of pos * invFreq[i] for pos < maxPositions and i < headDim/2, times the attention
 * factor (angles and factor in double precision, stored as float). Without scaling invFreq[i] =
 * theta^(-2i/headDim) and the factor is 1; with scaling, inverse frequencies and factor are
 * computed as transformers' modeling_rope_utils computes them (linear: / factor; llama3: the
 * wavelength bands; yarn: the ramp between interpolation and extrapolation over the correction
 * range, truncated or not, and the factor 0.1 ln(factor) + 1 or its mscale ratio). The factor on
 * cos and sin scales q and k alike, hence q.k by its square, as transformers applies it.
 */
class RopeTable {
 public:
  RopeTable(std::int64_t headDim, std::int64_t maxPositions, double theta, const RopeScaling& scaling = {});
  std::int64_t headDim() const { return headDim_; }
  std::int64_t maxPositions() const { return maxPositions_; }
  double theta() const { return theta_; }
  const RopeScaling& scaling() const { return scaling_; }
  /** invFreq[i], i < headDim / 2. */
  const std::vector<double>& inverseFrequencies() const { return invFreq_; }
  double attentionFactor() const { return attentionFactor_; }
  const float* cos() const { return cos_.data(); }
  const float* sin() const { return sin_.data(); }

 private:
  std::int64_t headDim_, maxPositions_;
  double theta_;
  RopeScaling scaling_;
  std::vector<double> invFreq_;
  double attentionFactor_ = 1.0;
  HostBuffer<float> cos_, sin_;
};

/** True when two scalings describe the same table (every field the type uses). */
bool SameRopeScaling(const RopeScaling& a, const RopeScaling& b);

/**
 * Rotate-half RoPE (Llama / gpt-oss / HF): for x[T, H, Dh] and i < Dh/2, with angle
 * a = pos[t] * theta^(-2i/Dh): out[i] = x[i] cos a - x[i + Dh/2] sin a,
 * out[i + Dh/2] = x[i + Dh/2] cos a + x[i] sin a. Positions are per token (packed documents
 * restart them). out may be x.
 */
void RopeForward(const RopeTable& table, const float* x, float* out, const std::int32_t* pos, std::int64_t T,
                 std::int64_t H);
/** The transpose (inverse rotation) applied to dy. dx may be dy. */
void RopeBackward(const RopeTable& table, const float* dy, float* dx, const std::int32_t* pos, std::int64_t T,
                  std::int64_t H);

// ---- SwiGLU -----------------------------------------------------------------------------------

/** out[T, F] from h[T, 2F] = [gate | up] per row (see SwiGluParams). */
void SwiGluForward(const float* h, float* out, std::int64_t T, std::int64_t F, SwiGluParams p);
/** dh[T, 2F] (= or +=) from dout[T, F]. */
void SwiGluBackward(const float* h, const float* dout, float* dh, std::int64_t T, std::int64_t F, SwiGluParams p,
                    bool accumulate);

// ---- embedding --------------------------------------------------------------------------------

/** out[t] = table[ids[t]] for table[V, D]. */
void EmbeddingForward(const float* table, const std::int32_t* ids, float* out, std::int64_t T, std::int64_t V,
                      std::int64_t D);
/** EmbeddingForward of a table stored as bfloat16 bits (rows widened exactly). */
void EmbeddingForwardBf16(const std::uint16_t* table, const std::int32_t* ids, float* out, std::int64_t T,
                          std::int64_t V, std::int64_t D);
/** dtable[ids[t]] += dout[t] (scatter-add; deterministic order). */
void EmbeddingBackward(const std::int32_t* ids, const float* dout, float* dtable, std::int64_t T, std::int64_t V,
                       std::int64_t D);

// ---- log-softmax over the vocabulary ------------------------------------------------------------

/**
 * For z = scale * logits[T, V] (scale = 1 / temperature): lse[t] = log sum exp z,
 * logp[t] = z[t, targets[t]] - lse[t] (0 where targets[t] < 0 or targets is null),
 * entropy[t] = -sum p log p. logp and entropy may be null.
 */
void LogSoftmaxForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V, float scale,
                       float* logp, float* entropy, float* lse);
/**
 * dlogits = scale * (dlogp (onehot - p) - dentropy p (log p + H)); dlogp or dentropy may be null
 * (entropy, from the forward, is needed only with dentropy). dlogits may be logits when not
 * accumulating (in place, saving a [T, V] buffer).
 */
void LogSoftmaxBackward(const float* logits, const std::int32_t* targets, const float* lse, const float* entropy,
                        const float* dlogp, const float* dentropy, float* dlogits, std::int64_t T, std::int64_t V,
                        float scale, bool accumulate);

/** Result of a cross-entropy forward. */
struct CrossEntropyResult {
  double loss;         // mean of -logp over rows with a target (0 when none)
  std::int64_t count;  // rows with targets[t] >= 0
};
/** Mean cross-entropy; losses[T] (may be null) gets -logp per row, 0 where ignored. */
CrossEntropyResult CrossEntropyForward(const float* logits, const std::int32_t* targets, std::int64_t T, std::int64_t V,
                                       float* losses, float* lse);
/** dlogits = gradScale (softmax - onehot) on rows with a target, 0 elsewhere (gradScale = 1/count for the mean). */
void CrossEntropyBackward(const float* logits, const std::int32_t* targets, const float* lse, float* dlogits,
                          std::int64_t T, std::int64_t V, float gradScale, bool accumulate);

// ---- optimiser ----------------------------------------------------------------------------------

/** AdamW hyper-parameters (PyTorch defaults except weightDecay). */
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
};
/** Validates the options (ArgumentError naming the field). */
void CheckAdamWOptions(const AdamWOptions& o);
/**
 * One AdamW step (PyTorch's algorithm: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)) with g = gradScale * grad;
 * step is 1-based; decay = false skips the weight decay.
 */
void AdamWUpdate(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWOptions& o, std::int64_t step,
                 float gradScale, bool decay);

/** Sum of squares in double, deterministic (fixed chunking). */
double SumSquares(const float* x, std::int64_t n);

/** Name of the instruction set the ops use: "avx512", "avx2" or "generic". */
const char* OpsIsa();

}  // namespace sinkflex::model
