// The model ops as a table of entry points with the signatures of ops.h, so that callers (the
// N-API bindings) run the same code over host memory (CpuOps(), the CPU kernels) or device
// memory (GetCudaOps(), registered by native/model/cuda_ops.cu in CUDA builds). A CUDA table
// runs on the device made current by useDevice and takes device pointers for every array
// except where noted; its calls are synchronous. Plain C++.
#pragma once

#include <cstdint>

#include "ops.h"

namespace sinkflex::model {

struct ModelOps {
  /** Makes CUDA device `index` current for the calling thread (no-op on the CPU). */
  void (*useDevice)(int index);
  /** c = alpha op(a) op(b) + beta c, row-major with leading dimensions (gemm.h). */
  void (*gemm)(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
  decltype(&LinearForward) linearForward;
  decltype(&LinearBackward) linearBackward;
  decltype(&RmsNormForward) rmsNormForward;
  decltype(&RmsNormBackward) rmsNormBackward;
  /** The table is the host RopeTable (its cos/sin are copied to the device by the CUDA version). */
  decltype(&RopeForward) ropeForward;
  decltype(&RopeBackward) ropeBackward;
  decltype(&SwiGluForward) swiGluForward;
  decltype(&SwiGluBackward) swiGluBackward;
  /** ids must have been checked (CheckTokenIds) by the caller for the CUDA version. */
  decltype(&EmbeddingForward) embeddingForward;
  decltype(&EmbeddingBackward) embeddingBackward;
  decltype(&LogSoftmaxForward) logSoftmaxForward;
  decltype(&LogSoftmaxBackward) logSoftmaxBackward;
  decltype(&CrossEntropyForward) crossEntropyForward;
  decltype(&CrossEntropyBackward) crossEntropyBackward;
  decltype(&AdamWUpdate) adamwUpdate;
  decltype(&SumSquares) sumSquares;
  // Weights stored as bfloat16 bits (frozen), widened exactly to float32 as the kernels load
  // them: the float32 results of the widened weights (gemm.h GemmMixed, ops.h *Bf16).
  decltype(&GemmMixed) gemmMixed;
  decltype(&LinearForwardBf16) linearForwardBf16;
  decltype(&LinearBackwardBf16) linearBackwardBf16;
  decltype(&EmbeddingForwardBf16) embeddingForwardBf16;
};

/** The CPU kernels. */
const ModelOps& CpuOps();
/** Registers the CUDA table (once, at load, from cuda_ops.cu). */
void RegisterCudaOps(const ModelOps* ops);
/** The CUDA table, or null in builds without CUDA model kernels. */
const ModelOps* GetCudaOps();

/** ArgumentError unless every ids[t] is in [0, V) (or -1 ... when allowNegative: [-inf, V)), naming `name[t]`. */
void CheckTokenIds(const std::int32_t* ids, std::int64_t T, std::int64_t V, const char* name, bool allowNegative);
/** ArgumentError for swiglu parameters out of range (alpha > 0, limit >= 0, finite upBias). */
void CheckSwiGluParams(const SwiGluParams& p);

}  // namespace sinkflex::model
