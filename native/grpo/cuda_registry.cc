// The registry of the CUDA GRPO backend (grpo_cuda.h): set once at load by grpo_cuda.cu in
// CUDA builds, empty otherwise.
#include <atomic>

#include "grpo_cuda.h"

namespace sinkflex::grpo {
namespace {
std::atomic<const CudaGrpoBackend*> g_backend{nullptr};
}  // namespace

void RegisterCudaGrpoBackend(const CudaGrpoBackend* backend) { g_backend.store(backend); }
const CudaGrpoBackend* GetCudaGrpoBackend() { return g_backend.load(); }

}  // namespace sinkflex::grpo
