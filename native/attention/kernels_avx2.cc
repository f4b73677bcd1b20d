// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// AVX2 + FMA build of the attention kernels (kernels_impl.h, fused_impl.h), used when the CPU has AVX2 and FMA.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace sinkflex::attention::avx2 {
namespace {
#define SFX_VBYTES 32
#define SFX_NV 2
#define SFX_ISA_NAME "avx2"
#define SFX_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define SFX_MAXV(a, b) _mm256_max_ps((a), (b))
#define SFX_MINV(a, b) _mm256_min_ps((a), (b))
#include "kernels_impl.h"
#include "fused_impl.h"
}  // namespace
}  // namespace sinkflex::attention::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace sinkflex::attention {
const KernelTable& Avx2Kernels() { return avx2::kTable; }
bool Avx2Compiled() { return true; }
}  // namespace sinkflex::attention

#else
namespace sinkflex::attention {
const KernelTable& Avx2Kernels() { return GenericKernels(); }
bool Avx2Compiled() { return false; }
}  // namespace sinkflex::attention
#endif
