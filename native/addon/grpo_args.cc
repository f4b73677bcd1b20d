#include "grpo_args.h"

#include <limits>

#include "device_tensor.h"
#include "napi_util.h"

namespace sinkflex::addon {

FloatIn ReadFloatIn(const Napi::Value& v, const std::string& name, std::size_t count, bool optional) {
  FloatIn in;
  if (optional && IsNullish(v)) return in;
  const bool any = count == std::numeric_limits<std::size_t>::max();
  if (IsDeviceTensor(v)) {
    in.tensor = RequireTensor(v, name);
    if (in.tensor->dtype() != DType::kF32) {
      throw Napi::TypeError::New(v.Env(),
                                 name + " must be a float32 DeviceTensor, got " + DTypeName(in.tensor->dtype()));
    }
    in.count = in.tensor->count();
    if (!any && in.count != count) {
      throw Napi::RangeError::New(
          v.Env(), name + " has " + std::to_string(in.count) + " elements, expected " + std::to_string(count));
    }
    return in;
  }
  const Napi::Float32Array a = any ? RequireF32(v, name) : RequireF32(v, name, count);
  in.host = a.Data();
  in.count = a.ElementLength();
  return in;
}

int CallSlot(Napi::Env env, const std::vector<const FloatIn*>& inputs, int requested, bool* tensors) {
  int slot = -1;
  *tensors = false;
  for (const FloatIn* in : inputs) {
    if (!in->tensor) continue;
    *tensors = true;
    if (slot >= 0 && in->tensor->slot() != slot) {
      throw Napi::RangeError::New(env, "the DeviceTensor arguments are on different devices (" + SlotName(slot) +
                                           " and " + SlotName(in->tensor->slot()) + ")");
    }
    slot = in->tensor->slot();
  }
  if (slot < 0) return requested < 0 ? kCpuDevice : requested;
  if (requested >= 0 && requested != slot) {
    throw Napi::RangeError::New(
        env, "opts.device is " + SlotName(requested) + " but the DeviceTensor arguments are on " + SlotName(slot));
  }
  return slot;
}

const float* Staging::Host(const FloatIn& in, const char* what) {
  if (!in.given()) return nullptr;
  if (in.host) return in.host;
  if (in.tensor->onCpu()) return static_cast<const float*>(in.tensor->data());
  host_.emplace_back(in.count, what);
  in.tensor->CopyToFloats(host_.back().data());
  return host_.back().data();
}

const float* Staging::Device(const FloatIn& in, const char* what) {
  if (!in.given()) return nullptr;
  if (in.tensor && in.tensor->slot() == slot_) return static_cast<const float*>(in.tensor->data());
  const float* src = Host(in, what);
  device_.emplace_back(slot_ - 1, in.count, what);
  device_.back().Upload(src);
  return device_.back().data();
}

float* FloatOut::HostData(const char* what) {
  if (givenData) return givenData;
  host = HostBuffer<float>(count, what);
  return host.data();
}

float* FloatOut::DeviceData(const char* what) {
  device = DeviceBuffer<float>(slot - 1, count, what);
  return device.data();
}

void FloatOut::Download(const char* what) {
  if (tensor) return;
  device.Download(HostData(what));
  device.reset();
}

Napi::Value FloatOut::ToJs(Napi::Env env) {
  if (tensor) {
    if (slot == kCpuDevice) return WrapTensor(env, std::make_shared<TensorStorage>(std::move(host), shape));
    return WrapTensor(env, std::make_shared<TensorStorage>(std::move(device), shape));
  }
  if (givenData) return given.Value();
  return AdoptF32(env, std::move(host));
}

namespace {
bool Overlaps(const Napi::TypedArray& a, const float* p, std::size_t count) {
  const char* pa = static_cast<const char*>(a.ArrayBuffer().Data()) + a.ByteOffset();
  const char* pb = reinterpret_cast<const char*>(p);
  return pa < pb + count * sizeof(float) && pb < pa + a.ByteLength();
}
}  // namespace

void SetFloatOut(FloatOut& out, const Napi::Object& opts, std::size_t count, bool tensors, int slot,
                 std::vector<std::int64_t> shape, const std::vector<const FloatIn*>& inputs) {
  out.count = count;
  out.tensor = tensors;
  out.slot = slot;
  out.shape = std::move(shape);
  Napi::Float32Array arr;
  if (!OptionalF32(Field(opts, "out"), "out", count, &arr)) return;
  if (tensors) throw Napi::RangeError::New(opts.Env(), "out cannot be used with DeviceTensor arguments");
  for (const FloatIn* in : inputs) {
    if (in->host && Overlaps(arr, in->host, in->count)) {
      throw Napi::RangeError::New(opts.Env(), "out must not overlap an input array");
    }
  }
  out.given = Napi::Persistent(arr);
  out.givenData = arr.Data();
}

int OptionalDeviceSlot(const Napi::Object& opts) {
  const Napi::Value v = Field(opts, "device");
  if (IsNullish(v)) return -1;
  return RequireDevice(v, "device");
}

}  // namespace sinkflex::addon
