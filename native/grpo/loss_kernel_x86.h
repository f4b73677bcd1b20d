// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// The 8-lane x86 builds of the token kernel (loss_kernel_x86.cc), present when
// SINKFLEX_X86_KERNELS is 1 (GCC or Clang on x86-64); loss_kernel.cc picks one at run time.
#pragma once

#include "loss_kernel.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define SINKFLEX_X86_KERNELS 1
#else
#define SINKFLEX_X86_KERNELS 0
#endif

namespace sinkflex::grpo {
#if SINKFLEX_X86_KERNELS
/** AVX2 + FMA. */
PieceSums LossPieceAvx2(const PieceArgs& a, const TokenConsts& c, KlType kl);
/** AVX-512 F/VL/BW/DQ (256-bit vectors with 32 registers and mask registers). */
PieceSums LossPieceAvx512(const PieceArgs& a, const TokenConsts& c, KlType kl);
#endif
}  // namespace sinkflex::grpo
