// Reference: docs/design.md, "Sink attention — semantics"; checked against the CPU kernels and the
//   float64 reference test/attention/fixtures/reference.ts.
// Tests: test/attention/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The CUDA backend of sink attention: entry points that validate, make the device current,
// run the kernels on a stream of their own and wait for them; registered with
// RegisterCudaBackend when the addon loads (this file is compiled only by the CUDA build).
// bf16 and fp16 inputs with headDim <= 128 on sm_80 and newer take the tensor-core kernels
// (cuda_fused_tc_*.cu); other bf16/fp16 calls take the fp32-arithmetic kernels and say why once
// on stderr; SINKFLEX_ATTENTION_TENSOR_CORES=0 keeps them on the fp32-arithmetic kernels.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "../core/cuda_device.h"
#include "../core/errors.h"
#include "cuda_common.cuh"
#include "cuda_tc.cuh"
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

// Says once per process why a bf16 or fp16 call does not use the tensor cores.
void NoteNoTensorCores(std::once_flag& once, const std::string& why) {
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "sinkflex: bf16/fp16 CUDA attention without tensor cores (%s): the fp32-arithmetic kernels run "
                 "instead\n",
                 why.c_str());
  });
}

/** Whether a fused call takes the tensor-core kernels (the current device is `device`). */
bool UseTensorCores(int device, const Shape& s, DType dtype) {
  if (dtype == DType::kF32) return false;
  const char* env = std::getenv("SINKFLEX_ATTENTION_TENSOR_CORES");  // read per call: tests switch it
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  if (s.headDim > kMaxTensorCoreHeadDim) {
    static std::once_flag once;
    NoteNoTensorCores(once, "headDim " + std::to_string(s.headDim) + " > " + std::to_string(kMaxTensorCoreHeadDim));
    return false;
  }
  if (!DeviceHasBf16TensorCores(device)) {
    static std::once_flag once;
    NoteNoTensorCores(once, "cuda:" + std::to_string(device) + " is older than sm_80");
    return false;
  }
  return true;
}

void FusedForward(int device, const Shape& s, const Options& opts, const DeviceForwardArgs& a) {
  RequireForward(a);
  RequireFused(s);
  DeviceGuard guard(device);
  CudaStream stream;
  const DevicePlan plan(device, s, opts, true);
  if (UseTensorCores(device, s, a.dtype)) {
    LaunchTensorCoreForward(plan.params(), a, stream);
  } else {
    LaunchFusedForward(plan.params(), a, stream);
  }
  stream.Synchronize();
}

void FusedBackward(int device, const Shape& s, const Options& opts, const DeviceBackwardArgs& a) {
  RequireBackward(a, true);
  RequireFused(s);
  DeviceGuard guard(device);
  CudaStream stream;
  const DevicePlan plan(device, s, opts, true);
  if (UseTensorCores(device, s, a.dtype)) {
    LaunchTensorCoreBackward(device, plan.params(), a, stream);
  } else {
    LaunchFusedBackward(device, plan.params(), a, stream);
  }
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

bool DeviceHasBf16TensorCores(int device) {
  for (const CudaDeviceInfo& d : CudaDevices()) {
    if (d.index == device) return d.major >= 8;
  }
  return false;
}

int MultiProcessors(int device) {
  for (const CudaDeviceInfo& d : CudaDevices()) {
    if (d.index == device) return d.multiProcessors > 0 ? d.multiProcessors : 1;
  }
  return 1;
}

}  // namespace sinkflex::attention::cuda
