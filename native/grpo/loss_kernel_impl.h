// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// The fused per-token policy loss (VERL's compute_policy_loss_vanilla + kl_penalty) and its
// gradient with respect to logProbs, kVec tokens at a time. Included by loss_kernel.cc
// (4 lanes, any CPU) and loss_kernel_x86.cc (8 lanes, AVX2 and AVX-512 builds) after
// SINKFLEX_LANES is defined; SINKFLEX_DEFINE_LOSS_PIECE(name, attributes) then defines one entry.
//
// Partial sums go into vector lanes folded into double every kFlush tokens, so the summation
// order is fixed by the piece and the lane count, never by the thread count.
//
// Per unmasked token (A the advantage, x = logp - oldLogp):
//   rho = exp(clamp(x, -20, 20)); l1 = -A rho; l2 = -A clamp(rho, 1 - clipLow, 1 + clipHigh)
//   lc = max(l1, l2); where A < 0: l = min(lc, -A c), else l = lc.
//   dl/dlogp: l1 (= d(-A rho)/dlogp) where -20 <= x <= 20 and l1 is the larger; 0 where l2 > l1
//   (then rho is clamped) or where the dual clip bounds the loss; half of it on the exact tie
//   lc == -A c (autograd's rule for min). Clamp bounds are inclusive, as in torch.clamp.
#pragma once

#include "loss_kernel.h"
#include "simd.h"

namespace sinkflex::grpo::SINKFLEX_SIMD_NS {
namespace {

constexpr std::int64_t kFlush = 256;

/** The kVec-token inputs of one step (masked lanes may hold anything). */
struct Lanes {
  FV lp, ol, adv, m, ref, ent;
};

/** The per-call constants as vectors, built once per piece (not per step). */
struct VConsts {
  FV lo, hi, dual, klCoef, w;
};

/**
 * Running sums of one flush window. `chk` collects (v - v) of every input at unmasked lanes:
 * 0 while all are finite, NaN from the first NaN or infinity on.
 */
struct Acc {
  FV pg = Splat(0), kl = Splat(0), en = Splat(0), nl = Splat(0), chk = Splat(0);
  IV clips = SplatI(0);  // clipped + 65536 * dual-clipped tokens (each <= kFlush / kVec per lane)
};

/**
 * low_var_kl of d = clamp(ref - logp, ±20): k3 = e^d - d - 1 and em1 = e^d - 1. Where |d| is
 * below ln2/2 (the exp's range reduction leaves d whole) they come from the exp's own series,
 * k3 = d^2 h and em1 = d (1 + d h), free of the cancellation of e^d - d - 1.
 */
SINKFLEX_ALWAYS_INLINE void LowVarKl(const FV& d, FV* k3, FV* em1) {
  FV k, h;
  const FV ex = ExpParts(d, &k, &h);
  const IV small = k == Splat(0.0f);
  *k3 = Select(small, d * d * h, (ex - d) - Splat(1.0f));
  *em1 = Select(small, d * (Splat(1.0f) + d * h), ex - Splat(1.0f));
}

template <KlType KL, bool kEnt>
SINKFLEX_ALWAYS_INLINE FV Step(const Lanes& in, const VConsts& c, Acc& acc) {
  const FV zero = Splat(0.0f);
  const IV on = in.m != zero;

  const FV x = in.lp - in.ol;
  const FV xc = Clamp(x, Splat(-20.0f), Splat(20.0f));
  const IV inRange = xc == x;  // -20 <= x <= 20 (false for NaN)
  const FV rho = ExpClamped(xc);
  const FV negA = -in.adv;
  const FV l1 = negA * rho;
  const FV l2 = negA * Clamp(rho, c.lo, c.hi);
  const IV clipped = l2 > l1;
  const FV lc = Select(clipped, l2, l1);
  const FV dlc = Select(clipped | ~inRange, zero, l1);
  const IV neg = in.adv < zero;
  const FV l3 = negA * c.dual;
  const IV lower = neg & (lc > l3);
  const IV tie = neg & (lc == l3);
  const FV l = Select(lower, l3, lc);
  const FV dl = Select(lower, zero, Select(tie, Splat(0.5f) * dlc, dlc));

  FV chk = (x - x) + (in.adv - in.adv);  // NaN when logp, oldLogp or A is not finite
  FV g = dl;
  if constexpr (KL != KlType::kNone) {
    const FV d = in.lp - in.ref;
    chk = chk + (d - d);
    FV klv, dkl;
    if constexpr (KL == KlType::kK1) {
      klv = d;
      dkl = Splat(1.0f);
    } else if constexpr (KL == KlType::kK2) {
      klv = Splat(0.5f) * d * d;
      dkl = d;
    } else if constexpr (KL == KlType::kAbs) {
      klv = Abs(d);
      dkl = Select(d > zero, Splat(1.0f), Select(d < zero, Splat(-1.0f), zero));
    } else {  // kK3 (low_var_kl)
      const FV e = in.ref - in.lp;
      const FV ec = Clamp(e, Splat(-20.0f), Splat(20.0f));
      const IV inE = ec == e;
      FV k3, em1;
      LowVarKl(ec, &k3, &em1);
      klv = Clamp(k3, Splat(-10.0f), Splat(10.0f));
      const IV inK = klv == k3;
      dkl = Select(inE & inK, -em1, zero);  // d/dlogp of e^(ref - logp) - (ref - logp) - 1
    }
    acc.kl = acc.kl + Select(on, klv, zero);
    g = g + c.klCoef * dkl;
  }
  if constexpr (kEnt) {
    chk = chk + (in.ent - in.ent);
    acc.en = acc.en + Select(on, in.ent, zero);
  }

  acc.pg = acc.pg + Select(on, l, zero);
  acc.nl = acc.nl - Select(on, xc, zero);
  acc.chk = acc.chk + Select(on, chk, zero);
  acc.clips = acc.clips - (on & clipped) + ((on & lower) & SplatI(65536));  // true lanes are -1
  return Select(on, c.w * g, zero);
}

SINKFLEX_ALWAYS_INLINE void Fold(const Acc& acc, PieceSums& s, bool& bad) {
  for (int k = 0; k < kVec; ++k) {
    s.pg += acc.pg[k];
    s.kl += acc.kl[k];
    s.ent += acc.en[k];
    s.negLogRatio += acc.nl[k];
    s.clip += acc.clips[k] & 0xffff;
    s.clipLower += acc.clips[k] >> 16;
    bad = bad || acc.chk[k] != 0.0f;  // NaN != 0
  }
}

template <KlType KL, bool kEnt, bool kAdvTok>
SINKFLEX_ALWAYS_INLINE PieceSums Piece(const PieceArgs& a, const TokenConsts& tc) {
  // Locals, so that the gradient stores cannot be taken to alias the arguments.
  const float* __restrict logp = a.logp;
  const float* __restrict old = a.old;
  const float* __restrict advp = a.adv;
  const float* __restrict mask = a.mask;
  const float* __restrict ref = a.ref;
  const float* __restrict ent = a.ent;
  float* __restrict grad = a.grad;
  const std::int64_t n = a.n;
  const VConsts c{Splat(tc.lo), Splat(tc.hi), Splat(tc.dual), Splat(tc.klCoef), Splat(a.w)};
  const FV advRow = Splat(a.advRow);
  const FV zero = Splat(0.0f);

  PieceSums s;
  bool bad = false;
  const std::int64_t full = n - n % kVec;
  for (std::int64_t base = 0; base < full; base += kFlush) {
    const std::int64_t end = full - base < kFlush ? full : base + kFlush;
    Acc acc;
    for (std::int64_t i = base; i < end; i += kVec) {
      Lanes in;
      in.lp = Load(logp + i);
      in.ol = Load(old + i);
      in.adv = kAdvTok ? Load(advp + i) : advRow;
      in.m = Load(mask + i);
      in.ref = KL != KlType::kNone ? Load(ref + i) : zero;
      in.ent = kEnt ? Load(ent + i) : zero;
      Store(grad + i, Step<KL, kEnt>(in, c, acc));
    }
    Fold(acc, s, bad);
  }
  if (full < n) {
    // The last n % kVec tokens, padded with masked lanes.
    const int rest = static_cast<int>(n - full);
    float buf[6][kVec] = {};
    for (int k = 0; k < rest; ++k) {
      buf[0][k] = logp[full + k];
      buf[1][k] = old[full + k];
      buf[2][k] = kAdvTok ? advp[full + k] : a.advRow;
      buf[3][k] = mask[full + k];
      if (KL != KlType::kNone) buf[4][k] = ref[full + k];
      if (kEnt) buf[5][k] = ent[full + k];
    }
    Lanes in{Load(buf[0]), Load(buf[1]), Load(buf[2]), Load(buf[3]), Load(buf[4]), Load(buf[5])};
    Acc acc;
    float g[kVec];
    Store(g, Step<KL, kEnt>(in, c, acc));
    for (int k = 0; k < rest; ++k) grad[full + k] = g[k];
    Fold(acc, s, bad);
  }
  s.bad = bad;
  return s;
}

template <KlType KL>
SINKFLEX_ALWAYS_INLINE PieceSums ForKl(const PieceArgs& a, const TokenConsts& c) {
  if (a.ent) return a.adv ? Piece<KL, true, true>(a, c) : Piece<KL, true, false>(a, c);
  return a.adv ? Piece<KL, false, true>(a, c) : Piece<KL, false, false>(a, c);
}

}  // namespace
}  // namespace sinkflex::grpo::SINKFLEX_SIMD_NS

/** Defines `PieceSums name(const PieceArgs&, const TokenConsts&, KlType)` for this lane count. */
#define SINKFLEX_DEFINE_LOSS_PIECE(name, attributes)                               \
  attributes PieceSums name(const PieceArgs& a, const TokenConsts& c, KlType kl) { \
    using namespace ::sinkflex::grpo::SINKFLEX_SIMD_NS;                            \
    switch (kl) {                                                                  \
      case KlType::kK1:                                                            \
        return ForKl<KlType::kK1>(a, c);                                           \
      case KlType::kK2:                                                            \
        return ForKl<KlType::kK2>(a, c);                                           \
      case KlType::kK3:                                                            \
        return ForKl<KlType::kK3>(a, c);                                           \
      case KlType::kAbs:                                                           \
        return ForKl<KlType::kAbs>(a, c);                                          \
      case KlType::kNone:                                                          \
        break;                                                                     \
    }                                                                              \
    return ForKl<KlType::kNone>(a, c);                                             \
  }
