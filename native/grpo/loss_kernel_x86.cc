// Reference: docs/design.md, "GRPO — semantics" (policy loss, KL term, aggregation, gradient,
//   metrics); float64 reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/policy-loss.test.ts, policy-loss-errors.test.ts, determinism.test.ts.
// 8-lane builds of the token kernel for AVX2 and AVX-512 CPUs, compiled with per-function
// target attributes (shipped binaries have no -march flags); loss_kernel.cc dispatches.
#include "loss_kernel_x86.h"

#if SINKFLEX_X86_KERNELS
#define SINKFLEX_LANES 8
#include "loss_kernel_impl.h"

namespace sinkflex::grpo {

SINKFLEX_DEFINE_LOSS_PIECE(LossPieceAvx2, __attribute__((target("avx2,fma"))))
SINKFLEX_DEFINE_LOSS_PIECE(LossPieceAvx512, __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq"))))

}  // namespace sinkflex::grpo
#endif
