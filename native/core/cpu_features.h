// Run-time CPU feature detection, used to dispatch vectorised kernels (shipped binaries are
// compiled without -march=native).
#pragma once

#include <string>
#include <vector>

namespace sinkflex {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
};

/** Detected once; SINKFLEX_CPU_FEATURES=generic disables every extension (for testing). */
const CpuFeatures& GetCpuFeatures();
/** Names of the enabled features, e.g. {"avx2", "fma"}. */
std::vector<std::string> CpuFeatureNames();

}  // namespace sinkflex
