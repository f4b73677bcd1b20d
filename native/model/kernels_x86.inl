// The model kernels of one x86 instruction set: kernels_avx2.cc and kernels_avx512.cc define
// SINKFLEX_ISA (simd_vec.inl), SINKFLEX_ISA_TARGET (the target attribute string),
// SINKFLEX_ISA_MR (micro-tile height of the packed GEMM kernel), SINKFLEX_ISA_NAME and
// SINKFLEX_ISA_TABLE, then include this file: it compiles simd_vec.inl, ops_kernels.inl and
// gemm_micro.inl inside a target region and fills that ISA's KernelTable (a constant
// expression: constant-initialised, no static-init order). Reference and tests: see
// kernel_table.h.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#define SINKFLEX_PRAGMA_STRING(x) _Pragma(#x)
#define SINKFLEX_PRAGMA(x) SINKFLEX_PRAGMA_STRING(x)  // expands the macros in x first

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 false positives inside its AVX-512 headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__clang__)
SINKFLEX_PRAGMA(clang attribute push(__attribute__((target(SINKFLEX_ISA_TARGET))), apply_to = function))
#else
#pragma GCC push_options
SINKFLEX_PRAGMA(GCC target(SINKFLEX_ISA_TARGET))
#endif

#include "simd_vec.inl"
#include "ops_kernels.inl"
#include "gemm_micro.inl"
#include "kernel_table_make.inl"

namespace sinkflex::model {

constexpr KernelTable SINKFLEX_ISA_TABLE = MakeKernelTable<SINKFLEX_ISA_MR>(SINKFLEX_ISA_NAME);

}  // namespace sinkflex::model

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
