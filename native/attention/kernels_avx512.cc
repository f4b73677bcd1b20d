// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// AVX-512 build of the attention kernels (kernels_impl.h, fused_impl.h), used when the CPU has AVX-512F.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// _mm512_max_ps/_mm512_min_ps pass _mm512_undefined_ps() as the unused merge source.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sinkflex::attention::avx512 {
namespace {
#define SFX_VBYTES 64
#define SFX_NV 4
#define SFX_ISA_NAME "avx512"
#define SFX_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define SFX_MAXV(a, b) _mm512_max_ps((a), (b))
#define SFX_MINV(a, b) _mm512_min_ps((a), (b))
#include "kernels_impl.h"
#include "fused_impl.h"
}  // namespace
}  // namespace sinkflex::attention::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace sinkflex::attention {
const KernelTable& Avx512Kernels() { return avx512::kTable; }
bool Avx512Compiled() { return true; }
}  // namespace sinkflex::attention

#else
namespace sinkflex::attention {
const KernelTable& Avx512Kernels() { return GenericKernels(); }
bool Avx512Compiled() { return false; }
}  // namespace sinkflex::attention
#endif
