// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// The token kernels' entry points: the portable 4-lane build (SSE2, NEON, or plain arrays),
// the mask pass, and the run-time choice of the 8-lane AVX2 / AVX-512 builds of
// loss_kernel_x86.cc where the CPU has them (SINKFLEX_CPU_FEATURES=generic forces this file's
// build, which is how the tests cover it).
#define SINKFLEX_LANES 4
#include "loss_kernel_impl.h"

#include "../core/cpu_features.h"
#include "loss_kernel_x86.h"

namespace sinkflex::grpo {

SINKFLEX_DEFINE_LOSS_PIECE(LossPieceGeneric, )

namespace {

using PieceFn = PieceSums (*)(const PieceArgs&, const TokenConsts&, KlType);

PieceFn PickLossPiece() {
#if SINKFLEX_X86_KERNELS
  const CpuFeatures& f = GetCpuFeatures();  // all false under SINKFLEX_CPU_FEATURES=generic
  __builtin_cpu_init();
  const bool v3 = f.avx2 && f.fma && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool v4 = v3 && f.avx512f && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (v4) return LossPieceAvx512;
  if (v3) return LossPieceAvx2;
#endif
  return LossPieceGeneric;
}

}  // namespace

PieceSums LossPiece(const PieceArgs& a, const TokenConsts& c, KlType kl) {
  static const PieceFn fn = PickLossPiece();
  return fn(a, c, kl);
}

const char* LossPieceIsa() {
  static const PieceFn fn = PickLossPiece();
#if SINKFLEX_X86_KERNELS
  if (fn == LossPieceAvx512) return "avx512";
  if (fn == LossPieceAvx2) return "avx2";
#endif
  return fn == LossPieceGeneric ? "generic" : "unknown";
}

bool MaskPiece(const float* mask, std::int64_t n, std::int64_t* count) {
  using namespace lanes4;
  const FV zero = Splat(0.0f);
  const FV one = Splat(1.0f);
  IV bad = SplatI(0);
  std::int64_t total = 0;
  std::int64_t i = 0;
  const std::int64_t full = n - n % kVec;
  while (i < full) {
    // int32 lane counters are folded every 2^20 tokens, far below overflow.
    const std::int64_t end = full - i < (1 << 20) ? full : i + (1 << 20);
    IV cnt = SplatI(0);
    for (; i < end; i += kVec) {
      const FV m = Load(mask + i);
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
