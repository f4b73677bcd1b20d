// Attention calls whose tensors are DeviceTensors or whose device is CUDA:
//   - 'cpu' DeviceTensors: the CPU kernels on the tensors' host memory (bf16 and fp16 tensors
//     are widened to fp32 first), results as new 'cpu' DeviceTensors in the inputs' dtype;
//   - CUDA: Float32Arrays are copied to the device and the results back (fp32); DeviceTensors
//     are used in place and the results stay on the device as new DeviceTensors (out, dq, dk,
//     dv in the inputs' dtype; lse and dSinks in float32). Small fp32 inputs given as
//     Float32Arrays next to DeviceTensors (sinks, lse, dLse) are copied to the device.
// Plain C++ over cuda_device.h and the registered backend: it compiles in every build.
#include <vector>

#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "attention_call.h"

namespace sinkflex::addon {
namespace {

using attention::Shape;

std::vector<std::int64_t> LseShape(const Shape& s) { return {s.batch, s.qHeads, s.qLen}; }

// ---- 'cpu' DeviceTensors ---------------------------------------------------------------------

// A host fp32 view of an input: the Float32Array, an fp32 tensor's memory, or a widened copy.
const float* HostView(const TensorIn& t, std::vector<HostBuffer<float>>* temps, const char* what) {
  if (!t.given()) return nullptr;
  if (t.host != nullptr) return t.host;
  if (t.tensor->dtype() == DType::kF32) return static_cast<const float*>(t.tensor->data());
  temps->emplace_back(t.tensor->count(), what);
  t.tensor->CopyToFloats(temps->back().data());
  return temps->back().data();
}

// A 'cpu' result tensor from an fp32 buffer, narrowed to `dtype`.
TensorRef HostResult(HostBuffer<float>&& buf, DType dtype, std::vector<std::int64_t> shape) {
  if (dtype == DType::kF32) return std::make_shared<TensorStorage>(std::move(buf), std::move(shape));
  auto t = std::make_shared<TensorStorage>(kCpuDevice, dtype, std::move(shape), "attention result");
  t->CopyFromFloats(buf.data());
  return t;
}

void CpuTensorForward(const Call& c, ForwardResult* r) {
  std::vector<HostBuffer<float>> temps;
  const Shape& s = c.shape;
  HostBuffer<float> out(static_cast<std::size_t>(s.qElems()), "attention out");
  HostBuffer<float> lse(static_cast<std::size_t>(s.lseElems()), "attention lse");
  const attention::ForwardArgs a{HostView(c.q, &temps, "attention q (fp32)"),
                                 HostView(c.k, &temps, "attention k (fp32)"),
                                 HostView(c.v, &temps, "attention v (fp32)"),
                                 HostView(c.sinks, &temps, "attention sinks"),
                                 out.data(),
                                 lse.data()};
  if (c.impl == Impl::kEager) {
    if (c.save) r->saved = std::make_shared<SavedState>();
    attention::EagerForward(s, c.opts, a, r->saved ? &r->saved->cpu : nullptr);
  } else {
    attention::FusedForward(s, c.opts, a);
  }
  temps.clear();
  r->outT = HostResult(std::move(out), c.dtype, c.qShape);
  r->lseT = HostResult(std::move(lse), DType::kF32, LseShape(s));
}

void CpuTensorBackward(const Call& c, BackwardResult* r) {
  std::vector<HostBuffer<float>> temps;
  const Shape& s = c.shape;
  HostBuffer<float> dq(static_cast<std::size_t>(s.qElems()), "attention dq");
  HostBuffer<float> dk(static_cast<std::size_t>(s.kvElems()), "attention dk");
  HostBuffer<float> dv(static_cast<std::size_t>(s.kvElems()), "attention dv");
  HostBuffer<float> dSinks;
  if (c.sinks.given()) dSinks = HostBuffer<float>(static_cast<std::size_t>(s.qHeads), "attention dSinks");
  const attention::BackwardArgs a{HostView(c.q, &temps, "attention q (fp32)"),
                                  HostView(c.k, &temps, "attention k (fp32)"),
                                  HostView(c.v, &temps, "attention v (fp32)"),
                                  HostView(c.sinks, &temps, "attention sinks"),
                                  HostView(c.out, &temps, "attention out (fp32)"),
                                  HostView(c.lse, &temps, "attention lse"),
                                  HostView(c.dOut, &temps, "attention dOut (fp32)"),
                                  HostView(c.dLse, &temps, "attention dLse"),
                                  dq.data(),
                                  dk.data(),
                                  dv.data(),
                                  dSinks.data()};
  if (c.impl == Impl::kEager) {
    attention::EagerBackward(s, c.opts, a, c.saved ? &c.saved->cpu : nullptr);
  } else {
    attention::FusedBackward(s, c.opts, a);
  }
  temps.clear();
  r->dqT = HostResult(std::move(dq), c.dtype, c.qShape);
  r->dkT = HostResult(std::move(dk), c.dtype, c.kShape);
  r->dvT = HostResult(std::move(dv), c.dtype, c.vShape);
  if (dSinks.data() != nullptr) r->dSinksT = HostResult(std::move(dSinks), DType::kF32, {s.qHeads});
}

// ---- CUDA ------------------------------------------------------------------------------------

// A device pointer to an input: a DeviceTensor's memory or an uploaded Float32Array.
const void* DeviceView(const TensorIn& t, int index, std::size_t n, std::vector<DeviceBuffer<float>>* temps,
                       const char* what) {
  if (!t.given()) return nullptr;
  if (t.tensor) return t.tensor->data();
  temps->emplace_back(index, n, what);
  temps->back().Upload(t.host);
  return temps->back().data();
}

// A device output of `dtype` (fp32, or the bits of bf16 or fp16).
struct DeviceOut {
  DType dtype;
  DeviceBuffer<float> f32;
  DeviceBuffer<std::uint16_t> bits16;
  DeviceOut(int index, DType t, std::size_t n, const char* what) : dtype(t) {
    if (dtype == DType::kF32) {
      f32 = DeviceBuffer<float>(index, n, what);
    } else {
      bits16 = DeviceBuffer<std::uint16_t>(index, n, what);
    }
  }
  void* ptr() const {
    return dtype == DType::kF32 ? static_cast<void*>(f32.data()) : static_cast<void*>(bits16.data());
  }
  // As a DeviceTensor result.
  TensorRef Tensor(std::vector<std::int64_t> shape) {
    if (dtype == DType::kF32) return std::make_shared<TensorStorage>(std::move(f32), std::move(shape));
    return std::make_shared<TensorStorage>(std::move(bits16), std::move(shape), dtype);
  }
  // As a host fp32 result (Float32Array calls are fp32 throughout).
  HostBuffer<float> Host(const char* what) {
    HostBuffer<float> h(f32.size(), what);
    f32.Download(h.data());
    return h;
  }
};

const attention::CudaBackend& Backend() {
  const attention::CudaBackend* cb = attention::GetCudaBackend();
  if (cb == nullptr) throw DeviceError("this build has no CUDA sink-attention kernels");
  return *cb;
}

void CudaForward(const Call& c, ForwardResult* r) {
  const attention::CudaBackend& cb = Backend();
  const int index = c.device - 1;
  const Shape& s = c.shape;
  const auto qn = static_cast<std::size_t>(s.qElems()), kvn = static_cast<std::size_t>(s.kvElems());
  std::vector<DeviceBuffer<float>> temps;
  temps.reserve(4);
  attention::DeviceForwardArgs a;
  a.dtype = c.dtype;
  a.q = DeviceView(c.q, index, qn, &temps, "attention q");
  a.k = DeviceView(c.k, index, kvn, &temps, "attention k");
  a.v = DeviceView(c.v, index, kvn, &temps, "attention v");
  a.sinks = static_cast<const float*>(
      DeviceView(c.sinks, index, static_cast<std::size_t>(s.qHeads), &temps, "attention sinks"));
  DeviceOut out(index, c.dtype, qn, "attention out");
  DeviceOut lse(index, DType::kF32, static_cast<std::size_t>(s.lseElems()), "attention lse");
  a.out = out.ptr();
  a.lse = static_cast<float*>(lse.ptr());
  if (c.impl == Impl::kEager) {
    std::unique_ptr<attention::DeviceSaved> saved;
    cb.eagerForward(index, s, c.opts, a, c.save ? &saved : nullptr);
    if (c.save) {
      r->saved = std::make_shared<SavedState>();
      r->saved->slot = c.device;
      r->saved->device = std::move(saved);
    }
  } else {
    cb.fusedForward(index, s, c.opts, a);
  }
  temps.clear();
  if (c.tensors) {
    r->outT = out.Tensor(c.qShape);
    r->lseT = lse.Tensor(LseShape(s));
  } else {
    r->out = out.Host("attention out");
    r->lse = lse.Host("attention lse");
  }
}

void CudaBackward(const Call& c, BackwardResult* r) {
  const attention::CudaBackend& cb = Backend();
  const int index = c.device - 1;
  const Shape& s = c.shape;
  const auto qn = static_cast<std::size_t>(s.qElems()), kvn = static_cast<std::size_t>(s.kvElems());
  const auto ln = static_cast<std::size_t>(s.lseElems()), hn = static_cast<std::size_t>(s.qHeads);
  std::vector<DeviceBuffer<float>> temps;
  temps.reserve(8);
  attention::DeviceBackwardArgs a;
  a.dtype = c.dtype;
  a.q = DeviceView(c.q, index, qn, &temps, "attention q");
  a.k = DeviceView(c.k, index, kvn, &temps, "attention k");
  a.v = DeviceView(c.v, index, kvn, &temps, "attention v");
  a.sinks = static_cast<const float*>(DeviceView(c.sinks, index, hn, &temps, "attention sinks"));
  a.out = DeviceView(c.out, index, qn, &temps, "attention out");
  a.lse = static_cast<const float*>(DeviceView(c.lse, index, ln, &temps, "attention lse"));
  a.dOut = DeviceView(c.dOut, index, qn, &temps, "attention dOut");
  a.dLse = static_cast<const float*>(DeviceView(c.dLse, index, ln, &temps, "attention dLse"));
  DeviceOut dq(index, c.dtype, qn, "attention dq");
  DeviceOut dk(index, c.dtype, kvn, "attention dk");
  DeviceOut dv(index, c.dtype, kvn, "attention dv");
  DeviceOut dSinks(index, DType::kF32, c.sinks.given() ? hn : 0, "attention dSinks");
  a.dq = dq.ptr();
  a.dk = dk.ptr();
  a.dv = dv.ptr();
  a.dSinks = static_cast<float*>(dSinks.ptr());
  if (c.impl == Impl::kEager) {
    cb.eagerBackward(index, s, c.opts, a, c.saved ? c.saved->device.get() : nullptr);
  } else {
    cb.fusedBackward(index, s, c.opts, a);
  }
  temps.clear();
  if (c.tensors) {
    r->dqT = dq.Tensor(c.qShape);
    r->dkT = dk.Tensor(c.kShape);
    r->dvT = dv.Tensor(c.vShape);
    if (c.sinks.given()) r->dSinksT = dSinks.Tensor({s.qHeads});
  } else {
    r->dq = dq.Host("attention dq");
    r->dk = dk.Host("attention dk");
    r->dv = dv.Host("attention dv");
    if (c.sinks.given()) r->dSinks = dSinks.Host("attention dSinks");
  }
}

}  // namespace

void RunDeviceForward(const Call& c, ForwardResult* r) {
  if (c.device == kCpuDevice) {
    CpuTensorForward(c, r);
  } else {
    CudaForward(c, r);
  }
}

void RunDeviceBackward(const Call& c, BackwardResult* r) {
  if (c.device == kCpuDevice) {
    CpuTensorBackward(c, r);
  } else {
    CudaBackward(c, r);
  }
}

}  // namespace sinkflex::addon
