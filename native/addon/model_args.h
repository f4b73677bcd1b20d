// The options object of a model-op binding (model_binding.cc): reads each field naming it in
// errors, tracks the typed arrays for aliasing checks, and with `device` 'cuda' stages every
// array in device memory (once per distinct array) and copies the float arrays back after the
// op. Included by model_binding.cc only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "../core/cuda_device.h"
#include "../core/device_buffer.h"
#include "../core/errors.h"
#include "../model/ops_table.h"
#include "napi_util.h"

namespace sinkflex::addon::model_args {

using model::CpuOps;
using model::GetCudaOps;
using model::ModelOps;

constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;

/** Reads the fields of an op's options object, naming each field in errors. */
class Args {
 public:
  /**
   * The op's options; `device` ('cpu' default, 'cuda', 'cuda:k') selects the kernels: on a GPU
   * every array is copied to device memory (once per distinct array) and Finish() copies the
   * float arrays back after the op.
   */
  explicit Args(const Napi::CallbackInfo& info, bool allowDevice = true)
      : env_(info.Env()), o_(RequireObject(info[0], "options")) {
    const Napi::Value d = Get("device");
    if (IsNullish(d)) return;
    slot_ = RequireDevice(d, "device");
    if (slot_ == kCpuDevice) return;
    if (!allowDevice) throw Napi::RangeError::New(env_, "this function runs on the cpu only");
    ops_ = GetCudaOps();
    if (ops_ == nullptr) throw DeviceError("device 'cuda' is not available: this build has no CUDA model kernels");
    ops_->useDevice(slot_ - 1);
  }

  /** The kernels of the selected device. */
  const ModelOps& Ops() const { return *ops_; }
  bool OnCuda() const { return slot_ != kCpuDevice; }
  /** The CUDA device index of a GPU call (-1 on the CPU). */
  int Device() const { return slot_ == kCpuDevice ? -1 : slot_ - 1; }
  /** Copies the staged float arrays back to JavaScript memory (GPU calls; no-op on the CPU). */
  void Finish() const {
    for (const Staged& st : staged_) {
      if (st.isFloat) CopyToHost(slot_ - 1, st.host, st.device.data(), st.device.bytes());
    }
  }
  /** The host memory of a tracked Int32Array argument (for checks on the host). */
  const std::int32_t* HostI32(const char* key) const {
    const Range* r = Find(key);
    return r ? reinterpret_cast<const std::int32_t*>(r->ptr) : nullptr;
  }

  Napi::Value Get(const char* key) const { return Field(o_, key); }
  bool Has(const char* key) const { return !IsNullish(Get(key)); }

  std::int64_t Int(const char* key, std::int64_t min = 0, std::int64_t max = kMaxDim) const {
    return RequireInt(Get(key), key, min, max);
  }
  double Num(const char* key, double def) const { return Has(key) ? RequireNumber(Get(key), key) : def; }
  bool Bool(const char* key, bool def) const {
    const Napi::Value v = Get(key);
    if (IsNullish(v)) return def;
    if (!v.IsBoolean()) throw Napi::TypeError::New(env_, std::string(key) + " must be a boolean");
    return v.As<Napi::Boolean>().Value();
  }
  float* F32(const char* key, std::int64_t len) const {
    Napi::Float32Array a = RequireF32(Get(key), key, static_cast<std::size_t>(len));
    Track(key, a.Data(), a.ByteLength());
    return static_cast<float*>(Stage(a.Data(), a.ByteLength(), true));
  }
  float* OptF32(const char* key, std::int64_t len) const { return Has(key) ? F32(key, len) : nullptr; }

  /** A read-only weight array: a Float32Array, or a Uint16Array of bfloat16 bits (staged like the others on a GPU). */
  struct Weight {
    const void* ptr = nullptr;
    bool bf16 = false;
    const std::uint8_t* scales = nullptr;  // MXFP4 (ptr: the blocks)
    const float* f32() const { return static_cast<const float*>(ptr); }
    const std::uint16_t* bits() const { return static_cast<const std::uint16_t*>(ptr); }
  };
  Weight WeightArray(const char* key, std::int64_t len) const {
    const Napi::Value v = Get(key);
    if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array) {
      Napi::Uint16Array a = v.As<Napi::Uint16Array>();
      if (a.ElementLength() != static_cast<std::size_t>(len)) {
        throw Napi::RangeError::New(env_, std::string(key) + " must have " + std::to_string(len) + " elements, got " +
                                              std::to_string(a.ElementLength()));
      }
      Track(key, a.Data(), a.ByteLength());
      return {Stage(a.Data(), a.ByteLength(), false), true};  // a GPU call gets a device copy of the bits
    }
    return {F32(key, len), false};  // its TypeError names the Float32Array form
  }
  Weight OptWeightArray(const char* key, std::int64_t len) const { return Has(key) ? WeightArray(key, len) : Weight{}; }
  /**
   * A weight of `len` elements given as MXFP4 when `scalesKey` is present (`key` a Uint8Array of
   * len / 2 block bytes, `scalesKey` one of len / 32 scale bytes, both staged like the others),
   * else as WeightArray.
   */
  Weight WeightOrMxfp4(const char* key, const char* scalesKey, std::int64_t len) const {
    if (!Has(scalesKey)) return WeightArray(key, len);
    if (len % 32 != 0) throw Napi::RangeError::New(env_, std::string(key) + ": MXFP4 needs a multiple of 32 elements");
    Weight w;
    w.ptr = U8(key, len / 2);
    w.scales = U8(scalesKey, len / 32);
    return w;
  }
  /** A Uint8Array of exactly len bytes (staged like the others on a GPU). */
  std::uint8_t* U8(const char* key, std::int64_t len) const {
    const Napi::Value v = Get(key);
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      throw Napi::TypeError::New(env_, std::string(key) + " must be a Uint8Array");
    }
    Napi::Uint8Array a = v.As<Napi::Uint8Array>();
    if (a.ElementLength() != static_cast<std::size_t>(len)) {
      throw Napi::RangeError::New(env_, std::string(key) + " must have " + std::to_string(len) + " bytes, got " +
                                            std::to_string(a.ElementLength()));
    }
    Track(key, a.Data(), a.ByteLength());
    return static_cast<std::uint8_t*>(Stage(a.Data(), a.ByteLength(), false));
  }
  std::int32_t* I32(const char* key, std::int64_t len) const {
    Napi::Int32Array a = RequireI32(Get(key), key, static_cast<std::size_t>(len));
    Track(key, a.Data(), a.ByteLength());
    return static_cast<std::int32_t*>(Stage(a.Data(), a.ByteLength(), false));
  }
  std::int32_t* OptI32(const char* key, std::int64_t len) const { return Has(key) ? I32(key, len) : nullptr; }

  /** RangeError unless the two arrays are disjoint (or, with allowSame, exactly the same range). */
  void Disjoint(const char* out, const char* in, bool allowSame = false) const {
    const Range* a = Find(out);
    const Range* b = Find(in);
    if (!a || !b || a->bytes == 0 || b->bytes == 0) return;
    if (allowSame && a->ptr == b->ptr && a->bytes == b->bytes) return;
    if (a->ptr < b->ptr + b->bytes && b->ptr < a->ptr + a->bytes) {
      throw Napi::RangeError::New(
          env_, std::string(out) + (allowSame ? " must be " + std::string(in) + " itself or not overlap it"
                                              : " must not overlap " + std::string(in)));
    }
  }
  /** Disjoint(out, each of ins). */
  void DisjointAll(const char* out, std::initializer_list<const char*> ins) const {
    for (const char* in : ins) Disjoint(out, in);
  }
  std::vector<Napi::Value> Arrays() const {
    std::vector<Napi::Value> v;
    for (const Range& r : ranges_) v.push_back(Get(r.key));
    return v;
  }

 private:
  struct Range {
    const char* key;
    const char* ptr;
    std::size_t bytes;
  };
  void Track(const char* key, const void* p, std::size_t bytes) const {
    ranges_.push_back({key, static_cast<const char*>(p), bytes});
  }
  const Range* Find(const char* key) const {
    for (const Range& r : ranges_)
      if (std::string(r.key) == key) return &r;
    return nullptr;
  }
  struct Staged {
    void* host;
    DeviceBuffer<char> device;
    bool isFloat;
  };
  /** The pointer the kernels get: the host memory, or (GPU calls) its device copy. */
  void* Stage(void* host, std::size_t bytes, bool isFloat) const {
    if (slot_ == kCpuDevice || bytes == 0) return host;
    for (const Staged& st : staged_) {
      if (st.host == host && st.device.bytes() == bytes) return st.device.data();
    }
    staged_.push_back({host, DeviceBuffer<char>(slot_ - 1, bytes, "model op argument (cuda)"), isFloat});
    staged_.back().device.Upload(static_cast<const char*>(host));
    return staged_.back().device.data();
  }
  Napi::Env env_;
  Napi::Object o_;
  int slot_ = kCpuDevice;
  const ModelOps* ops_ = &CpuOps();
  mutable std::vector<Range> ranges_;
  mutable std::vector<Staged> staged_;
};

}  // namespace sinkflex::addon::model_args
