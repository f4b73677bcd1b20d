// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Fused attention tiles, compiled once per instruction set after kernels_impl.h (same
// translation units, same macros). A tile is bs keys x bs query rows, kept key-major: the
// score of key x and query row r is St[x * bs + r], so the tile products read the keys and
// values in place (rows of [batch, kvLen, kvHeads, D], leading dimension kvHeads * D) and the
// softmax runs down the tile's columns, one vector of query rows at a time. Query-side rows
// are copied (and transposed) into per-thread scratch; nothing of the size of K or V is copied.

// Copies `rows` rows of D floats (times `scale`) into R[r * dPad + d], zero for d >= D.
void LoadRows(const float* base, std::int64_t stride, std::int64_t D, std::int64_t rows, std::int64_t dPad, float scale,
              float* R) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = base + r * stride;
    float* dst = R + r * dPad;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = src[d] * scale;
    for (std::int64_t d = D; d < dPad; ++d) dst[d] = 0.0f;
  }
}

// Transposes `rows` rows of D floats (times `scale`) into C[d * bs + r], zero for r >= rows.
void LoadColumns(const float* base, std::int64_t stride, std::int64_t D, std::int64_t rows, std::int64_t bs,
                 float scale, float* C) {
  for (std::int64_t d = 0; d < D; ++d) {
    float* dst = C + d * bs;
    for (std::int64_t r = 0; r < rows; ++r) dst[r] = base[r * stride + d] * scale;
    for (std::int64_t r = rows; r < bs; ++r) dst[r] = 0.0f;
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

// Writes the transposed C[d * bs + r] (times `scale`) back as `rows` rows of D floats.
void StoreColumns(const float* C, std::int64_t bs, std::int64_t D, std::int64_t rows, float scale, float* base,
                  std::int64_t stride) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* dst = base + r * stride;
    for (std::int64_t d = 0; d < D; ++d) dst[d] = C[d * bs + r] * scale;
  }
}

// Row j0 of (b, kvh) in a [batch, kvLen, kvHeads, D] tensor; rows are kvHeads * D apart.
inline const float* KvRow(const FusedCtx& c, const float* x, std::int64_t b, std::int64_t kvh, std::int64_t j0) {
  return x + ((b * c.shape.kvLen + j0) * c.shape.kvHeads + kvh) * c.shape.headDim;
}

// St = K (Qs)^T for keys j0 .. j0 + cols (Qt: the block's query rows times the scale,
// transposed); softcap (Tt = 1 - tanh^2 when Tt is given); -inf where the mask hides a key
// (partial tiles only). Rows of St past `cols` are not written.
void Scores(const FusedCtx& c, std::int64_t b, BlockState state, std::int64_t i0, std::int64_t rows, std::int64_t j0,
            std::int64_t cols, const float* K, const float* Qt, float* St, float* Tt, std::uint8_t* rm) {
  const std::int64_t bs = c.bs, ld = c.shape.kvHeads * c.shape.headDim;
  Gemm(GemmArgs{cols, bs, c.shape.headDim, K, ld, 1, Qt, bs, St, bs, false});
  if (c.softcap > 0.0f) {
    const float cap = c.softcap, inv = 1.0f / c.softcap;
    for (std::int64_t x = 0; x < cols; ++x) {
      for (std::int64_t r = 0; r < bs; ++r) {
        const float t = tanhf(St[x * bs + r] * inv);
        St[x * bs + r] = cap * t;
        if (Tt) Tt[x * bs + r] = 1.0f - t * t;
      }
    }
  }
  if (state == kBlockPartial) {
    for (std::int64_t x = 0; x < cols; ++x) {
      c.mask->EvalColumn(b, j0 + x, c.shape.qOffset + i0, rows, rm);
      float* sx = St + x * bs;
      for (std::int64_t r = 0; r < rows; ++r) sx[r] = rm[r] ? sx[r] : -kInf;
    }
  }
}

void FusedForwardTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads;
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t h = t % Hq, rest = t / Hq, b = rest % s.batch, qb = rest / s.batch;
  const std::int64_t kvh = h / s.group(), entry = c.blocks->Entry(b);
  const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
  float* Qt = scr;             // [D][bs] query rows times the scale, transposed
  float* accT = Qt + Dp * bs;  // [D][bs] output accumulator, transposed
  float* St = accT + Dp * bs;  // [bs][bs]
  float* m = St + bs * bs;
  float* l = m + bs;
  float* alpha = l + bs;
  auto* rm = reinterpret_cast<std::uint8_t*>(alpha + bs);

  LoadColumns(c.q + ((b * s.qLen + i0) * Hq + h) * D, Hq * D, D, rows, bs, c.scale, Qt);
  const float sink = c.sinks ? c.sinks[h] : -kInf;
  const bool hasSink = sink > -kInf;
  for (std::int64_t r = 0; r < bs; ++r) {
    m[r] = hasSink ? sink : -kInf;  // the sink seeds the online softmax: m = s_h, l = exp(s_h - m) = 1
    l[r] = hasSink ? 1.0f : 0.0f;
  }
  std::memset(accT, 0, static_cast<std::size_t>(D * bs) * 4);

  std::int64_t nkb = 0;
  const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
  for (std::int64_t x = 0; x < nkb; ++x) {
    const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
    Scores(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, KvRow(c, c.k, b, kvh, j0), Qt, St, nullptr, rm);
    // Online softmax down the columns, W query rows at a time. While a row has seen nothing
    // (m = -inf, no sink) exp(-inf - -inf) = exp(NaN) = 0 keeps its p, l and acc at zero.
    for (std::int64_t r0 = 0; r0 < bs; r0 += W) {
      const vf mOld = Load(m + r0);
      vf mNew = mOld;
      for (std::int64_t j = 0; j < cols; ++j) mNew = SFX_MAXV(mNew, Load(St + j * bs + r0));
      vf sum = vf{};
      for (std::int64_t j = 0; j < cols; ++j) {
        const vf p = Exp(Load(St + j * bs + r0) - mNew);
        Store(St + j * bs + r0, p);
        sum += p;
      }
      const vf a = Exp(mOld - mNew);  // 1 when the max did not move, 0 from -inf
      Store(alpha + r0, a);
      Store(l + r0, Load(l + r0) * a + sum);
      Store(m + r0, mNew);
    }
    for (std::int64_t d = 0; d < D; ++d) {
      float* row = accT + d * bs;
      for (std::int64_t r0 = 0; r0 < bs; r0 += W) Store(row + r0, Load(row + r0) * Load(alpha + r0));
    }
    // acc^T += V^T P^T
    Gemm(GemmArgs{D, bs, cols, KvRow(c, c.v, b, kvh, j0), 1, s.kvHeads * D, St, bs, accT, bs, true});
  }

  float* outBase = c.out + ((b * s.qLen + i0) * Hq + h) * D;
  float* lseBase = c.lse + (b * Hq + h) * s.qLen + i0;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* dst = outBase + r * Hq * D;
    if (l[r] > 0.0f) {
      const float inv = 1.0f / l[r];
      for (std::int64_t d = 0; d < D; ++d) dst[d] = accT[d * bs + r] * inv;
      lseBase[r] = m[r] + logf(l[r]);
    } else {
      std::memset(dst, 0, static_cast<std::size_t>(D) * 4);
      lseBase[r] = -kInf;
    }
  }
}

// Backward scratch, carved in a fixed order (see FusedBackwardScratch).
struct BwdScratch {
  float *Qs, *dO;        // [bs][dPad] query rows times the scale, dO rows
  float *Qt, *dOt;       // [dPad][bs] the same, transposed (zero past the block's rows)
  float *accA, *accB;    // [bs][dPad] each: dK and dV, or dQ transposed ([D][bs])
  float *St, *dPt, *Tt;  // [bs][bs] key-major: P, dS (dP before), tanh'
  float *L, *Dl;         // [bs] lse (+inf where it is -inf, past the rows too) and D
  std::uint8_t* rm;
  BwdScratch(float* p, std::int64_t bs, std::int64_t Dp) {
    Qs = p;
    dO = Qs + bs * Dp;
    Qt = dO + bs * Dp;
    dOt = Qt + Dp * bs;
    accA = dOt + Dp * bs;
    accB = accA + bs * Dp;
    St = accB + bs * Dp;
    dPt = St + bs * bs;
    Tt = dPt + bs * bs;
    L = Tt + bs * bs;
    Dl = L + bs;
    rm = reinterpret_cast<std::uint8_t*>(Dl + bs);
  }
};

// Loads the query-side rows of (b, h, query block) into Qs and Qt (times the scale), dO, dOt,
// L and D. A row with lse = -inf (no visible key, no sink) gets L = +inf so that its P is
// exp(S - inf) = 0; so do the rows past the block.
void LoadQuerySide(const FusedCtx& c, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t rows,
                   const BwdScratch& w) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Hq = s.qHeads;
  const std::int64_t off = ((b * s.qLen + i0) * Hq + h) * D;
  LoadRows(c.q + off, Hq * D, D, rows, c.dPad, c.scale, w.Qs);
  LoadRows(c.dOut + off, Hq * D, D, rows, c.dPad, 1.0f, w.dO);
  LoadColumns(w.Qs, c.dPad, D, rows, c.bs, 1.0f, w.Qt);
  LoadColumns(w.dO, c.dPad, D, rows, c.bs, 1.0f, w.dOt);
  const std::int64_t lo = (b * Hq + h) * s.qLen + i0;
  for (std::int64_t r = 0; r < c.bs; ++r) {
    const float L = r < rows ? c.lseIn[lo + r] : -kInf;
    w.L[r] = L == -kInf ? kInf : L;
    w.Dl[r] = r < rows ? c.delta[lo + r] : 0.0f;
  }
}

// One tile of the backward, key-major: P = exp(S - L) into w.St, dS = P (dO V^T - D) (times
// tanh') into w.dPt; K and V are the tile's first key rows in place.
void TileGrads(const FusedCtx& c, std::int64_t b, BlockState state, std::int64_t i0, std::int64_t rows, std::int64_t j0,
               std::int64_t cols, const float* K, const float* V, const BwdScratch& w) {
  const std::int64_t bs = c.bs, ld = c.shape.kvHeads * c.shape.headDim;
  const bool capped = c.softcap > 0.0f;
  Scores(c, b, state, i0, rows, j0, cols, K, w.Qt, w.St, capped ? w.Tt : nullptr, w.rm);
  Gemm(GemmArgs{cols, bs, c.shape.headDim, V, ld, 1, w.dOt, bs, w.dPt, bs, false});  // dP^T = V dO^T
  for (std::int64_t x = 0; x < cols; ++x) {
    float* sx = w.St + x * bs;
    float* dx = w.dPt + x * bs;
    const float* tx = w.Tt + x * bs;
    for (std::int64_t r0 = 0; r0 < bs; r0 += W) {
      const vf p = Exp(Load(sx + r0) - Load(w.L + r0));
      Store(sx + r0, p);
      vf ds = p * (Load(dx + r0) - Load(w.Dl + r0));
      if (capped) ds = ds * Load(tx + r0);
      Store(dx + r0, ds);
    }
  }
}

// dk/dv of one (key block, batch, kv head): every query head of the group, every query block.
void FusedBackwardKvTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hkv = s.kvHeads, G = s.group();
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t kvh = t % Hkv, rest = t / Hkv, b = rest % s.batch, kb = rest / s.batch;
  const std::int64_t entry = c.blocks->Entry(b);
  const std::int64_t j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
  const BwdScratch w(scr, bs, Dp);
  const float* K = KvRow(c, c.k, b, kvh, j0);
  const float* V = KvRow(c, c.v, b, kvh, j0);
  std::memset(w.accA, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dK
  std::memset(w.accB, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dV
  std::int64_t nqb = 0;
  const std::int32_t* list = c.blocks->QList(entry, kb, &nqb);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t h = kvh * G + g;
    for (std::int64_t x = 0; x < nqb; ++x) {
      const std::int64_t qb = list[x], i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
      LoadQuerySide(c, b, h, i0, rows, w);
      TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, K, V, w);
      Gemm(GemmArgs{cols, Dp, rows, w.St, bs, 1, w.dO, Dp, w.accB, Dp, true});   // dV += P^T dO
      Gemm(GemmArgs{cols, Dp, rows, w.dPt, bs, 1, w.Qs, Dp, w.accA, Dp, true});  // dK += dS^T (c Q)
    }
  }
  const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
  StoreRows(w.accA, Dp, D, cols, 1.0f, c.dk + kvOff, Hkv * D);
  StoreRows(w.accB, Dp, D, cols, 1.0f, c.dv + kvOff, Hkv * D);
}

// dq of one (query block, batch, head).
void FusedBackwardQTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads, ld = s.kvHeads * D;
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t h = t % Hq, rest = t / Hq, b = rest % s.batch, qb = rest / s.batch;
  const std::int64_t kvh = h / s.group(), entry = c.blocks->Entry(b);
  const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
  const BwdScratch w(scr, bs, Dp);
  LoadQuerySide(c, b, h, i0, rows, w);
  std::memset(w.accA, 0, static_cast<std::size_t>(D * bs) * 4);  // dQ^T
  std::int64_t nkb = 0;
  const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
  for (std::int64_t x = 0; x < nkb; ++x) {
    const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
    const float* K = KvRow(c, c.k, b, kvh, j0);
    TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, K, KvRow(c, c.v, b, kvh, j0), w);
    Gemm(GemmArgs{D, bs, cols, K, 1, ld, w.dPt, bs, w.accA, bs, true});  // dQ^T += K^T dS^T
  }
  StoreColumns(w.accA, bs, D, rows, c.scale, c.dq + ((b * s.qLen + i0) * Hq + h) * D, Hq * D);
}

// dq, dk and dv in one pass for the query heads g = slot, slot + slots, ... of one (batch, kv
// head) group: for each such head and query block, walk its key blocks, accumulating dq in
// scratch and dk/dv straight into memory that only this task writes — the outputs for slot 0
// (zeroed by the driver), a kv-sized partial buffer for the other slots (the driver adds them
// in slot order afterwards).
void FusedBackwardGroupTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads, Hkv = s.kvHeads, G = s.group();
  const std::int64_t ld = Hkv * D;
  const std::int64_t slot = task % c.slots, rest = task / c.slots, kvh = rest % Hkv, b = rest / Hkv;
  const std::int64_t entry = c.blocks->Entry(b);
  float* dk = slot == 0 ? c.dk : c.dkPart + (slot - 1) * s.kvElems();
  float* dv = slot == 0 ? c.dv : c.dvPart + (slot - 1) * s.kvElems();
  const BwdScratch w(scr, bs, Dp);
  for (std::int64_t g = slot; g < G; g += c.slots) {
    const std::int64_t h = kvh * G + g;
    for (std::int64_t qb = 0; qb < c.blocks->qBlocks(); ++qb) {
      const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
      LoadQuerySide(c, b, h, i0, rows, w);
      std::memset(w.accA, 0, static_cast<std::size_t>(D * bs) * 4);  // dQ^T
      std::int64_t nkb = 0;
      const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
      for (std::int64_t x = 0; x < nkb; ++x) {
        const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
        const float* K = KvRow(c, c.k, b, kvh, j0);
        TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, K, KvRow(c, c.v, b, kvh, j0), w);
        const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
        Gemm(GemmArgs{cols, D, rows, w.St, bs, 1, w.dO, Dp, dv + kvOff, ld, true});   // dV += P^T dO
        Gemm(GemmArgs{cols, D, rows, w.dPt, bs, 1, w.Qs, Dp, dk + kvOff, ld, true});  // dK += dS^T (c Q)
        Gemm(GemmArgs{D, bs, cols, K, 1, ld, w.dPt, bs, w.accA, bs, true});           // dQ^T += K^T dS^T
      }
      StoreColumns(w.accA, bs, D, rows, c.scale, c.dq + ((b * s.qLen + i0) * Hq + h) * D, Hq * D);
    }
  }
}

const KernelTable kTable = {
    SFX_ISA_NAME, FusedForwardTask, FusedBackwardKvTask, FusedBackwardQTask, FusedBackwardGroupTask,
    Gemm,         RowMax,           ExpSubSum,           ScaleRow,           Dot,
    SoftmaxGrad,
};
