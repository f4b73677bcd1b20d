// Reference: docs/design.md, "GRPO — semantics"; float64 reference:
//   test/grpo/fixtures/reference.ts.
// Tests: test/grpo/advantages.test.ts, policy-loss.test.ts, policy-loss-errors.test.ts,
//   determinism.test.ts.
// GRPO kernels: group-relative advantages and the clipped policy loss with VERL's numerics
// (docs/design.md, "GRPO — semantics"). These declarations are the device-independent contract:
// the CPU implementation lives next to this file; a CUDA implementation of the same functions
// can be added behind the same option and result types.
//
// Every function validates values it reads (NaN/Inf, mask values, group sizes) and throws
// sinkflex::ArgumentError naming the argument and the first offending index; the first index
// is chosen deterministically, independent of the thread count.
#pragma once

#include <cstdint>
#include <optional>

namespace sinkflex::grpo {

/** How rewards of one group become advantages. */
enum class Estimator {
  kGrpo,       // (r - mean) / (std + eps), or r - mean without normByStd
  kRloo,       // n / (n - 1) * (r - mean); a group of one keeps its reward (VERL)
  kGrpoPassK,  // only the group's best gets (r_max - r_second) [/ (std + eps)]
};

struct AdvantageOptions {
  Estimator estimator = Estimator::kGrpo;
  bool normByStd = true;
  double eps = 1e-6;
};

/**
 * One advantage per response. `groupIds` are arbitrary integers (unsorted, not contiguous);
 * responses sharing an id form a group. Group statistics are computed in double, in the
 * responses' index order. Throws ArgumentError for non-finite rewards, n < 1, and groups of one
 * under grpo_passk.
 */
void ComputeAdvantages(const float* rewards, const std::int32_t* groupIds, std::int64_t n, const AdvantageOptions& opts,
                       float* out);

/**
 * Token advantages: out[i, t] = adv[i] where responseMask[i, t] == 1, else 0.
 * Throws ArgumentError for non-finite advantages and mask values other than 0 and 1.
 */
void BroadcastAdvantages(const float* adv, const float* responseMask, std::int64_t batch, std::int64_t responseLen,
                         float* out);

/** The KL estimator of the KL-to-reference loss term. */
enum class KlType {
  kNone,  // no reference log-probs: no KL term
  kK1,    // logp - ref
  kK2,    // (logp - ref)^2 / 2
  kK3,    // low_var_kl: d = clamp(ref - logp, ±20), clamp(e^d - d - 1, ±10)
  kAbs,   // |logp - ref|
};

/** VERL's loss_agg_mode. */
enum class AggMode { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };

struct PolicyLossOptions {
  double clipLow = 0.2;
  double clipHigh = 0.2;
  double dualClipC = 3.0;
  KlType klType = KlType::kNone;
  double klCoef = 0.0;
  double entropyCoef = 0.0;
  AggMode aggMode = AggMode::kTokenMean;
  /** Divisor of seq-mean-token-sum-norm; unset = responseLen. */
  std::optional<double> lossScale;
  /** Replaces the local unmasked-token count of token-mean (micro-batching). */
  std::optional<double> globalTokenCount;
  /** Replaces the local non-empty-sequence count of the seq-mean-* modes except -sum-norm. */
  std::optional<double> globalSeqCount;
};

/** Row-major [batch, responseLen] token tensors; optional ones are null. */
struct PolicyLossInputs {
  const float* logProbs = nullptr;
  const float* oldLogProbs = nullptr;
  /** [batch, responseLen] when advantagesPerToken, else [batch] (broadcast over tokens). */
  const float* advantages = nullptr;
  bool advantagesPerToken = true;
  const float* responseMask = nullptr;
  const float* refLogProbs = nullptr;  // required when opts.klType != kNone
  const float* entropy = nullptr;      // optional; aggregated and weighted by entropyCoef
  std::int64_t batch = 0;
  std::int64_t responseLen = 0;
};

/** The scalar results (double) and VERL's actor metrics. */
struct PolicyLossResult {
  double loss = 0;             // pg + klCoef * kl - entropyCoef * entropy (each aggregated)
  double pgLoss = 0;           // actor/pg_loss
  double pgClipfrac = 0;       // actor/pg_clipfrac
  double pgClipfracLower = 0;  // actor/pg_clipfrac_lower
  double ppoKl = 0;            // actor/ppo_kl
  double klLoss = 0;           // actor/kl_loss (when refLogProbs given)
  double entropy = 0;          // actor/entropy (when entropy given)
  std::int64_t tokens = 0;     // unmasked tokens
  std::int64_t sequences = 0;  // rows with at least one unmasked token
};

/**
 * Checks shapes and option values (ArgumentError naming the option): clipLow in [0, 1],
 * clipHigh >= 0, dualClipC > 1, klCoef >= 0, finite entropyCoef, positive lossScale and global
 * counts, refLogProbs present with a KL type, entropy present with a nonzero entropyCoef.
 */
void ValidatePolicyLoss(const PolicyLossInputs& in, const PolicyLossOptions& opts);

/**
 * The clipped policy loss (dual clip, optional KL and entropy terms), aggregated by
 * opts.aggMode, and its exact gradient with respect to logProbs written to dLogProbs
 * ([batch, responseLen]; 0 at masked tokens). Values at masked tokens are never used.
 * Throws ArgumentError for mask values other than 0/1 and non-finite values at unmasked tokens.
 */
PolicyLossResult PolicyLoss(const PolicyLossInputs& in, const PolicyLossOptions& opts, float* dLogProbs);

/**
 * Completes a result whose pgLoss, klLoss and entropy hold the aggregated sums and ppoKl the
 * plain sum of -log ratio over the unmasked tokens (the CPU and CUDA kernels both end here):
 * ppoKl and the clip fractions become per-token means, loss = pg + klCoef kl - entropyCoef
 * entropy, and the counts are stored.
 */
void FinishPolicyLoss(PolicyLossResult& r, double clip, double clipLower, std::int64_t tokens, std::int64_t sequences,
                      const PolicyLossOptions& opts);

/** dst[i] = src[i] with the kernel thread pool: the memory-bandwidth baseline of benchmarks. */
void ParallelCopy(float* dst, const float* src, std::int64_t count);

}  // namespace sinkflex::grpo
