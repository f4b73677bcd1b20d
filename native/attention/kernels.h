// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// The vectorised CPU kernels of sink attention, compiled once per instruction set
// (kernels_avx512.cc, kernels_avx2.cc, kernels_generic.cc include kernels_impl.h and
// fused_impl.h) and picked
// at run time. Drivers (fused_cpu.cc, eager_cpu.cc) own threading and memory; the functions
// here do the arithmetic of one task or one row and allocate nothing.
#pragma once

#include <cstdint>

#include "mask.h"
#include "sink_attention.h"

namespace sinkflex::attention {

/** Options with defaults applied and checked against the shape (shared by fused and eager). */
struct Resolved {
  float scale;
  float softcap;
  const MaskProgram* mask;
};
/** Validates shape and options (ArgumentError naming the field) and applies the defaults. */
Resolved Resolve(const Shape& shape, const Options& opts);
/** Throws ArgumentError "<name> is required" when p is nullptr. */
void RequirePtr(const void* p, const char* name);

/** Everything a fused task needs; built once per call by the driver. */
struct FusedCtx {
  Shape shape;
  float scale = 1.0f;
  float softcap = 0.0f;
  const MaskProgram* mask = nullptr;
  const BlockMask* blocks = nullptr;
  std::int64_t bs = 64;    // tile size (the block mask's block size, a multiple of 16)
  std::int64_t dPad = 64;  // headDim rounded up to a multiple of 16
  // forward
  const float* q = nullptr;
  const float* sinks = nullptr;
  // keys and values read in place ([batch, kvLen, kvHeads, headDim]; forward and backward)
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
  // backward
  const float* lseIn = nullptr;
  const float* dOut = nullptr;
  const float* delta = nullptr;  // [batch, qHeads, qLen]: dO.o - dLse
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  // one-pass backward: query heads of a group are split over `slots` tasks; slot s > 0
  // accumulates dk/dv into the (s - 1)-th kv-sized slice of dkPart/dvPart
  std::int64_t slots = 1;
  float* dkPart = nullptr;
  float* dvPart = nullptr;
  /** Task permutation (heaviest first), or nullptr for the natural order. */
  const std::int64_t* order = nullptr;
};

/**
 * Per-thread scratch floats of the fused tasks (the layouts are carved in fused_impl.h):
 * forward Q^T, acc^T (dPad x tile each), S (tile x tile), m, l, alpha, a row mask; backward Qs,
 * dO, Q^T, dO^T, two accumulators (tile x dPad each), S, dP, tanh' (tile x tile), L, D and a
 * row mask.
 */
inline std::int64_t FusedForwardScratch(std::int64_t bs, std::int64_t dPad) {
  return 2 * bs * dPad + bs * bs + 3 * bs + bs / 4 + 16;
}
inline std::int64_t FusedBackwardScratch(std::int64_t bs, std::int64_t dPad) {
  return 6 * bs * dPad + 3 * bs * bs + 2 * bs + bs / 4 + 16;
}

/**
 * C[m, n] (+)= sum_k A(m, k) B[k, n] for m < M, n < N, with A(m, k) = A[m * sAm + k * sAk]
 * (so a transposed A is sAm = 1), B row-major with leading dimension ldb, C with ldc.
 * accumulate = false overwrites C.
 */
struct GemmArgs {
  std::int64_t M, N, K;
  const float* A;
  std::int64_t sAm, sAk;
  const float* B;
  std::int64_t ldb;
  float* C;
  std::int64_t ldc;
  bool accumulate;
};

/** One instruction set's kernels. */
struct KernelTable {
  const char* name;
  /** Forward task t: (query block, batch, head) = decode(order ? order[t] : t). */
  void (*fusedForwardTask)(const FusedCtx& ctx, std::int64_t task, float* scratch);
  /** dk/dv task t over (key block, batch, kv head). */
  void (*fusedBackwardKvTask)(const FusedCtx& ctx, std::int64_t task, float* scratch);
  /** dq task t over (query block, batch, head). */
  void (*fusedBackwardQTask)(const FusedCtx& ctx, std::int64_t task, float* scratch);
  /** dq, dk, dv task t over (batch, kv head, slot) in one pass (dk, dv zeroed beforehand). */
  void (*fusedBackwardGroupTask)(const FusedCtx& ctx, std::int64_t task, float* scratch);
  void (*gemm)(const GemmArgs& g);
  /** max(x[0..n)). */
  float (*rowMax)(const float* x, std::int64_t n);
  /** y = exp(x - m) (y may alias x); returns the sum of y. exp(-inf) = 0. */
  float (*expSubSum)(const float* x, float* y, std::int64_t n, float m);
  /** x *= a. */
  void (*scale)(float* x, std::int64_t n, float a);
  /** sum x*y. */
  float (*dot)(const float* x, const float* y, std::int64_t n);
  /** ds = p * (dp - d). */
  void (*softmaxGrad)(const float* p, const float* dp, float* ds, std::int64_t n, float d);
};

const KernelTable& GenericKernels();
const KernelTable& Avx2Kernels();
const KernelTable& Avx512Kernels();
/** Whether the AVX2 / AVX-512 builds exist in this binary (x86-64 with GCC or Clang). */
bool Avx2Compiled();
bool Avx512Compiled();
/** The table of `isa` (kAuto: the best one); throws ArgumentError when the CPU lacks it. */
const KernelTable& KernelsFor(CpuIsa isa);

}  // namespace sinkflex::attention
