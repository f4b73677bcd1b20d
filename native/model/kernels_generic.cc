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

namespace sinkflex::model {

const KernelTable kGenericKernels = {
    "generic",
    W,
    4,
    2 * W,
    GemmMicroPacked<4, 2>,
    GemmMicroDirect<4, 2>,
    GemmSmallTransBK,
    GemmSmallNoTransK,
    GemmSmallTransBBf16K,
    GemmSmallNoTransBf16K,
    FmaBurnK,
    RmsNormForwardK,
    RmsNormBackwardK,
    RopeK,
    SwiGluForwardK,
    SwiGluBackwardK,
    LogSoftmaxForwardK,
    LogSoftmaxBackwardK,
    AdamWK,
    SumSquaresK,
    AddRowsK,
    AddK,
    WidenBf16K,
};

}  // namespace sinkflex::model
