// Run-time choice of the model kernel table (kernel_table.h) from the CPU features.
// Reference: docs/design.md, "The built-in model — semantics"; float64 reference:
//   test/model/fixtures/reference.ts.
// Tests: test/model/linear-rmsnorm.test.ts, rope-swiglu.test.ts, embedding-softmax.test.ts,
//   mlp-block.test.ts, adamw-param-store.test.ts, isa-avx2.test.ts, isa-generic.test.ts,
//   determinism.test.ts, bindings.test.ts.
#include "../core/cpu_features.h"
#include "kernel_table.h"

namespace sinkflex::model {

const KernelTable& ActiveKernels() {
  static const KernelTable& table = []() -> const KernelTable& {
#if defined(SINKFLEX_HAVE_X86_KERNELS)
    const CpuFeatures& f = GetCpuFeatures();
    if (f.avx512f && f.avx2 && f.fma) return kAvx512Kernels;
    if (f.avx2 && f.fma) return kAvx2Kernels;
#endif
    return kGenericKernels;
  }();
  return table;
}

}  // namespace sinkflex::model
