// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// The model kernels compiled for avx2 (see kernel_table.h for the scheme).
#include "kernel_table.h"

#if defined(SINKFLEX_HAVE_X86_KERNELS)
#define SINKFLEX_ISA 2
#define SINKFLEX_ISA_TARGET "avx2,fma"
#define SINKFLEX_ISA_MR 6
#define SINKFLEX_ISA_NAME "avx2"
#define SINKFLEX_ISA_TABLE kAvx2Kernels
#include "kernels_x86.inl"
#endif  // SINKFLEX_HAVE_X86_KERNELS
