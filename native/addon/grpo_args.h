// Float arguments and results of the GRPO bindings that may live on a device: an input is a
// Float32Array or a float32 DeviceTensor ('cpu' or 'cuda:k'); a call runs on its tensors'
// device (all tensors alike) or on opts.device. Float32Arrays of a CUDA call are copied to the
// device and the result back; with DeviceTensor inputs the result is a DeviceTensor there.
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../core/device_buffer.h"
#include "../core/tensor_storage.h"

namespace sinkflex::addon {

/** One float input: a Float32Array (`host`) or a float32 DeviceTensor (`tensor`), or nothing. */
struct FloatIn {
  const float* host = nullptr;
  TensorRef tensor;
  std::size_t count = 0;
  bool given() const { return host != nullptr || tensor != nullptr; }
};

/**
 * Reads `v` as a Float32Array or float32 DeviceTensor of `count` elements (any count when
 * `count` is SIZE_MAX); `optional` accepts null/undefined. TypeError / RangeError name `name`.
 */
FloatIn ReadFloatIn(const Napi::Value& v, const std::string& name, std::size_t count, bool optional = false);

/**
 * The allocator slot a call runs on: the DeviceTensors' (all on one device, else RangeError);
 * `requested` (opts.device as a slot, or -1) must agree with them; without tensors, `requested`
 * (default cpu). Sets `*tensors` when any input is a DeviceTensor.
 */
int CallSlot(Napi::Env env, const std::vector<const FloatIn*>& inputs, int requested, bool* tensors);

/** Host and device views of the inputs of one call, with the temporaries they need. */
class Staging {
 public:
  explicit Staging(int slot) : slot_(slot) {}
  int slot() const { return slot_; }
  bool onCuda() const { return slot_ != kCpuDevice; }
  /** The input in host memory (tensors on a GPU are downloaded). Null when not given. */
  const float* Host(const FloatIn& in, const char* what);
  /** The input in the call's device memory (Float32Arrays are uploaded). Null when not given. */
  const float* Device(const FloatIn& in, const char* what);

 private:
  int slot_;
  std::vector<HostBuffer<float>> host_;
  std::vector<DeviceBuffer<float>> device_;
};

/** The float result of a call: the caller's `out` array, a new Float32Array, or a new DeviceTensor. */
struct FloatOut {
  std::size_t count = 0;
  bool tensor = false;  // return a DeviceTensor
  int slot = kCpuDevice;
  std::vector<std::int64_t> shape;
  Napi::Reference<Napi::Float32Array> given;
  float* givenData = nullptr;
  HostBuffer<float> host;
  DeviceBuffer<float> device;

  /** Host memory to write the result into (CPU calls). */
  float* HostData(const char* what);
  /** Device memory to write the result into (CUDA calls). */
  float* DeviceData(const char* what);
  /** After a CUDA call without tensors: copies the device result to the host result. */
  void Download(const char* what);
  Napi::Value ToJs(Napi::Env env);
};

/** Reads opts.out (Float32Array of `count`, not overlapping `inputs`), or nothing; RangeError with DeviceTensor calls.
 */
void SetFloatOut(FloatOut& out, const Napi::Object& opts, std::size_t count, bool tensors, int slot,
                 std::vector<std::int64_t> shape, const std::vector<const FloatIn*>& inputs);

/** opts.device as an allocator slot, or -1 when absent. */
int OptionalDeviceSlot(const Napi::Object& opts);

}  // namespace sinkflex::addon
