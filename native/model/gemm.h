// Reference: the float64 refGemm in test/model/fixtures/reference.ts.
// Tests: test/model/gemm.test.ts (and every op test that goes through the GEMM).
// Single-precision matrix multiply for the model ops: cache-blocked and packed (BLIS-style
// loops), register-tiled micro-kernels for AVX-512 / AVX2+FMA / portable code chosen at run
// time, multi-threaded over the global thread pool, deterministic (each element of C is
// computed by one task in a fixed order, whatever the thread count). Either operand may be
// stored as bfloat16 (GemmMixed: widened exactly while packing, products in float32), and B as
// MXFP4 (GemmMxfp4B: decoded exactly while packing).
#pragma once

#include <cstdint>
#include <string>

#include "mxfp4.h"

namespace sinkflex::model {

/**
 * Depth of one packed block: the K dimension is summed in blocks of this many, each block's
 * partial sum added onto C in order. A product over K split into calls at multiples of it (each
 * with beta = 1 after the first) is therefore bit-identical to the product over all of K (the
 * chunked LM head's weight gradient relies on it).
 */
constexpr std::int64_t kGemmDepthBlock = 384;
/**
 * Products with at most this many rows of op(A) (A not transposed) take the small-M path (B
 * widened and packed one panel at a time, read once); it sums each element in the same order as
 * the packed path, so a row's result does not depend on M.
 */
constexpr std::int64_t kGemmSmallRows = 128;

/**
 * C = alpha * op(A) * op(B) + beta * C, all row-major with leading dimensions (elements
 * between consecutive rows). op(A) is M x K: A itself when !transA (stored M x K, lda >= K),
 * its transpose when transA (stored K x M, lda >= M). op(B) is K x N likewise (stored K x N
 * with ldb >= N, or N x K with ldb >= K when transB). C is M x N with ldc >= N. beta == 0
 * means C is only written (it may hold NaN/garbage). Throws ArgumentError on bad sizes.
 */
void Gemm(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

/**
 * Gemm with either operand stored as bfloat16 bits (aBf16 / bBf16: A or B points to
 * std::uint16_t elements, else to float). A bfloat16 operand is widened exactly to float32 as
 * it is packed (or streamed, on the small-M path), so the result equals Gemm over the widened
 * matrix bit for bit. Throws ArgumentError on bad sizes.
 */
void GemmMixed(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const void* A,
               bool aBf16, std::int64_t lda, const void* B, bool bBf16, std::int64_t ldb, float beta, float* C,
               std::int64_t ldc);

/**
 * Gemm with a float32 A (not transposed) and B stored packed as MXFP4 (mxfp4.h; ldb, the stored
 * row length, a multiple of 32). B's elements are decoded exactly as they are packed (or, on the
 * small-M path, as each task's strip is streamed), so the result equals GemmMixed over B's
 * bfloat16 dequantization bit for bit. Throws ArgumentError on bad sizes.
 */
void GemmMxfp4B(bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, Mxfp4Ptr B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

/** The same contract computed by a plain scalar triple loop (the benchmark's baseline). */
void GemmNaive(bool transA, bool transB, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

/** e.g. "avx512 12x32": the instruction set and register tile the packed path uses. */
std::string GemmKernelName();

/**
 * Runs independent FMA chains on every thread of the pool for about `seconds` and returns the
 * achieved GFLOP/s: an estimate of the machine's FMA peak for the selected instruction set.
 */
double MeasureFmaPeakGflops(double seconds);

}  // namespace sinkflex::model
