// The registry of the CUDA MoE layer (moe_device.h).
#include "moe_device.h"

#include <atomic>

namespace sinkflex::model {
namespace {
std::atomic<const DeviceMoe*> g_moe{nullptr};
}  // namespace

void RegisterCudaMoe(const DeviceMoe* moe) { g_moe.store(moe); }
const DeviceMoe* GetCudaMoe() { return g_moe.load(); }

}  // namespace sinkflex::model
