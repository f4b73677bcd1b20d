// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Fused attention tiles, compiled once per instruction set after kernels_impl.h (same
// translation units, same macros). A tile is bs query rows x bs key rows. Keys and values come
// pre-packed per (batch, kv head, key block) by the driver (fused_cpu.cc); query-side rows are
// copied into per-thread scratch.

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

// Packed tile of (b, kvh, kb): transposed [D][bs] or rows [bs][dPad].
inline std::int64_t TileIndex(const FusedCtx& c, std::int64_t b, std::int64_t kvh, std::int64_t kb) {
  return (b * c.shape.kvHeads + kvh) * c.blocks->kvBlocks() + kb;
}
inline const float* TileT(const FusedCtx& c, const float* pack, std::int64_t tile) {
  return pack + tile * c.shape.headDim * c.bs;
}
inline const float* TileR(const FusedCtx& c, const float* pack, std::int64_t tile) {
  return pack + tile * c.bs * c.dPad;
}

// S = Qs Kt; softcap (T = 1 - tanh^2 when T is given); -inf where the mask hides a key (partial
// tiles only) and past the end of the keys.
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
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads;
  const std::int64_t t = c.order ? c.order[task] : task;
  const std::int64_t h = t % Hq, rest = t / Hq, b = rest % s.batch, qb = rest / s.batch;
  const std::int64_t kvh = h / s.group(), entry = c.blocks->Entry(b);
  const std::int64_t i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
  float* Qs = scr;
  float* acc = Qs + bs * Dp;
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

  std::int64_t nkb = 0;
  const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
  for (std::int64_t x = 0; x < nkb; ++x) {
    const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
    const std::int64_t tile = TileIndex(c, b, kvh, kb);
    Scores(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, Qs, TileT(c, c.kT, tile), S, nullptr, rm);
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
    Gemm(GemmArgs{rows, Dp, cols, S, bs, 1, TileR(c, c.vRows, tile), Dp, acc, Dp, true});
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
  float *Qs, *dO, *accA, *accB, *S, *dP, *T, *L, *Dl;
  std::uint8_t* rm;
  BwdScratch(float* p, std::int64_t bs, std::int64_t Dp) {
    Qs = p;
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

// Loads the query-side rows of (b, h, query block) into Qs (times the scale), dO, L and D.
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

// One tile of the backward: P = exp(S - L) into w.S, dS = P (dO V^T - D) (times tanh') into w.dP.
void TileGrads(const FusedCtx& c, std::int64_t b, BlockState state, std::int64_t i0, std::int64_t rows,
               std::int64_t j0, std::int64_t cols, const float* Kt, const float* Vt, const BwdScratch& w) {
  const std::int64_t bs = c.bs;
  const bool capped = c.softcap > 0.0f;
  Scores(c, b, state, i0, rows, j0, cols, w.Qs, Kt, w.S, capped ? w.T : nullptr, w.rm);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* sr = w.S + r * bs;
    if (w.L[r] == -kInf) {
      std::memset(sr, 0, static_cast<std::size_t>(bs) * 4);
    } else {
      ExpSubSum(sr, sr, bs, w.L[r]);
    }
  }
  Gemm(GemmArgs{rows, bs, c.shape.headDim, w.dO, c.dPad, 1, Vt, bs, w.dP, bs, false});
  for (std::int64_t r = 0; r < rows; ++r) {
    float* dr = w.dP + r * bs;
    SoftmaxGrad(w.S + r * bs, dr, dr, bs, w.Dl[r]);
    if (capped) {
      const float* tr = w.T + r * bs;
      for (std::int64_t x = 0; x < cols; ++x) dr[x] *= tr[x];
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
  const std::int64_t tile = TileIndex(c, b, kvh, kb);
  const float* Kt = TileT(c, c.kT, tile);
  const float* Vt = TileT(c, c.vT, tile);
  std::memset(w.accA, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dK
  std::memset(w.accB, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dV
  std::int64_t nqb = 0;
  const std::int32_t* list = c.blocks->QList(entry, kb, &nqb);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t h = kvh * G + g;
    for (std::int64_t x = 0; x < nqb; ++x) {
      const std::int64_t qb = list[x], i0 = qb * bs, rows = MinI(bs, s.qLen - i0);
      LoadQuerySide(c, b, h, i0, rows, w);
      TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, Kt, Vt, w);
      Gemm(GemmArgs{cols, Dp, rows, w.S, 1, bs, w.dO, Dp, w.accB, Dp, true});   // dV += P^T dO
      Gemm(GemmArgs{cols, Dp, rows, w.dP, 1, bs, w.Qs, Dp, w.accA, Dp, true});  // dK += dS^T (c Q)
    }
  }
  const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
  StoreRows(w.accA, Dp, D, cols, 1.0f, c.dk + kvOff, Hkv * D);
  StoreRows(w.accB, Dp, D, cols, 1.0f, c.dv + kvOff, Hkv * D);
}

// dq of one (query block, batch, head).
void FusedBackwardQTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads;
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
    const std::int64_t tile = TileIndex(c, b, kvh, kb);
    TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, TileT(c, c.kT, tile), TileT(c, c.vT, tile), w);
    Gemm(GemmArgs{rows, Dp, cols, w.dP, bs, 1, TileR(c, c.kRows, tile), Dp, w.accA, Dp, true});  // dQ += dS K
  }
  StoreRows(w.accA, Dp, D, rows, c.scale, c.dq + ((b * s.qLen + i0) * Hq + h) * D, Hq * D);
}

// dq, dk and dv in one pass for the query heads g = slot, slot + slots, ... of one (batch, kv
// head) group: for each such head and query block, walk its key blocks, accumulating dq in
// scratch and dk/dv straight into memory that only this task writes — the outputs for slot 0
// (zeroed by the driver), a kv-sized partial buffer for the other slots (the driver adds them
// in slot order afterwards).
void FusedBackwardGroupTask(const FusedCtx& c, std::int64_t task, float* scr) {
  const Shape& s = c.shape;
  const std::int64_t D = s.headDim, Dp = c.dPad, bs = c.bs, Hq = s.qHeads, Hkv = s.kvHeads, G = s.group();
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
      std::memset(w.accA, 0, static_cast<std::size_t>(bs * Dp) * 4);  // dQ
      std::int64_t nkb = 0;
      const std::int32_t* list = c.blocks->KvList(entry, qb, &nkb);
      for (std::int64_t x = 0; x < nkb; ++x) {
        const std::int64_t kb = list[x], j0 = kb * bs, cols = MinI(bs, s.kvLen - j0);
        const std::int64_t tile = TileIndex(c, b, kvh, kb);
        TileGrads(c, b, c.blocks->State(entry, qb, kb), i0, rows, j0, cols, TileT(c, c.kT, tile),
                  TileT(c, c.vT, tile), w);
        const std::int64_t kvOff = ((b * s.kvLen + j0) * Hkv + kvh) * D;
        Gemm(GemmArgs{cols, D, rows, w.S, 1, bs, w.dO, Dp, dv + kvOff, Hkv * D, true});   // dV += P^T dO
        Gemm(GemmArgs{cols, D, rows, w.dP, 1, bs, w.Qs, Dp, dk + kvOff, Hkv * D, true});  // dK += dS^T (c Q)
        Gemm(GemmArgs{rows, Dp, cols, w.dP, bs, 1, TileR(c, c.kRows, tile), Dp, w.accA, Dp, true});  // dQ += dS K
      }
      StoreRows(w.accA, Dp, D, rows, c.scale, c.dq + ((b * s.qLen + i0) * Hq + h) * D, Hq * D);
    }
  }
}

const KernelTable kTable = {
    SFX_ISA_NAME,           FusedForwardTask, FusedBackwardKvTask, FusedBackwardQTask, FusedBackwardGroupTask, Gemm,
    RowMax,                 ExpSubSum,        ScaleRow,            Dot,                SoftmaxGrad,
};
