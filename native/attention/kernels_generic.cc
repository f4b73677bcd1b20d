// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Portable build of the attention kernels (kernels_impl.h, fused_impl.h): 16-byte vectors (SSE2 on x86-64,
// NEON or scalar code elsewhere), used when the CPU has neither AVX2+FMA nor AVX-512.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sinkflex::attention::generic {
namespace {
#define SFX_VBYTES 16
#define SFX_NV 2
#define SFX_ISA_NAME "generic"
#define SFX_FMA(a, b, c) ((a) * (b) + (c))
#if defined(__SSE2__)
#define SFX_MAXV(a, b) _mm_max_ps((a), (b))
#define SFX_MINV(a, b) _mm_min_ps((a), (b))
#else
#define SFX_MAXV(a, b) ((a) > (b) ? (a) : (b))
#define SFX_MINV(a, b) ((a) < (b) ? (a) : (b))
#endif
#include "kernels_impl.h"
#include "fused_impl.h"
}  // namespace
}  // namespace sinkflex::attention::generic

namespace sinkflex::attention {
const KernelTable& GenericKernels() { return generic::kTable; }
}  // namespace sinkflex::attention
