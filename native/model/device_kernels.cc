// The registry of the CUDA device kernels (device_kernels.h).
#include "device_kernels.h"

#include <atomic>

namespace sinkflex::model {
namespace {
std::atomic<const DeviceKernels*> g_kernels{nullptr};
}  // namespace

void RegisterCudaDeviceKernels(const DeviceKernels* kernels) { g_kernels.store(kernels); }
const DeviceKernels* GetCudaDeviceKernels() { return g_kernels.load(); }

}  // namespace sinkflex::model
