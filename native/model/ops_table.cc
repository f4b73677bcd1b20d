// The CPU table of the model ops and the registry of the CUDA one (ops_table.h).
#include "ops_table.h"

#include <atomic>

#include "gemm.h"

namespace sinkflex::model {
namespace {

void NoDevice(int) {}

const ModelOps kCpuOps = {NoDevice,
                          Gemm,
                          LinearForward,
                          LinearBackward,
                          RmsNormForward,
                          RmsNormBackward,
                          RopeForward,
                          RopeBackward,
                          SwiGluForward,
                          SwiGluBackward,
                          EmbeddingForward,
                          EmbeddingBackward,
                          LogSoftmaxForward,
                          LogSoftmaxBackward,
                          CrossEntropyForward,
                          CrossEntropyBackward,
                          AdamWUpdate,
                          SumSquares,
                          GemmMixed,
                          LinearForwardBf16,
                          LinearBackwardBf16,
                          EmbeddingForwardBf16};

std::atomic<const ModelOps*> g_cuda{nullptr};

}  // namespace

const ModelOps& CpuOps() { return kCpuOps; }
void RegisterCudaOps(const ModelOps* ops) { g_cuda.store(ops); }
const ModelOps* GetCudaOps() { return g_cuda.load(); }

}  // namespace sinkflex::model
