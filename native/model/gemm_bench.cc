// The registered GEMM timer of the CUDA build (gemm_bench.h).
#include "gemm_bench.h"

#include <atomic>

namespace sinkflex::model {
namespace {
std::atomic<GemmTimer> g_timer{nullptr};
}  // namespace

void RegisterGemmTimer(GemmTimer timer) { g_timer.store(timer); }

GemmTimer GetGemmTimer() { return g_timer.load(); }

}  // namespace sinkflex::model
