// The process-wide precision of the CUDA GEMMs (matmul_precision.h).
#include "matmul_precision.h"

#include <atomic>
#include <cstdio>

namespace sinkflex::model {
namespace {
// Precision in bit 0, operand type in bit 1: one atomic, so a reader never sees half a setting.
std::atomic<int> g_setting{static_cast<int>(MatmulPrecision::kHighest)};
std::atomic<bool> g_noted{false};
}  // namespace

MatmulPrecision GetMatmulPrecision() {
  return static_cast<MatmulPrecision>(g_setting.load(std::memory_order_relaxed) & 1);
}

MatmulOperand GetMatmulOperand() {
  return static_cast<MatmulOperand>((g_setting.load(std::memory_order_relaxed) >> 1) & 1);
}

void SetMatmulPrecision(MatmulPrecision p, MatmulOperand operand) {
  if (p == MatmulPrecision::kHighest) operand = MatmulOperand::kBf16;
  g_setting.store(static_cast<int>(p) | (static_cast<int>(operand) << 1), std::memory_order_relaxed);
}

const char* MatmulPrecisionName(MatmulPrecision p) { return p == MatmulPrecision::kMedium ? "medium" : "highest"; }

const char* MatmulOperandName(MatmulOperand t) { return t == MatmulOperand::kF16 ? "float16" : "bfloat16"; }

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

bool ParseMatmulOperand(const std::string& name, MatmulOperand* out) {
  if (name == "bfloat16")
    *out = MatmulOperand::kBf16;
  else if (name == "float16")
    *out = MatmulOperand::kF16;
  else
    return false;
  return true;
}

}  // namespace sinkflex::model
