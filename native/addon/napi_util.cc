#include "napi_util.h"

#include <cmath>
#include <map>
#include <new>

#include "../core/errors.h"

namespace sinkflex::addon {
namespace {

struct InstanceData {
  Napi::FunctionReference oomClass;
  Napi::FunctionReference deviceClass;
  std::map<std::string, Napi::FunctionReference> classes;
};

InstanceData* Data(Napi::Env env) {
  InstanceData* d = env.GetInstanceData<InstanceData>();
  if (!d) {
    d = new InstanceData();
    env.SetInstanceData<InstanceData>(d);
  }
  return d;
}

std::string TypeName(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsTypedArray()) {
    switch (v.As<Napi::TypedArray>().TypedArrayType()) {
      case napi_float32_array:
        return "Float32Array";
      case napi_float64_array:
        return "Float64Array";
      case napi_int32_array:
        return "Int32Array";
      case napi_uint8_array:
        return "Uint8Array";
      default:
        return "another typed array";
    }
  }
  if (v.IsArray()) return "an Array";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  if (v.IsBoolean()) return "a boolean";
  return "an object";
}

// An instance of the package's error class `cls` (registered by the loader), or a plain Error
// named `name` before the loader registered it; `code` says which either way.
Napi::Object NewPackageError(Napi::Env env, const Napi::FunctionReference& cls, const char* name, const char* code,
                             const char* message) {
  Napi::Object err;
  if (!cls.IsEmpty()) {
    err = cls.New({Napi::String::New(env, message)});
  } else {
    err = Napi::Error::New(env, message).Value();
    err.Set("name", name);
  }
  err.Set("code", code);
  return err;
}

Napi::Error MakeOom(Napi::Env env, const OutOfMemoryError& e) {
  Napi::Object err = NewPackageError(env, Data(env)->oomClass, "OutOfMemoryError", "ERR_SINKFLEX_OOM", e.what());
  err.Set("device", e.device());
  err.Set("requestedBytes", static_cast<double>(e.requested()));
  err.Set("currentBytes", static_cast<double>(e.current()));
  err.Set("limitBytes", e.limit() ? Napi::Value(Napi::Number::New(env, static_cast<double>(e.limit()))) : env.Null());
  return Napi::Error(env, err);
}

Napi::Error MakeDeviceError(Napi::Env env, const DeviceError& e) {
  return Napi::Error(env, NewPackageError(env, Data(env)->deviceClass, "DeviceError", "ERR_SINKFLEX_DEVICE", e.what()));
}

}  // namespace

[[noreturn]] void ThrowType(Napi::Env env, const std::string& msg) { throw Napi::TypeError::New(env, msg); }
[[noreturn]] void ThrowRange(Napi::Env env, const std::string& msg) { throw Napi::RangeError::New(env, msg); }

void OnlyFields(const Napi::Object& o, const std::string& name, std::initializer_list<const char*> allowed) {
  Napi::Array keys = o.GetPropertyNames();
  for (std::uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).ToString().Utf8Value();
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok = ok || key == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) ThrowRange(o.Env(), name + " has an unknown field '" + key + "' (allowed: " + list + ")");
  }
}

Napi::Float32Array RequireF32(const Napi::Value& v, const std::string& name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    ThrowType(v.Env(), name + " must be a Float32Array, got " + TypeName(v));
  }
  return v.As<Napi::Float32Array>();
}

Napi::Float32Array RequireF32(const Napi::Value& v, const std::string& name, std::size_t length) {
  Napi::Float32Array a = RequireF32(v, name);
  if (a.ElementLength() != length) {
    ThrowRange(v.Env(),
               name + " has length " + std::to_string(a.ElementLength()) + ", expected " + std::to_string(length));
  }
  return a;
}

Napi::Int32Array RequireI32(const Napi::Value& v, const std::string& name, std::size_t length) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    ThrowType(v.Env(), name + " must be an Int32Array, got " + TypeName(v));
  }
  Napi::Int32Array a = v.As<Napi::Int32Array>();
  if (a.ElementLength() != length) {
    ThrowRange(v.Env(),
               name + " has length " + std::to_string(a.ElementLength()) + ", expected " + std::to_string(length));
  }
  return a;
}

bool OptionalF32(const Napi::Value& v, const std::string& name, std::size_t length, Napi::Float32Array* out) {
  if (IsNullish(v)) return false;
  *out = RequireF32(v, name, length);
  return true;
}

std::int64_t RequireInt(const Napi::Value& v, const std::string& name, std::int64_t min, std::int64_t max) {
  if (!v.IsNumber()) ThrowType(v.Env(), name + " must be an integer, got " + TypeName(v));
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::floor(d) != d)
    ThrowRange(v.Env(), name + " must be an integer, got " + std::to_string(d));
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    ThrowRange(v.Env(), name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                            std::to_string(static_cast<long long>(d)));
  }
  return static_cast<std::int64_t>(d);
}

double RequireNumber(const Napi::Value& v, const std::string& name) {
  if (!v.IsNumber()) ThrowType(v.Env(), name + " must be a number, got " + TypeName(v));
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d)) ThrowRange(v.Env(), name + " must be finite");
  return d;
}

Napi::Object RequireObject(const Napi::Value& v, const std::string& name) {
  if (!v.IsObject() || v.IsArray() || v.IsTypedArray())
    ThrowType(v.Env(), name + " must be an object, got " + TypeName(v));
  return v.As<Napi::Object>();
}

std::string RequireString(const Napi::Value& v, const std::string& name) {
  if (!v.IsString()) ThrowType(v.Env(), name + " must be a string, got " + TypeName(v));
  return v.As<Napi::String>().Utf8Value();
}

std::string RequireEnum(const Napi::Value& v, const std::string& name, std::initializer_list<const char*> allowed) {
  const std::string s = RequireString(v, name);
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += (list.empty() ? "'" : ", '") + std::string(a) + "'";
  }
  ThrowRange(v.Env(), name + " must be one of " + list + ", got '" + s + "'");
}

bool IsNullish(const Napi::Value& v) { return v.IsUndefined() || v.IsNull(); }

Napi::Value Field(const Napi::Object& obj, const char* key) {
  return obj.Has(key) ? obj.Get(key) : obj.Env().Undefined();
}

Napi::Error ToJsError(Napi::Env env, std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const Napi::Error& e) {
    return e;
  } catch (const OutOfMemoryError& e) {
    return MakeOom(env, e);
  } catch (const DeviceError& e) {
    return MakeDeviceError(env, e);
  } catch (const ArgumentError& e) {
    return Napi::RangeError::New(env, e.what());
  } catch (const std::bad_alloc&) {
    return MakeOom(env, OutOfMemoryError("cpu", 0, GetMemoryStats(kCpuDevice).current, 0, "an internal allocation"));
  } catch (const std::exception& e) {
    return Napi::Error::New(env, e.what());
  } catch (...) {
    return Napi::Error::New(env, "unknown native error");
  }
}

Napi::Function MakeFunction(Napi::Env env, const char* name, Napi::Value (*fn)(const Napi::CallbackInfo&)) {
  return Napi::Function::New(
      env, [fn](const Napi::CallbackInfo& info) -> Napi::Value { return Guarded(info, [&] { return fn(info); }); },
      name);
}

void Export(Napi::Env env, Napi::Object exports, const char* name, Napi::Value (*fn)(const Napi::CallbackInfo&)) {
  exports.Set(name, MakeFunction(env, name, fn));
}

void SetJsErrorClasses(Napi::Env env, Napi::Function outOfMemory, Napi::Function device) {
  Data(env)->oomClass = Napi::Persistent(outOfMemory);
  Data(env)->deviceClass = Napi::Persistent(device);
}

void SetClass(Napi::Env env, const std::string& key, Napi::Function ctor) {
  Data(env)->classes[key] = Napi::Persistent(ctor);
}

Napi::Function GetClass(Napi::Env env, const std::string& key) {
  auto& classes = Data(env)->classes;
  auto it = classes.find(key);
  if (it == classes.end()) throw Napi::Error::New(env, "native class " + key + " is not registered");
  return it->second.Value();
}

Napi::Float32Array AdoptF32(Napi::Env env, HostBuffer<float>&& buf) {
  const std::size_t count = buf.size();
  if (count == 0) return Napi::Float32Array::New(env, 0);
  float* ptr = buf.release();
  const std::size_t bytes = count * sizeof(float);
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ptr, bytes, [bytes](Napi::Env finalEnv, void* p) {
    HostFree(p, bytes);
    Napi::MemoryManagement::AdjustExternalMemory(finalEnv, -static_cast<std::int64_t>(bytes));
  });
  Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<std::int64_t>(bytes));
  return Napi::Float32Array::New(env, count, ab, 0);
}

Napi::Float32Array NewTrackedF32(Napi::Env env, std::size_t count, const char* what) {
  return AdoptF32(env, HostBuffer<float>(count, what));
}

AsyncTask::AsyncTask(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done,
                     const std::vector<Napi::Value>& keepAlive)
    : Napi::AsyncWorker(env, "sinkflex:task"),
      deferred_(Napi::Promise::Deferred::New(env)),
      work_(std::move(work)),
      done_(std::move(done)) {
  for (const Napi::Value& v : keepAlive) refs_.push_back(Napi::Persistent(v));
}

Napi::Promise AsyncTask::Run(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done,
                             const std::vector<Napi::Value>& keepAlive) {
  auto* task = new AsyncTask(env, std::move(work), std::move(done), keepAlive);
  Napi::Promise p = task->Promise();
  task->Queue();
  return p;
}

void AsyncTask::Execute() {
  try {
    work_();
  } catch (...) {
    error_ = std::current_exception();
    SetError("native task failed");
  }
}

void AsyncTask::OnOK() {
  Napi::Env env = Env();
  try {
    deferred_.Resolve(done_(env));
  } catch (const Napi::Error& e) {
    deferred_.Reject(e.Value());
  } catch (...) {
    deferred_.Reject(ToJsError(env, std::current_exception()).Value());
  }
}

void AsyncTask::OnError(const Napi::Error& e) {
  Napi::Env env = Env();
  deferred_.Reject(error_ ? ToJsError(env, error_).Value() : e.Value());
}

}  // namespace sinkflex::addon

#include "../core/cuda_device.h"

namespace sinkflex::addon {

int RequireDevice(const Napi::Value& v, const std::string& name) {
  const std::string s = RequireString(v, name);
  if (s == "cpu") return kCpuDevice;
  int index = -1;
  if (s == "cuda") {
    index = 0;
  } else if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 8 &&
             s.find_first_not_of("0123456789", 5) == std::string::npos) {
    index = std::stoi(s.substr(5));
  } else {
    throw Napi::RangeError::New(v.Env(), name + " must be 'cpu', 'cuda' or 'cuda:<index>', got '" + s + "'");
  }
  if (index >= static_cast<int>(CudaDevices().size())) {
    const std::string reason = CudaDevices().empty() ? CudaUnavailableReason()
                                                     : std::to_string(CudaDevices().size()) + " CUDA device(s) present";
    throw ToJsError(v.Env(), std::make_exception_ptr(DeviceError("device '" + s + "' is not available: " + reason)));
  }
  return index + 1;
}

}  // namespace sinkflex::addon
