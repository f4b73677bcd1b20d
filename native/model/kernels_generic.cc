// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// The model kernels compiled for generic (see kernel_table.h for the scheme).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_table.h"

#define SINKFLEX_ISA 1
#include "simd_vec.inl"
#include "ops_kernels.inl"
#include "gemm_micro.inl"
#include "kernel_table_make.inl"

namespace sinkflex::model {

constexpr KernelTable kGenericKernels = MakeKernelTable<4>("generic");

}  // namespace sinkflex::model
