// Reference: docs/design.md, "Sink attention — semantics"; FlashAttention-2 (Dao, 2023), the
//   forward's warp layout and register reuse of P; the PTX ISA's mma.m16n8k16 fragments.
// Tests: test/attention/cuda-tensor-cores.test.ts (on a GPU, or on the CUDA emulator without one).
// Fused sink-attention forward on the tensor cores: bf16 (or fp16: the template parameter Op) q,
// k, v; fp32 scores, softmax statistics and accumulators; mma.m16n8k16 of that type for S = Q Kᵀ
// and O += P V.
//
// One block of 4 warps per (64 query rows, batch, query head); warp w owns rows 16w..16w+15.
// The block loads its query tile (16-bit, headDim padded with zeros to DB = 64 or 128) once, each
// warp keeping its Q fragments in registers, and walks the non-empty 64-key tiles of its row tile
// through shared memory (K and V row-major; ldmatrix gives K as the B operand of Q Kᵀ and, with
// .trans, V as the B operand of P V). Each warp computes its 16 x 64 scores
// in mma C fragments, scales them (c q.k in fp32; softcap in fp32), masks partial tiles per
// element, updates the online softmax seeded by the sink (m = s_h, l = 1; row max and sum over the
// 4 lanes of a row), rounds P to bf16 / fp16 in registers (the C fragments of two neighbouring 8-key
// tiles are the A fragment of one 16-key step) and adds P V. Output in the inputs' type, lse fp32; rows with no
// visible key and no sink give 0 / -inf.
#include <cmath>

#include "cuda_tc.cuh"

namespace sinkflex::attention::cuda {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kBM = 64, kBN = 64;

template <int DB>
struct TcFwdCfg {
  static constexpr int QP = DB + 8;  // row stride of the Q, K and V tiles (16-bit): 16-byte rows, no bank conflicts
  static constexpr std::size_t kSmem = (std::size_t(kBM) + 2 * std::size_t(kBN)) * QP * 2;
};

template <Operand Op, int DB>
__global__ void __launch_bounds__(kThreads)
    TcForwardKernel(AttnParams p, const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                    const std::uint16_t* __restrict__ v, const float* __restrict__ sinks,
                    std::uint16_t* __restrict__ out, float* __restrict__ lse) {
  using C = TcFwdCfg<DB>;
  constexpr int QP = C::QP, NT = kBN / 8, ON = DB / 8, KD = DB / 16;
  SFX_DYNAMIC_SHARED(TcChunk, raw);
  std::uint16_t* Qs = reinterpret_cast<std::uint16_t*>(raw);
  std::uint16_t* Ks = Qs + kBM * QP;
  std::uint16_t* Vs = Ks + kBN * QP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;

  long long t = blockIdx.x;
  const long long h = t % p.Hq;
  t /= p.Hq;
  const long long b = t % p.B;
  t /= p.B;
  const long long qt = static_cast<long long>(p.tiles.qTiles) - 1 - t;  // last rows first (most keys)
  const long long i0 = qt * kTile;
  const long long kvh = h / p.G, entry = p.tiles.entries == 1 ? 0 : b;
  const long long rowStride = p.Hq * p.D, kvStride = p.Hkv * p.D;

  LoadTile16<DB, kBM, QP, kThreads>(Qs, q + ((b * p.T + i0) * p.Hq + h) * p.D, rowStride, p.T - i0, p.D);
  __syncthreads();
  const int r0 = warp * 16;
  std::uint32_t qa[KD][4];
#pragma unroll
  for (int kk = 0; kk < KD; ++kk) LoadA<QP>(qa[kk], Qs, r0, kk * 16);

  const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
  const bool hasSink = sink > -INFINITY;
  float m[2], l[2], acc[ON][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m[r] = hasSink ? sink : -INFINITY;  // the sink seeds the online softmax
    l[r] = hasSink ? 1.0f : 0.0f;
  }
#pragma unroll
  for (int o = 0; o < ON; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[o][e] = 0.0f;

  const long long row = entry * p.tiles.qTiles + qt;
  const int first = p.tiles.kvPtr[row], last = p.tiles.kvPtr[row + 1];
  const float cap = p.softcap, invCap = cap > 0.0f ? 1.0f / cap : 0.0f;
  for (int x = first; x < last; ++x) {
    const long long kt = p.tiles.kvIdx[x];
    const bool partial = p.tiles.states[row * p.tiles.kTiles + kt] == kBlockPartial;
    const long long j0 = kt * kTile;
    __syncthreads();  // the previous tile is done with Ks and Vs
    const long long kvOff = ((b * p.Tk + j0) * p.Hkv + kvh) * p.D;
    LoadTile16<DB, kBN, QP, kThreads>(Ks, k + kvOff, kvStride, p.Tk - j0, p.D);
    LoadTile16<DB, kBN, QP, kThreads>(Vs, v + kvOff, kvStride, p.Tk - j0, p.D);
    __syncthreads();

    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk)
#pragma unroll
      for (int n = 0; n < NT; n += 2) {
        std::uint32_t bb[2][2];
        LoadB2<QP>(bb, Ks, n * 8, kk * 16);
        Mma<Op>(s[n], qa[kk], bb[0]);
        Mma<Op>(s[n + 1], qa[kk], bb[1]);
      }

    // Scores -> probabilities, row by row (this lane holds rows g and g + 8 of the warp's 16).
    float alpha[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const long long i = i0 + r0 + g + 8 * hr;
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long j = j0 + n * 8 + 2 * tg + e;
          float z = s[n][2 * hr + e] * p.scale;
          if (cap > 0.0f) z = cap * tanhf(z * invCap);
          if (j >= p.Tk || i >= p.T || (partial && !MaskAllowed(p.mask, b, p.qOffset + i, j))) z = -INFINITY;
          s[n][2 * hr + e] = z;
          mx = fmaxf(mx, z);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mNew = fmaxf(m[hr], mx);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float P = mNew == -INFINITY ? 0.0f : expf(s[n][2 * hr + e] - mNew);  // nothing visible yet, no sink: 0
          s[n][2 * hr + e] = P;
          sum += P;
        }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      alpha[hr] = 1.0f;
      if (mNew != -INFINITY && mNew != m[hr]) {
        alpha[hr] = m[hr] == -INFINITY ? 0.0f : expf(m[hr] - mNew);
        m[hr] = mNew;
      }
      l[hr] = l[hr] * alpha[hr] + sum;
    }
#pragma unroll
    for (int o = 0; o < ON; ++o) {
      acc[o][0] *= alpha[0];
      acc[o][1] *= alpha[0];
      acc[o][2] *= alpha[1];
      acc[o][3] *= alpha[1];
    }

    // O += P V: P (bf16 or fp16) from the score fragments, V through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      std::uint32_t a[4];
      CToA<Op>(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int o = 0; o < ON; o += 2) {
        std::uint32_t bb[2][2];
        LoadBT2<QP>(bb, Vs, kk * 16, o * 8);
        Mma<Op>(acc[o], a, bb[0]);
        Mma<Op>(acc[o + 1], a, bb[1]);
      }
    }
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const long long i = i0 + r0 + g + 8 * hr;
    if (i >= p.T) continue;
    std::uint16_t* dst = out + ((b * p.T + i) * p.Hq + h) * p.D;
    const bool any = l[hr] > 0.0f;
    const float inv = any ? 1.0f / l[hr] : 0.0f;
#pragma unroll
    for (int o = 0; o < ON; ++o)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = o * 8 + 2 * tg + e;
        if (d < p.D) dst[d] = ::sinkflex::mma::Bits16<Op>(any ? acc[o][2 * hr + e] * inv : 0.0f);
      }
    if (tg == 0) lse[(b * p.Hq + h) * p.T + i] = any ? m[hr] + logf(l[hr]) : -INFINITY;
  }
}

template <Operand Op, int DB>
void Launch(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream) {
  using C = TcFwdCfg<DB>;
  auto kernel = TcForwardKernel<Op, DB>;
  RequireSharedMemory(C::kSmem, "the tensor-core attention forward");
  SFX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmem)));
  const long long blocks = static_cast<long long>(p.tiles.qTiles) * p.B * p.Hq;
  if (blocks > 2147483647LL) throw ArgumentError("too many (query tile, batch, head) blocks for one launch");
  SFX_LAUNCH(kernel, static_cast<unsigned>(blocks), kThreads, C::kSmem, stream)
  (p, static_cast<const std::uint16_t*>(a.q), static_cast<const std::uint16_t*>(a.k),
   static_cast<const std::uint16_t*>(a.v), a.sinks, static_cast<std::uint16_t*>(a.out), a.lse);
  SFX_CUDA_LAUNCH_CHECK("TcForwardKernel");
}

}  // namespace

void LaunchTensorCoreForward(const AttnParams& p, const DeviceForwardArgs& a, cudaStream_t stream) {
  const bool f16 = a.dtype == DType::kF16;
  if (p.D <= 64) {
    f16 ? Launch<Operand::kF16, 64>(p, a, stream) : Launch<Operand::kBf16, 64>(p, a, stream);
  } else {
    f16 ? Launch<Operand::kF16, 128>(p, a, stream) : Launch<Operand::kBf16, 128>(p, a, stream);
  }
}

}  // namespace sinkflex::attention::cuda
