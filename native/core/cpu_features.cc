#include "cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace sinkflex {

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    const char* env = std::getenv("SINKFLEX_CPU_FEATURES");
    if (env && std::strcmp(env, "generic") == 0) return f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    if (env && std::strcmp(env, "avx2") == 0) f.avx512f = false;
#endif
    return f;
  }();
  return features;
}

std::vector<std::string> CpuFeatureNames() {
  const CpuFeatures& f = GetCpuFeatures();
  std::vector<std::string> names;
  if (f.avx2) names.push_back("avx2");
  if (f.fma) names.push_back("fma");
  if (f.avx512f) names.push_back("avx512f");
  return names;
}

}  // namespace sinkflex
