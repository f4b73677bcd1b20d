// The process-wide precision of the CUDA GEMMs (matmul_precision.h).
#include "matmul_precision.h"

#include <atomic>
#include <cstdio>

namespace sinkflex::model {
namespace {
std::atomic<int> g_precision{static_cast<int>(MatmulPrecision::kHighest)};
std::atomic<bool> g_noted{false};
}  // namespace

MatmulPrecision GetMatmulPrecision() {
  return static_cast<MatmulPrecision>(g_precision.load(std::memory_order_relaxed));
}

void SetMatmulPrecision(MatmulPrecision p) { g_precision.store(static_cast<int>(p), std::memory_order_relaxed); }

const char* MatmulPrecisionName(MatmulPrecision p) { return p == MatmulPrecision::kMedium ? "medium" : "highest"; }

void NoteMatmulFallback(const std::string& reason) {
  if (g_noted.exchange(true)) return;
  std::fprintf(stderr, "sinkflex: matmul precision 'medium': %s; these GEMMs run the float32 kernel\n", reason.c_str());
}

bool ParseMatmulPrecision(const std::string& name, MatmulPrecision* out) {
  if (name == "highest")
    *out = MatmulPrecision::kHighest;
  else if (name == "medium")
    *out = MatmulPrecision::kMedium;
  else
    return false;
  return true;
}

}  // namespace sinkflex::model
