#include "device_tensor.h"

#include <cstdint>
#include <vector>

#include "../core/errors.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

constexpr napi_type_tag kTensorTag = {0x7c3e1f9a2b5d4e60ull, 0x91d8c4a7f0e2b356ull};
constexpr napi_type_tag kTokenTag = {0x4a9e2c71d0b85f13ull, 0x6f1b3d8e2a7c9045ull};
constexpr int kMaxRank = 8;
constexpr const char* kClassKey = "DeviceTensor";

class DeviceTensor : public Napi::ObjectWrap<DeviceTensor> {
 public:
  static Napi::Function Define(Napi::Env env) {
    std::vector<PropertyDescriptor> props = {
        InstanceAccessor<&DeviceTensor::Shape>("shape"),   InstanceAccessor<&DeviceTensor::Dtype>("dtype"),
        InstanceAccessor<&DeviceTensor::Device>("device"), InstanceAccessor<&DeviceTensor::Size>("size"),
        InstanceAccessor<&DeviceTensor::Bytes>("bytes"),   InstanceAccessor<&DeviceTensor::Disposed>("disposed"),
        InstanceMethod<&DeviceTensor::ToArray>("toArray"), InstanceMethod<&DeviceTensor::Dispose>("dispose"),
    };
    // [Symbol.dispose] = dispose, for `using` (Node >= 20.4 defines Symbol.dispose)
    const Napi::Value disposeSymbol = env.Global().Get("Symbol").As<Napi::Object>().Get("dispose");
    if (disposeSymbol.IsSymbol())
      props.push_back(InstanceMethod<&DeviceTensor::Dispose>(disposeSymbol.As<Napi::Symbol>()));
    return DefineClass(env, "DeviceTensor", props);
  }

  explicit DeviceTensor(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DeviceTensor>(info) {
    Napi::Env env = info.Env();
    if (info.Length() != 1 || !info[0].IsExternal() ||
        !info[0].As<Napi::External<TensorRef>>().CheckTypeTag(&kTokenTag)) {
      throw Napi::TypeError::New(env, "DeviceTensor cannot be constructed directly; use toDevice()");
    }
    storage_ = std::move(*info[0].As<Napi::External<TensorRef>>().Data());  // the token keeps no reference
    if (!storage_) throw Napi::TypeError::New(env, "DeviceTensor cannot be constructed directly; use toDevice()");
    slot_ = storage_->slot();
    dtype_ = storage_->dtype();
    shape_ = storage_->shape();
    count_ = storage_->count();
    if (storage_->onCpu()) {  // host bytes count towards V8's external memory (GC pressure)
      reported_ = static_cast<std::int64_t>(storage_->bytes());
      Napi::MemoryManagement::AdjustExternalMemory(env, reported_);
    }
    info.This().As<Napi::Object>().TypeTag(&kTensorTag);
  }

  ~DeviceTensor() override = default;

  void Finalize(Napi::Env env) override { Release(env); }

  const TensorRef& storage() const { return storage_; }

 private:
  void Release(Napi::Env env) {
    if (reported_) Napi::MemoryManagement::AdjustExternalMemory(env, -reported_);
    reported_ = 0;
    storage_.reset();
  }

  Napi::Value Shape(const Napi::CallbackInfo& info) {
    Napi::Array a = Napi::Array::New(info.Env(), shape_.size());
    for (std::size_t i = 0; i < shape_.size(); ++i)
      a.Set(static_cast<std::uint32_t>(i), static_cast<double>(shape_[i]));
    return a;
  }
  Napi::Value Dtype(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), DTypeName(dtype_)); }
  Napi::Value Device(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), SlotName(slot_)); }
  Napi::Value Size(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(count_));
  }
  Napi::Value Bytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(count_ * DTypeSize(dtype_)));
  }
  Napi::Value Disposed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !storage_); }

  Napi::Value ToArray(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!storage_) throw Napi::Error::New(env, "toArray() on a disposed DeviceTensor");
    try {
      HostBuffer<float> host(count_, "DeviceTensor.toArray");
      storage_->CopyToFloats(host.data());
      return AdoptF32(env, std::move(host));
    } catch (const Napi::Error&) {
      throw;
    } catch (...) {
      throw ToJsError(env, std::current_exception());
    }
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    Release(info.Env());
    return info.Env().Undefined();
  }

  TensorRef storage_;
  int slot_ = 0;
  DType dtype_ = DType::kF32;
  std::vector<std::int64_t> shape_;
  std::size_t count_ = 0;
  std::int64_t reported_ = 0;
};

std::vector<std::int64_t> RequireShape(const Napi::Value& v, const std::string& name) {
  Napi::Env env = v.Env();
  if (!v.IsArray()) throw Napi::TypeError::New(env, name + " must be an array of integers");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > static_cast<std::uint32_t>(kMaxRank)) {
    throw Napi::RangeError::New(env, name + " has " + std::to_string(a.Length()) + " dims; at most 8 are supported");
  }
  std::vector<std::int64_t> shape;
  for (std::uint32_t i = 0; i < a.Length(); ++i) {
    shape.push_back(RequireInt(a.Get(i), name + "[" + std::to_string(i) + "]", 0, std::int64_t{1} << 53));
  }
  return shape;
}

// deviceTensorFromArray(data: Float32Array, shape: number[], device: string, dtype: string)
// (dtype "float32", "bfloat16" or "float16")
Napi::Value FromArray(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Float32Array data = RequireF32(info[0], "data");
  const std::vector<std::int64_t> shape = RequireShape(info[1], "shape");
  const int slot = RequireDevice(info[2], "device");
  const std::string name = RequireEnum(info[3], "dtype", {"float32", "bfloat16", "float16"});
  const DType dtype = name == "bfloat16" ? DType::kBF16 : name == "float16" ? DType::kF16 : DType::kF32;
  const std::size_t count = TensorStorage::Count(shape);
  if (data.ElementLength() != count) {
    throw Napi::RangeError::New(env, "data has length " + std::to_string(data.ElementLength()) + " but shape " +
                                         "holds " + std::to_string(count) + " elements");
  }
  auto storage = std::make_shared<TensorStorage>(slot, dtype, shape, "DeviceTensor");
  storage->CopyFromFloats(data.Data());
  return WrapTensor(env, std::move(storage));
}

}  // namespace

std::string SlotName(int slot) { return slot == kCpuDevice ? "cpu" : "cuda:" + std::to_string(slot - 1); }

bool IsDeviceTensor(const Napi::Value& v) { return v.IsObject() && v.As<Napi::Object>().CheckTypeTag(&kTensorTag); }

TensorRef RequireTensor(const Napi::Value& v, const std::string& name) {
  if (!IsDeviceTensor(v)) throw Napi::TypeError::New(v.Env(), name + " must be a DeviceTensor");
  DeviceTensor* t = DeviceTensor::Unwrap(v.As<Napi::Object>());
  if (!t->storage()) throw Napi::Error::New(v.Env(), name + " is a disposed DeviceTensor");
  return t->storage();
}

Napi::Object WrapTensor(Napi::Env env, TensorRef storage) {
  auto token =
      Napi::External<TensorRef>::New(env, new TensorRef(std::move(storage)), [](Napi::Env, TensorRef* p) { delete p; });
  token.TypeTag(&kTokenTag);
  return GetClass(env, kClassKey).New({token});
}

void RegisterDeviceTensor(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DeviceTensor::Define(env);
  SetClass(env, kClassKey, ctor);
  exports.Set("DeviceTensor", ctor);
  Export(env, exports, "deviceTensorFromArray", FromArray);
}

}  // namespace sinkflex::addon
