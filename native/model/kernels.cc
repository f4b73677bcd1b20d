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
