// Body of the vectorised attention kernels, compiled once per instruction set. No include
// guard: kernels_{avx512,avx2,generic}.cc include it inside an anonymous namespace after
// defining
//   SFX_VBYTES      vector width in bytes (64, 32, 16)
//   SFX_NV          vectors per micro-kernel row (register blocking)
//   SFX_FMA(a,b,c)  a * b + c on vectors
//   SFX_MAXV(a,b)   lane-wise max, SFX_MINV(a,b) lane-wise min
// and after including <cstdint>, <cstring>, <math.h>, "kernels.h". It uses no std templates
// (their instantiations could be shared with other translation units compiled for another ISA).

typedef float vf __attribute__((vector_size(SFX_VBYTES)));
typedef float vfu __attribute__((vector_size(SFX_VBYTES), aligned(4), may_alias));
typedef std::int32_t vi __attribute__((vector_size(SFX_VBYTES)));
constexpr int W = SFX_VBYTES / 4;
constexpr int kRows = 4;  // micro-kernel rows
constexpr int kNv = SFX_NV;
constexpr float kInf = __builtin_inff();

inline vf Load(const float* p) { return *reinterpret_cast<const vfu*>(p); }
inline void Store(float* p, vf v) { *reinterpret_cast<vfu*>(p) = v; }
inline vf Splat(float s) { return vf{} + s; }
inline std::int64_t MinI(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline float MaxF(float a, float b) { return a > b ? a : b; }

inline float HSum(vf v) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

inline float HMax(vf v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = MaxF(m, v[i]);
  return m;
}

// exp(x) for every lane: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, a degree-6
// polynomial (Cephes expf, ~1 ulp), 2^n through the exponent bits. exp(x < -86) = 0 (also for
// -inf and NaN), x > 88 saturates at exp(88).
inline vf Exp(vf x) {
  const vi keep = (vi)(x >= Splat(-86.0f));
  x = SFX_MINV(x, Splat(88.0f));
  x = SFX_MAXV(x, Splat(-86.0f));
  const vf magic = Splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const vf t = SFX_FMA(x, Splat(1.44269504088896341f), magic);
  const vi n = (vi)t - (vi)magic;
  const vf nf = t - magic;
  vf r = SFX_FMA(nf, Splat(-0.693359375f), x);
  r = SFX_FMA(nf, Splat(2.12194440e-4f), r);
  vf p = Splat(1.9875691500e-4f);
  p = SFX_FMA(p, r, Splat(1.3981999507e-3f));
  p = SFX_FMA(p, r, Splat(8.3334519073e-3f));
  p = SFX_FMA(p, r, Splat(4.1665795894e-2f));
  p = SFX_FMA(p, r, Splat(1.6666665459e-1f));
  p = SFX_FMA(p, r, Splat(5.0000001201e-1f));
  const vf y = SFX_FMA(p, r * r, r) + Splat(1.0f);
  const vi bits = (vi)y + (n << 23);
  return (vf)(bits & keep);
}

// ---- GEMM ---------------------------------------------------------------------------------

// C[R x NV*W] (+)= A[R x K] B[K x NV*W], accumulators in registers.
template <int R, int NV>
inline void Micro(std::int64_t K, const float* A, std::int64_t sAm, std::int64_t sAk, const float* B,
                  std::int64_t ldb, float* C, std::int64_t ldc, bool accumulate) {
  vf c[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? Load(C + r * ldc + v * W) : vf{};
  }
  for (std::int64_t k = 0; k < K; ++k) {
    const float* bp = B + k * ldb;
    vf b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = Load(bp + v * W);
    const float* ap = A + k * sAk;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const vf a = Splat(ap[r * sAm]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) c[r][v] = SFX_FMA(a, b[v], c[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) Store(C + r * ldc + v * W, c[r][v]);
  }
}

template <int R>
inline void MicroNv(int nv, std::int64_t K, const float* A, std::int64_t sAm, std::int64_t sAk, const float* B,
                    std::int64_t ldb, float* C, std::int64_t ldc, bool acc) {
  if constexpr (kNv >= 4) {
    if (nv == 4) return Micro<R, 4>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
    if (nv == 3) return Micro<R, 3>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
  }
  if (nv == 2) return Micro<R, 2>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
  Micro<R, 1>(K, A, sAm, sAk, B, ldb, C, ldc, acc);
}

void Gemm(const GemmArgs& g) {
  constexpr std::int64_t kKc = 256;  // K blocking keeps the B panel in cache for long K
  const std::int64_t nVec = g.N / W * W;
  if (g.K == 0) {
    if (!g.accumulate) {
      for (std::int64_t m = 0; m < g.M; ++m) std::memset(g.C + m * g.ldc, 0, static_cast<std::size_t>(g.N) * 4);
    }
    return;
  }
  for (std::int64_t k0 = 0; k0 < g.K; k0 += kKc) {
    const std::int64_t kc = MinI(kKc, g.K - k0);
    const bool acc = g.accumulate || k0 > 0;
    const float* A = g.A + k0 * g.sAk;
    const float* B = g.B + k0 * g.ldb;
    for (std::int64_t n0 = 0; n0 < nVec; n0 += kNv * W) {
      const int nv = static_cast<int>(MinI(kNv, (nVec - n0) / W));
      std::int64_t m0 = 0;
      for (; m0 + kRows <= g.M; m0 += kRows) {
        MicroNv<kRows>(nv, kc, A + m0 * g.sAm, g.sAm, g.sAk, B + n0, g.ldb, g.C + m0 * g.ldc + n0, g.ldc, acc);
      }
      const float* Am = A + m0 * g.sAm;
      float* Cm = g.C + m0 * g.ldc + n0;
      switch (g.M - m0) {
        case 3: MicroNv<3>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc); break;
        case 2: MicroNv<2>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc); break;
        case 1: MicroNv<1>(nv, kc, Am, g.sAm, g.sAk, B + n0, g.ldb, Cm, g.ldc, acc); break;
        default: break;
      }
    }
    for (std::int64_t n = nVec; n < g.N; ++n) {  // columns that do not fill a vector
      for (std::int64_t m = 0; m < g.M; ++m) {
        float s = acc ? g.C[m * g.ldc + n] : 0.0f;
        for (std::int64_t k = 0; k < kc; ++k) s += A[m * g.sAm + k * g.sAk] * B[k * g.ldb + n];
        g.C[m * g.ldc + n] = s;
      }
    }
  }
}

// ---- row operations -------------------------------------------------------------------------

float RowMax(const float* x, std::int64_t n) {
  vf m = Splat(-kInf);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) m = SFX_MAXV(m, Load(x + i));
  float r = HMax(m);
  for (; i < n; ++i) r = MaxF(r, x[i]);
  return r;
}

float ExpSubSum(const float* x, float* y, std::int64_t n, float mx) {
  const vf mv = Splat(mx);
  vf s = vf{};
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const vf e = Exp(Load(x + i) - mv);
    Store(y + i, e);
    s += e;
  }
  float total = HSum(s);
  if (i < n) {
    float tmp[W];
    for (int l = 0; l < W; ++l) tmp[l] = i + l < n ? x[i + l] : -kInf;
    const vf e = Exp(Load(tmp) - mv);
    for (std::int64_t l = 0; i + l < n; ++l) {
      y[i + l] = e[l];
      total += e[l];
    }
  }
  return total;
}

void ScaleRow(float* x, std::int64_t n, float a) {
  const vf av = Splat(a);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) Store(x + i, Load(x + i) * av);
  for (; i < n; ++i) x[i] *= a;
}

float Dot(const float* x, const float* y, std::int64_t n) {
  vf s = vf{};
  std::int64_t i = 0;
  for (; i + W <= n; i += W) s = SFX_FMA(Load(x + i), Load(y + i), s);
  float r = HSum(s);
  for (; i < n; ++i) r += x[i] * y[i];
  return r;
}

void SoftmaxGrad(const float* p, const float* dp, float* ds, std::int64_t n, float d) {
  const vf dv = Splat(d);
  std::int64_t i = 0;
  for (; i + W <= n; i += W) Store(ds + i, Load(p + i) * (Load(dp + i) - dv));
  for (; i < n; ++i) ds[i] = p[i] * (dp[i] - d);
}

// ---- fused tiles ------------------------------------------------------------------------------

// Copies rows [j0, j0 + cols) of one kv head transposed into T[d * bs + c] (d < D), zero for
// c >= cols.
void LoadTransposed(const float* base, std::int64_t stride, std::int64_t D, std::int64_t cols, std::int64_t bs,
                    float* T) {
  for (std::int64_t c = 0; c < cols; ++c) {
    const float* src = base + c * stride;
    for (std::int64_t d = 0; d < D; ++d) T[d * bs + c] = src[d];
  }
  if (cols < bs) {
    for (std::int64_t d = 0; d < D; ++d) std::memset(T + d * bs + cols, 0, static_cast<std::size_t>(bs - cols) * 4);
  }
}

// Copies `rows` rows of D floats (times `scale`) into R[r * dPad + d], zero for d >= D.
void LoadRows(const float* base, std::int64_t stride, std::int64_t D, std::int64_t rows, std::int64_t dPad,
              float scale, float* R) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = base + r * stride;
    float* dst = R + r * dPad;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = src[d] * scale;
    for (std::int64_t d = D; d < dPad; ++d) dst[d] = 0.0f;
  }
}

// Writes `rows` rows of D floats (times `scale`) from R back to strided memory.
void StoreRows(const float* R, std::int64_t dPad, std::int64_t D, std::int64_t rows, float scale, float* base,
               std::int64_t stride) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = R + r * dPad;
    float* dst = base + r * stride;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = src[d] * scale;
  }
}

// S = Qs Kt, softcap (T = 1 - tanh^2 when capped), mask (partial tiles and padding) to -inf.
void Scores(const FusedCtx& c, std::int64_t b, BlockState state, std::int64_t i0, std::int64_t rows,
            std::int64_t j0, std::int64_t cols, const float* Qs, const float* Kt, float* S, float* T,
            std::uint8_t* rm) {
  const std::int64_t bs = c.bs;
  Gemm(GemmArgs{rows, bs, c.shape.headDim, Qs, c.dPad, 1, Kt, bs, S, bs, false});
  if (c.softcap > 0.0f) {
    const float cap = c.softcap, inv = 1.0f / c.softcap;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t x = 0; x < cols; ++x) {
        const float t = tanhf(S[r * bs + x] * inv);
        S[r * bs + x] = cap * t;
        if (T) T[r * bs + x] = 1.0f - t * t;
      }
    }
  }
  if (state == kBlockPartial) {
    for (std::int64_t r = 0; r < rows; ++r) {
      c.mask->EvalRow(b, c.shape.qOffset + i0 + r, j0, cols, rm);
      for (std::int64_t x = 0; x < cols; ++x) {
        if (!rm[x]) S[r * bs + x] = -kInf;
      }
    }
  }
  if (cols < bs) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t x = cols; x < bs; ++x) S[r * bs + x] = -kInf;
    }
  }
}

void FusedForwardTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads, Hkv = s.kvHeads;
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t h = t % Hq, rest = t / Hq, b = rest % s.batch, qb = rest / s.batch;
  const std::int64_t kvh = h / s.group(), entry = c.blocks->Entry(b);
  const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
  float* Qs = scr;
  float* Kt = Qs + bs * Dp;
  float* Vr = Kt + bs * Dp;
  float* acc = Vr + bs * Dp;
  float* S = acc + bs * Dp;
  float* m = S + bs * bs;
  float* l = m + bs;
  auto* rm = reinterpret_cast<std::uint8_t*>(l + bs);

  LoadRows(c.q + ((b * s.qLen + i0) * Hq + h) * D, Hq * D, D, rows, Dp, c.scale, Qs);
  const float sink = c.sinks ? c.sinks[h] : -kInf;
  const bool hasSink = sink > -kInf;
  for (std::int64_t r = 0; r < rows; ++r) {
    m[r] = hasSink ? sink : -kInf;  // the sink seeds the online softmax: m = s_h, l = exp(s_h - m) = 1
    l[r] = hasSink ? 1.0f : 0.0f;
  }
  std::memset(acc, 0, static_cast<std::size_t>(rows * Dp) * 4);

  const float* kBase = c.k + (b * s.kvLen * Hkv + kvh) * D;
  const float* vBase = c.v + (b * s.kvLen * Hkv + kvh) * D;
  std::int64_t nkb = 0;
  const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
  for (std::int64_t x = 0; x < nkb; ++x) {
    const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
    LoadTransposed(kBase + j0 * Hkv * D, Hkv * D, D, cols, bs, Kt);
    LoadRows(vBase + j0 * Hkv * D, Hkv * D, D, cols, Dp, 1.0f, Vr);
    Scores(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, Qs, Kt, S, nullptr, rm);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* sr = S + r * bs;
      const float mNew = MaxF(m[r], RowMax(sr, bs));
      if (mNew == -kInf) {  // nothing visible yet and no sink
        std::memset(sr, 0, static_cast<std::size_t>(bs) * 4);
        continue;
      }
      const float sum = ExpSubSum(sr, sr, bs, mNew);
      if (mNew != m[r]) {
        const float alpha = m[r] == -kInf ? 0.0f : expf(m[r] - mNew);
        l[r] *= alpha;
        ScaleRow(acc + r * Dp, Dp, alpha);
        m[r] = mNew;
      }
      l[r] += sum;
    }
    Gemm(GemmArgs{rows, Dp, cols, S, bs, 1, Vr, Dp, acc, Dp, true});
  }

  float* outBase = c.out + ((b * s.qLen + i0) * Hq + h) * D;
  float* lseBase = c.lse + (b * Hq + h) * s.qLen + i0;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* dst = outBase + r * Hq * D;
    if (l[r] > 0.0f) {
      const float inv = 1.0f / l[r];
      for (std::int64_t d = 0; d < D; ++d) dst[d] = acc[r * Dp + d] * inv;
      lseBase[r] = m[r] + logf(l[r]);
    } else {
      std::memset(dst, 0, static_cast<std::size_t>(D) * 4);
      lseBase[r] = -kInf;
    }
  }
}

// Backward scratch, carved in a fixed order (see FusedBackwardScratch).
struct BwdScratch {
  float *Kt, *Vt, *Kr, *Qs, *dO, *accA, *accB, *S, *dP, *T, *L, *Dl;
  std::uint8_t* rm;
  BwdScratch(float* p, std::int64_t bs, std::int64_t Dp) {
    Kt = p;
    Vt = Kt + bs * Dp;
    Kr = Vt + bs * Dp;
    Qs = Kr + bs * Dp;
    dO = Qs + bs * Dp;
    accA = dO + bs * Dp;
    accB = accA + bs * Dp;
    S = accB + bs * Dp;
    dP = S + bs * bs;
    T = dP + bs * bs;
    L = T + bs * bs;
    Dl = L + bs;
    rm = reinterpret_cast<std::uint8_t*>(Dl + bs);
  }
};

// Loads the query-side rows of (b, h, query block) into Qs (scaled), dO, L and D.
void LoadQuerySide(const FusedCtx& c, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows,
                   const BwdScratch& w) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Hq = s.qHeads;
  const std::int64_t off = ((b * s.qLen + i0) * Hq + h) * D;
  LoadRows(c.q + off, Hq * D, D, rows, c.dPad, c.scale, w.Qs);
  LoadRows(c.dOut + off, Hq * D, D, rows, c.dPad, 1.0f, w.dO);
  const std::int64_t lo = (b * Hq + h) * s.qLen + i0;
  for (std::int64_t r = 0; r < rows; ++r) {
    w.L[r] = c.lseIn[lo + r];
    w.Dl[r] = c.delta[lo + r];
  }
}

// One tile of the backward: S -> P = exp(S - L) (in w.S), dP = dO V^T -> dS (in w.dP).
void TileGrads(const FusedCtx& c, std::int64_t b, BlockState state, std::int64_t i0, std::int64_t rows,
               std::int64_t j0, std::int64_t cols, const BwdScratch& w) {
  const std::int64_t bs = c.bs;
  const bool capped = c.softcap > 0.0f;
  Scores(c, b, state, i0, rows, j0, cols, w.Qs, w.Kt, w.S, capped ? w.T : nullptr, w.rm);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* sr = w.S + r * bs;
    if (w.L[r] == -kInf) {
      std::memset(sr, 0, static_cast<std::size_t>(bs) * 4);
    } else {
      ExpSubSum(sr, sr, bs, w.L[r]);
    }
  }
  Gemm(GemmArgs{rows, bs, c.shape.headDim, w.dO, c.dPad, 1, w.Vt, bs, w.dP, bs, false});
  for (std::int64_t r = 0; r < rows; ++r) {
    float* dr = w.dP + r * bs;
    SoftmaxGrad(w.S + r * bs, dr, dr, bs, w.Dl[r]);
    if (capped) {
      const float* tr = w.T + r * bs;
      for (std::int64_t x = 0; x < cols; ++x) dr[x] *= tr[x];
    }
  }
}

void FusedBackwardKvTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hkv = s.kvHeads, G = s.group();
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t kvh = t % Hkv, rest = t / Hkv, b = rest % s.batch, kb = rest / s.batch;
  const std::int64_t entry = c.blocks->Entry(b);
  const std::int64_t j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
  const BwdScratch w(scr, bs, Dp);
  const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
  LoadTransposed(c.k + kvOff, Hkv * D, D, cols, bs, w.Kt);
  LoadTransposed(c.v + kvOff, Hkv * D, D, cols, bs, w.Vt);
  std::memset(w.accA, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dK
  std::memset(w.accB, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dV
  std::int64_t nqb = 0;
  const std::int32_t* list = c.blocks->QList(entry, kb, &nqb);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t h = kvh * G + g;
    for (std::int64_t x = 0; x < nqb; ++x) {
      const std::int64_t qb = list[x], i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
      LoadQuerySide(c, b, h, i0, rows, w);
      TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, w);
      Gemm(GemmArgs{cols, Dp, rows, w.S, 1, bs, w.dO, Dp, w.accB, Dp, true});   // dV += P^T dO
      Gemm(GemmArgs{cols, Dp, rows, w.dP, 1, bs, w.Qs, Dp, w.accA, Dp, true});  // dK += dS^T (c Q)
    }
  }
  StoreRows(w.accA, Dp, D, cols, 1.0f, c.dk + kvOff, Hkv * D);
  StoreRows(w.accB, Dp, D, cols, 1.0f, c.dv + kvOff, Hkv * D);
}

void FusedBackwardQTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads, Hkv = s.kvHeads;
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t h = t % Hq, rest = t / Hq, b = rest % s.batch, qb = rest / s.batch;
  const std::int64_t kvh = h / s.group(), entry = c.blocks->Entry(b);
  const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
  const BwdScratch w(scr, bs, Dp);
  LoadQuerySide(c, b, h, i0, rows, w);
  std::memset(w.accA, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dQ
  std::int64_t nkb = 0;
  const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
  for (std::int64_t x = 0; x < nkb; ++x) {
    const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
    const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
    LoadTransposed(c.k + kvOff, Hkv * D, D, cols, bs, w.Kt);
    LoadTransposed(c.v + kvOff, Hkv * D, D, cols, bs, w.Vt);
    LoadRows(c.k + kvOff, Hkv * D, D, cols, Dp, 1.0f, w.Kr);
    TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, w);
    Gemm(GemmArgs{rows, Dp, cols, w.dP, bs, 1, w.Kr, Dp, w.accA, Dp, true});  // dQ += dS K
  }
  StoreRows(w.accA, Dp, D, rows, c.scale, c.dq + ((b * s.qLen + i0) * Hq + h) * D, Hq * D);
}

const KernelTable kTable = {
    SFX_ISA_NAME, FusedForwardTask, FusedBackwardKvTask, FusedBackwardQTask, Gemm, RowMax, ExpSubSum,
    ScaleRow,     Dot,              SoftmaxGrad,
};
