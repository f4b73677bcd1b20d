// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The CUDA backend of sink attention: entry points that validate, make the device current,
// run the kernels on a stream of their own and wait for them; registered with
// RegisterCudaBackend when the addon loads (this file is compiled only by the CUDA build).
#include <string>

#include "../core/errors.h"
#include "cuda_common.cuh"
#include "kernels.h"

namespace sinkflex::attention::cuda {
namespace {

void RequireFused(const Shape& s) {
  ValidateShape(s);
  if (s.headDim > kMaxFusedHeadDim) {
    throw ArgumentError("the CUDA fused attention takes headDim <= " + std::to_string(kMaxFusedHeadDim) + ", got " +
                        std::to_string(s.headDim) + " (use impl 'eager' or the cpu)");
  }
}

void RequireForward(const DeviceForwardArgs& a) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  RequirePtr(a.out, "out");
  RequirePtr(a.lse, "lse");
}

void RequireBackward(const DeviceBackwardArgs& a, bool needOut) {
  RequirePtr(a.q, "q");
  RequirePtr(a.k, "k");
  RequirePtr(a.v, "v");
  if (needOut) RequirePtr(a.out, "out");
  RequirePtr(a.lse, "lse");
  RequirePtr(a.dOut, "dOut");
  RequirePtr(a.dq, "dq");
  RequirePtr(a.dk, "dk");
  RequirePtr(a.dv, "dv");
}

void FusedForward(int device, const Shape& s, const Options& opts, const DeviceForwardArgs& a) {
  RequireForward(a);
  RequireFused(s);
  DeviceGuard guard(device);
  CudaStream stream;
  const DevicePlan plan(device, s, opts, true);
  LaunchFusedForward(plan.params(), a, stream);
  stream.Synchronize();
}

void FusedBackward(int device, const Shape& s, const Options& opts, const DeviceBackwardArgs& a) {
  RequireBackward(a, true);
  RequireFused(s);
  DeviceGuard guard(device);
  CudaStream stream;
  const DevicePlan plan(device, s, opts, true);
  LaunchFusedBackward(device, plan.params(), a, stream);
  stream.Synchronize();
}

void EagerForward(int device, const Shape& s, const Options& opts, const DeviceForwardArgs& a,
                  std::unique_ptr<DeviceSaved>* save) {
  RequireForward(a);
  ValidateShape(s);
  DeviceGuard guard(device);
  RunEagerForward(device, s, opts, a, save);
}

void EagerBackward(int device, const Shape& s, const Options& opts, const DeviceBackwardArgs& a,
                   const DeviceSaved* saved) {
  RequireBackward(a, false);
  ValidateShape(s);
  DeviceGuard guard(device);
  RunEagerBackward(device, s, opts, a, saved);
}

const CudaBackend kBackend = {FusedForward, FusedBackward, EagerForward, EagerBackward, kMaxFusedHeadDim};

[[maybe_unused]] const bool kRegistered = (RegisterCudaBackend(&kBackend), true);

}  // namespace
}  // namespace sinkflex::attention::cuda
