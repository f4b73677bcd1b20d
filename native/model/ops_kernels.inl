// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// Row/element kernels of the model ops, written once over `Vec` (simd_vec.inl) and compiled
// per instruction set by kernels_<isa>.cc. Single-threaded; the callers split the rows.

namespace sinkflex::model {
namespace {

constexpr int W = Vec::kWidth;

inline Vec LoadN(const float* p, std::int64_t n, float fill = 0.0f) {
  return n >= W ? Vec::Load(p) : Vec::LoadPartial(p, static_cast<int>(n), fill);
}
/** n bfloat16 values (all W when n >= W) widened, the other lanes 0. */
inline Vec LoadN(const std::uint16_t* p, std::int64_t n) {
  if (n >= W) return Vec::LoadBf16(p);
  std::uint16_t tmp[W] = {};
  for (std::int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return Vec::LoadBf16(tmp);
}
inline void StoreN(Vec v, float* p, std::int64_t n) {
  if (n >= W)
    v.Store(p);
  else
    v.StorePartial(p, static_cast<int>(n));
}

void RmsNormForwardK(const float* x, const float* g, float* y, float* rstd, std::int64_t rows, std::int64_t D,
                     float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    Vec a0 = Vec::Zero(), a1 = Vec::Zero();
    std::int64_t i = 0;
    for (; i + 2 * W <= D; i += 2 * W) {
      const Vec v0 = Vec::Load(xr + i), v1 = Vec::Load(xr + i + W);
      a0 = Fma(v0, v0, a0);
      a1 = Fma(v1, v1, a1);
    }
    for (; i < D; i += W) {
      const Vec v = LoadN(xr + i, D - i);
      a0 = Fma(v, v, a0);
    }
    const double ms = static_cast<double>((a0 + a1).Sum()) / static_cast<double>(D);
    const float rs = static_cast<float>(1.0 / std::sqrt(ms + static_cast<double>(eps)));
    rstd[r] = rs;
    const Vec rv = Vec::Set1(rs);
    for (i = 0; i < D; i += W) StoreN(LoadN(xr + i, D - i) * rv * LoadN(g + i, D - i), yr + i, D - i);
  }
}

void RmsNormBackwardK(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dgAcc,
                      std::int64_t rows, std::int64_t D, bool accumulate) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    float* dxr = dx + r * D;
    Vec s0 = Vec::Zero(), s1 = Vec::Zero();
    std::int64_t i = 0;
    for (; i + 2 * W <= D; i += 2 * W) {
      s0 = Fma(Vec::Load(dyr + i) * Vec::Load(g + i), Vec::Load(xr + i), s0);
      s1 = Fma(Vec::Load(dyr + i + W) * Vec::Load(g + i + W), Vec::Load(xr + i + W), s1);
    }
    for (; i < D; i += W) s0 = Fma(LoadN(dyr + i, D - i) * LoadN(g + i, D - i), LoadN(xr + i, D - i), s0);
    const float rs = rstd[r];
    const float coef = static_cast<float>(static_cast<double>(rs) * rs * rs * (s0 + s1).Sum() / static_cast<double>(D));
    const Vec rv = Vec::Set1(rs), cv = Vec::Set1(coef);
    for (i = 0; i < D; i += W) {
      const std::int64_t n = D - i;
      const Vec xv = LoadN(xr + i, n), dyv = LoadN(dyr + i, n);
      Vec d = rv * dyv * LoadN(g + i, n) - cv * xv;
      StoreN(LoadN(dgAcc + i, n) + dyv * xv * rv, dgAcc + i, n);
      if (accumulate) d = d + LoadN(dxr + i, n);
      StoreN(d, dxr + i, n);
    }
  }
}

void RopeK(const float* x, float* out, const std::int32_t* pos, std::int64_t rows, std::int64_t H, std::int64_t Dh,
           const float* cosT, const float* sinT, float sign) {
  const std::int64_t half = Dh / 2;
  const Vec sv = Vec::Set1(sign);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* c = cosT + static_cast<std::int64_t>(pos[r]) * half;
    const float* s = sinT + static_cast<std::int64_t>(pos[r]) * half;
    for (std::int64_t h = 0; h < H; ++h) {
      const float* xr = x + (r * H + h) * Dh;
      float* orow = out + (r * H + h) * Dh;
      for (std::int64_t i = 0; i < half; i += W) {
        const std::int64_t n = half - i;
        const Vec x1 = LoadN(xr + i, n), x2 = LoadN(xr + half + i, n);
        const Vec cv = LoadN(c + i, n), snv = LoadN(s + i, n) * sv;
        StoreN(x1 * cv - x2 * snv, orow + i, n);
        StoreN(Fma(x1, snv, x2 * cv), orow + half + i, n);
      }
    }
  }
}

void SwiGluForwardK(const float* h, float* out, std::int64_t rows, std::int64_t F, SwiGluParams p) {
  const Vec alpha = Vec::Set1(p.alpha), bias = Vec::Set1(p.upBias);
  const Vec lim = Vec::Set1(p.limit), nlim = Vec::Set1(-p.limit);
  const bool clamp = p.limit > 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gate = h + r * 2 * F;
    const float* up = gate + F;
    float* o = out + r * F;
    for (std::int64_t i = 0; i < F; i += W) {
      const std::int64_t n = F - i;
      Vec g = LoadN(gate + i, n), u = LoadN(up + i, n);
      if (clamp) {
        g = Min(lim, g);
        u = Min(lim, Max(nlim, u));
      }
      StoreN(g * Sigmoid(alpha * g) * (u + bias), o + i, n);
    }
  }
}

void SwiGluBackwardK(const float* h, const float* dout, float* dh, std::int64_t rows, std::int64_t F, SwiGluParams p,
                     bool accumulate) {
  const Vec alpha = Vec::Set1(p.alpha), bias = Vec::Set1(p.upBias), one = Vec::Set1(1.0f);
  const Vec lim = Vec::Set1(p.limit), nlim = Vec::Set1(-p.limit);
  const bool clamp = p.limit > 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* gate = h + r * 2 * F;
    const float* up = gate + F;
    const float* d = dout + r * F;
    float* dg = dh + r * 2 * F;
    float* du = dg + F;
    for (std::int64_t i = 0; i < F; i += W) {
      const std::int64_t n = F - i;
      const Vec g0 = LoadN(gate + i, n), u0 = LoadN(up + i, n), dv = LoadN(d + i, n);
      Vec g = g0, u = u0, gpass = one, upass = one;
      if (clamp) {
        g = Min(lim, g0);
        u = Min(lim, Max(nlim, u0));
        gpass = Ge(lim, g0);
        upass = Ge(u0, nlim) * Ge(lim, u0);
      }
      const Vec sig = Sigmoid(alpha * g);
      const Vec ub = u + bias;
      // d/dg [g sig(a g)] = sig + a g sig (1 - sig)
      Vec dgv = dv * ub * Fma(alpha * g * sig, one - sig, sig) * gpass;
      Vec duv = dv * g * sig * upass;
      if (accumulate) {
        dgv = dgv + LoadN(dg + i, n);
        duv = duv + LoadN(du + i, n);
      }
      StoreN(dgv, dg + i, n);
      StoreN(duv, du + i, n);
    }
  }
}

void LogSoftmaxForwardK(const float* logits, const std::int32_t* targets, std::int64_t rows, std::int64_t V,
                        float scale, float* logp, float* entropy, float* lse) {
  const Vec sv = Vec::Set1(scale), floor = Vec::Set1(-1e4f);
  const float ninf = -HUGE_VALF;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * V;
    Vec m0 = Vec::Set1(ninf), m1 = Vec::Set1(ninf);
    std::int64_t i = 0;
    for (; i + 2 * W <= V; i += 2 * W) {
      m0 = Max(m0, Vec::Load(z + i) * sv);
      m1 = Max(m1, Vec::Load(z + i + W) * sv);
    }
    for (; i < V; i += W) m0 = Max(m0, LoadN(z + i, V - i, ninf) * sv);
    const float m = Max(m0, m1).MaxLane();
    const Vec mv = Vec::Set1(m);
    Vec s = Vec::Zero(), sz = Vec::Zero();
    for (i = 0; i < V; i += W) {
      const std::int64_t n = V - i;
      const Vec zs = LoadN(z + i, n, ninf) * sv - mv;  // <= 0; padded lanes give exp = 0
      const Vec e = Exp(zs);
      s = s + e;
      sz = Fma(e, Max(floor, zs), sz);
    }
    const double sum = s.Sum();
    const double l = static_cast<double>(m) + std::log(sum);
    if (lse) lse[r] = static_cast<float>(l);
    if (entropy) entropy[r] = static_cast<float>(std::log(sum) - static_cast<double>(sz.Sum()) / sum);
    if (logp) {
      const std::int32_t t = targets ? targets[r] : -1;
      logp[r] = t >= 0 ? static_cast<float>(static_cast<double>(z[t]) * scale - l) : 0.0f;
    }
  }
}

void LogSoftmaxBackwardK(const float* logits, const std::int32_t* targets, const float* lse, const float* entropy,
                         const float* dlogp, const float* dentropy, float* dlogits, std::int64_t rows, std::int64_t V,
                         float scale, bool accumulate) {
  const Vec sv = Vec::Set1(scale), floor = Vec::Set1(-1e4f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * V;
    float* dz = dlogits + r * V;
    const std::int32_t t = targets ? targets[r] : -1;
    const float gl = (dlogp && t >= 0) ? dlogp[r] : 0.0f;
    const float gh = dentropy ? dentropy[r] : 0.0f;
    const float ent = dentropy ? entropy[r] : 0.0f;
    // dz_j = -gl p_j - gh p_j (log p_j + H); the target adds gl; dlogits = scale dz.
    const Vec lv = Vec::Set1(lse[r]), hv = Vec::Set1(ent);
    const Vec cl = Vec::Set1(-gl * scale), ch = Vec::Set1(-gh * scale);
    for (std::int64_t i = 0; i < V; i += W) {
      const std::int64_t n = V - i;
      const Vec lp = LoadN(z + i, n) * sv - lv;
      const Vec p = Exp(lp);
      Vec d = p * Fma(ch, Max(floor, lp) + hv, cl);
      if (accumulate) d = d + LoadN(dz + i, n);
      StoreN(d, dz + i, n);
    }
    if (t >= 0) dz[t] += gl * scale;
  }
}

void AdamWK(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  const Vec b1 = Vec::Set1(s.beta1), b2 = Vec::Set1(s.beta2);
  const Vec c1 = Vec::Set1(1.0f - s.beta1), c2 = Vec::Set1(1.0f - s.beta2);
  const Vec eps = Vec::Set1(s.eps), keep = Vec::Set1(s.decayFactor), gs = Vec::Set1(s.gradScale);
  const Vec step = Vec::Set1(s.stepSize), ib = Vec::Set1(s.invSqrtBc2);
  for (std::int64_t i = 0; i < n; i += W) {
    const std::int64_t k = n - i;
    const Vec gv = LoadN(g + i, k) * gs;
    const Vec mv = Fma(b1, LoadN(m + i, k), c1 * gv);
    const Vec vv = Fma(b2, LoadN(v + i, k), c2 * gv * gv);
    const Vec denom = Fma(Sqrt(vv), ib, eps);
    const Vec pv = LoadN(p + i, k) * keep - step * mv / denom;
    StoreN(mv, m + i, k);
    StoreN(vv, v + i, k);
    StoreN(pv, p + i, k);
  }
}

double SumSquaresK(const float* x, std::int64_t n) {
  Vec a0 = Vec::Zero(), a1 = Vec::Zero(), a2 = Vec::Zero(), a3 = Vec::Zero();
  std::int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const Vec v0 = Vec::Load(x + i), v1 = Vec::Load(x + i + W), v2 = Vec::Load(x + i + 2 * W),
              v3 = Vec::Load(x + i + 3 * W);
    a0 = Fma(v0, v0, a0);
    a1 = Fma(v1, v1, a1);
    a2 = Fma(v2, v2, a2);
    a3 = Fma(v3, v3, a3);
  }
  for (; i < n; i += W) {
    const Vec v = LoadN(x + i, n - i);
    a0 = Fma(v, v, a0);
  }
  return static_cast<double>(((a0 + a1) + (a2 + a3)).Sum());
}

void AddRowsK(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld, float* acc) {
  std::int64_t c = 0;
  for (; c + 4 * W <= cols; c += 4 * W) {
    Vec a0 = Vec::Load(acc + c), a1 = Vec::Load(acc + c + W), a2 = Vec::Load(acc + c + 2 * W),
        a3 = Vec::Load(acc + c + 3 * W);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* s = src + r * ld + c;
      a0 = a0 + Vec::Load(s);
      a1 = a1 + Vec::Load(s + W);
      a2 = a2 + Vec::Load(s + 2 * W);
      a3 = a3 + Vec::Load(s + 3 * W);
    }
    a0.Store(acc + c);
    a1.Store(acc + c + W);
    a2.Store(acc + c + 2 * W);
    a3.Store(acc + c + 3 * W);
  }
  for (; c < cols; c += W) {
    const std::int64_t n = cols - c;
    Vec a = LoadN(acc + c, n);
    for (std::int64_t r = 0; r < rows; ++r) a = a + LoadN(src + r * ld + c, n);
    StoreN(a, acc + c, n);
  }
}

void WidenBf16K(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += W) StoreN(LoadN(src + i, n - i), dst + i, n - i);
}

void AddK(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += W) StoreN(LoadN(y + i, n - i) + LoadN(x + i, n - i), y + i, n - i);
}

}  // namespace
}  // namespace sinkflex::model
