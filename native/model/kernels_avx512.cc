// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
// The model kernels compiled for avx512 (see kernel_table.h for the scheme).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_table.h"

#if defined(SINKFLEX_HAVE_X86_KERNELS)
#include <immintrin.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positives inside its AVX-512 headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

#define SINKFLEX_ISA 3
#include "simd_vec.inl"
#include "ops_kernels.inl"
#include "gemm_micro.inl"
#include "kernel_table_make.inl"

namespace sinkflex::model {

constexpr KernelTable kAvx512Kernels = MakeKernelTable<12>("avx512");

}  // namespace sinkflex::model

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
#endif  // SINKFLEX_HAVE_X86_KERNELS
