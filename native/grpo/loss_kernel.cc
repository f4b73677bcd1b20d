// Fused per-token policy loss (VERL's compute_policy_loss_vanilla + kl_penalty) and its
// gradient with respect to logProbs, eight tokens at a time. Partial sums go into vector
// lanes folded into double every kFlush tokens, so the summation order is fixed by the piece
// alone (never by the thread count).
//
// Per unmasked token (A the advantage, x = logp - oldLogp):
//   rho = exp(clamp(x, -20, 20)); l1 = -A rho; l2 = -A clamp(rho, 1 - clipLow, 1 + clipHigh)
//   lc = max(l1, l2); where A < 0: l = min(lc, -A c), else l = lc.
//   dl/dlogp: l1 (= d(-A rho)/dlogp) where -20 <= x <= 20 and l1 is the larger; 0 where l2 > l1
//   (then rho is clamped) or where the dual clip bounds the loss; half of it on the exact tie
//   lc == -A c (autograd's rule for min). Clamp bounds are inclusive, as in torch.clamp.
#include "loss_kernel.h"

#include "simd.h"

namespace sinkflex::grpo {
namespace {

constexpr std::int64_t kFlush = 256;

/** The eight-token inputs of one step (masked lanes may hold anything). */
struct Lanes {
  F8 lp, ol, adv, m, ref, ent;
};

/** Running sums of one flush window. */
struct Acc {
  F8 pg = Splat(0), kl = Splat(0), en = Splat(0), nl = Splat(0);
  I8 clip = SplatI(0), low = SplatI(0), bad = SplatI(0);
};

/**
 * low_var_kl of d = clamp(ref - logp, ±20): k3 = e^d - d - 1 and em1 = e^d - 1, from the Taylor
 * series (e^d - 1 - d) / d^2 = 1/2 + d/6 + ... where |d| < 0.34 (no cancellation), else from ex.
 */
SINKFLEX_ALWAYS_INLINE void LowVarKl(const F8& d, const F8& ex, F8* k3, F8* em1) {
  F8 q = Splat(1.0f / 40320.0f);
  q = q * d + Splat(1.0f / 5040.0f);
  q = q * d + Splat(1.0f / 720.0f);
  q = q * d + Splat(1.0f / 120.0f);
  q = q * d + Splat(1.0f / 24.0f);
  q = q * d + Splat(1.0f / 6.0f);
  q = q * d + Splat(0.5f);
  const I8 small = Abs(d) < Splat(0.34f);
  *k3 = Select(small, d * d * q, (ex - d) - Splat(1.0f));
  *em1 = Select(small, d * (Splat(1.0f) + d * q), ex - Splat(1.0f));
}

template <KlType KL, bool kEnt>
SINKFLEX_ALWAYS_INLINE F8 Step(const Lanes& in, const TokenConsts& c, const F8& w, Acc& acc) {
  const F8 zero = Splat(0.0f);
  const I8 on = in.m != zero;

  const F8 x = in.lp - in.ol;
  const F8 xc = Clamp(x, Splat(-20.0f), Splat(20.0f));
  const I8 inRange = (x >= Splat(-20.0f)) & (x <= Splat(20.0f));
  const F8 rho = ExpClamped(xc);
  const F8 negA = -in.adv;
  const F8 l1 = negA * rho;
  const F8 l2 = negA * Clamp(rho, Splat(c.lo), Splat(c.hi));
  const I8 clipped = l2 > l1;
  const F8 lc = Select(clipped, l2, l1);
  const F8 dlc = Select(clipped | ~inRange, zero, l1);
  const I8 neg = in.adv < zero;
  const F8 l3 = negA * Splat(c.dual);
  const I8 lower = neg & (lc > l3);
  const I8 tie = neg & (lc == l3);
  const F8 l = Select(lower, l3, lc);
  const F8 dl = Select(lower, zero, Select(tie, Splat(0.5f) * dlc, dlc));

  I8 finite = Finite(in.lp) & Finite(in.ol) & Finite(in.adv);
  F8 klv = zero;
  F8 dkl = zero;
  if constexpr (KL != KlType::kNone) {
    finite = finite & Finite(in.ref);
    const F8 d = in.lp - in.ref;
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
      const F8 e = in.ref - in.lp;
      const F8 ec = Clamp(e, Splat(-20.0f), Splat(20.0f));
      const I8 inE = (e >= Splat(-20.0f)) & (e <= Splat(20.0f));
      F8 k3, em1;
      LowVarKl(ec, ExpClamped(ec), &k3, &em1);
      klv = Clamp(k3, Splat(-10.0f), Splat(10.0f));
      const I8 inK = (k3 >= Splat(-10.0f)) & (k3 <= Splat(10.0f));
      dkl = Select(inE & inK, -em1, zero);  // d/dlogp of e^(ref - logp) - (ref - logp) - 1
    }
  }
  if constexpr (kEnt) {
    finite = finite & Finite(in.ent);
    acc.en = acc.en + Select(on, in.ent, zero);
  }

  acc.pg = acc.pg + Select(on, l, zero);
  acc.kl = acc.kl + Select(on, klv, zero);
  acc.nl = acc.nl - Select(on, xc, zero);
  acc.clip = acc.clip - (on & clipped);  // true lanes are -1
  acc.low = acc.low - (on & lower);
  acc.bad = acc.bad | (on & ~finite);
  return Select(on, w * (dl + Splat(c.klCoef) * dkl), zero);
}

SINKFLEX_ALWAYS_INLINE void Fold(const Acc& acc, PieceSums& s, std::int32_t& bad) {
  for (int k = 0; k < kVec; ++k) {
    s.pg += acc.pg[k];
    s.kl += acc.kl[k];
    s.ent += acc.en[k];
    s.negLogRatio += acc.nl[k];
    s.clip += acc.clip[k];
    s.clipLower += acc.low[k];
    bad |= acc.bad[k];
  }
}

template <KlType KL, bool kEnt>
SINKFLEX_ALWAYS_INLINE PieceSums Piece(const PieceArgs& a, const TokenConsts& c) {
  PieceSums s;
  std::int32_t bad = 0;
  const F8 w = Splat(a.w);
  const F8 advRow = Splat(a.advRow);
  const F8 zero = Splat(0.0f);
  const std::int64_t full = a.n - a.n % kVec;
  for (std::int64_t base = 0; base < full; base += kFlush) {
    const std::int64_t end = full - base < kFlush ? full : base + kFlush;
    Acc acc;
    for (std::int64_t i = base; i < end; i += kVec) {
      Lanes in;
      in.lp = Load(a.logp + i);
      in.ol = Load(a.old + i);
      in.adv = a.adv ? Load(a.adv + i) : advRow;
      in.m = Load(a.mask + i);
      in.ref = KL != KlType::kNone ? Load(a.ref + i) : zero;
      in.ent = kEnt ? Load(a.ent + i) : zero;
      Store(a.grad + i, Step<KL, kEnt>(in, c, w, acc));
    }
    Fold(acc, s, bad);
  }
  if (full < a.n) {
    // The last n % 8 tokens, padded with masked lanes.
    const int rest = static_cast<int>(a.n - full);
    float buf[6][kVec] = {};
    for (int k = 0; k < rest; ++k) {
      buf[0][k] = a.logp[full + k];
      buf[1][k] = a.old[full + k];
      buf[2][k] = a.adv ? a.adv[full + k] : a.advRow;
      buf[3][k] = a.mask[full + k];
      if (KL != KlType::kNone) buf[4][k] = a.ref[full + k];
      if (kEnt) buf[5][k] = a.ent[full + k];
    }
    Lanes in{Load(buf[0]), Load(buf[1]), Load(buf[2]), Load(buf[3]), Load(buf[4]), Load(buf[5])};
    Acc acc;
    float g[kVec];
    Store(g, Step<KL, kEnt>(in, c, w, acc));
    for (int k = 0; k < rest; ++k) a.grad[full + k] = g[k];
    Fold(acc, s, bad);
  }
  s.bad = bad != 0;
  return s;
}

template <KlType KL>
SINKFLEX_ALWAYS_INLINE PieceSums ForKl(const PieceArgs& a, const TokenConsts& c) {
  return a.ent ? Piece<KL, true>(a, c) : Piece<KL, false>(a, c);
}

}  // namespace

SINKFLEX_ISA_CLONES
PieceSums LossPiece(const PieceArgs& a, const TokenConsts& c, KlType kl) {
  switch (kl) {
    case KlType::kK1: return ForKl<KlType::kK1>(a, c);
    case KlType::kK2: return ForKl<KlType::kK2>(a, c);
    case KlType::kK3: return ForKl<KlType::kK3>(a, c);
    case KlType::kAbs: return ForKl<KlType::kAbs>(a, c);
    case KlType::kNone: break;
  }
  return ForKl<KlType::kNone>(a, c);
}

SINKFLEX_ISA_CLONES
bool MaskPiece(const float* mask, std::int64_t n, std::int64_t* count) {
  const F8 zero = Splat(0.0f);
  const F8 one = Splat(1.0f);
  I8 bad = SplatI(0);
  std::int64_t total = 0;
  std::int64_t i = 0;
  const std::int64_t full = n - n % kVec;
  while (i < full) {
    // int32 lane counters are folded every 2^20 tokens, far below overflow.
    const std::int64_t end = full - i < (1 << 20) ? full : i + (1 << 20);
    I8 cnt = SplatI(0);
    for (; i < end; i += kVec) {
      const F8 m = Load(mask + i);
      cnt = cnt - (m == one);
      bad = bad | ((m != zero) & (m != one));
    }
    for (int k = 0; k < kVec; ++k) total += cnt[k];
  }
  std::int32_t anyBad = 0;
  for (int k = 0; k < kVec; ++k) anyBad |= bad[k];
  for (; i < n; ++i) {
    total += mask[i] == 1.0f ? 1 : 0;
    anyBad |= (mask[i] != 0.0f && mask[i] != 1.0f) ? 1 : 0;
  }
  *count = total;
  return anyBad == 0;
}

}  // namespace sinkflex::grpo
