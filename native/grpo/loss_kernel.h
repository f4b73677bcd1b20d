// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// The per-token part of the policy loss: one pass over a piece of one row (a contiguous run of
// tokens sharing the row's aggregation weight) that writes the gradient and returns the
// piece's unweighted sums. Internal to native/grpo/.
#pragma once

#include <cstdint>

#include "grpo.h"

namespace sinkflex::grpo {

/** Per-call constants of the token loss. */
struct TokenConsts {
  float lo;      // 1 - clipLow
  float hi;      // 1 + clipHigh
  float dual;    // dualClipC
  float klCoef;  // weight of the KL gradient
};

/** One piece: n tokens of one row; `adv` is per token, or null with `advRow` for the row. */
struct PieceArgs {
  const float* logp;
  const float* old;
  const float* adv;  // null: advRow applies to every token
  float advRow;
  const float* mask;
  const float* ref;  // null without a KL term
  const float* ent;  // null without entropy
  float* grad;
  std::int64_t n;
  float w;  // aggregation weight of this row: dLoss/dl for an unmasked token
};

/** Unweighted sums over the piece's unmasked tokens. */
struct PieceSums {
  double pg = 0;               // per-token policy loss
  double kl = 0;               // KL estimate
  double ent = 0;              // entropy
  double negLogRatio = 0;      // -(clamped logp - oldLogp)
  std::int64_t clip = 0;       // tokens where the clipped term is the larger
  std::int64_t clipLower = 0;  // tokens where the dual clip bounds the loss
  bool bad = false;            // a non-finite value at an unmasked token (caller rescans)
};

/** The fused per-token loss and gradient over one piece (vectorised, ISA chosen at run time). */
PieceSums LossPiece(const PieceArgs& a, const TokenConsts& c, KlType kl);

/** The portable 4-lane build of LossPiece. */
PieceSums LossPieceGeneric(const PieceArgs& a, const TokenConsts& c, KlType kl);

/** Which build LossPiece runs: "avx512", "avx2" or "generic". */
const char* LossPieceIsa();

/** Counts mask values equal to 1; returns false when a value is neither 0 nor 1. */
bool MaskPiece(const float* mask, std::int64_t n, std::int64_t* count);

}  // namespace sinkflex::grpo
