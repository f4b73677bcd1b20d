// Bindings of native/core: build information, backends, memory counters, error classes.
#include <thread>

#include "../core/allocator.h"
#include "../core/cpu_features.h"
#include "../core/cuda_device.h"
#include "../core/thread_pool.h"
#include "bindings.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

#ifndef SINKFLEX_VERSION
#error "SINKFLEX_VERSION must be defined by the build (binding.gyp / CMakeLists.txt)"
#endif

Napi::Value Version(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), SINKFLEX_VERSION); }

Napi::Value BuildInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("version", SINKFLEX_VERSION);
  o.Set("napiVersion", NAPI_VERSION);
  o.Set("cudaCompiled", CudaCompiled());
#if defined(__clang__)
  o.Set("compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
  o.Set("compiler", "gcc " __VERSION__);
#else
  o.Set("compiler", "unknown");
#endif
  return o;
}

Napi::Value Backends(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array list = Napi::Array::New(env);
  Napi::Object cpu = Napi::Object::New(env);
  cpu.Set("name", "cpu");
  cpu.Set("device", "cpu");
  cpu.Set("threads", ThreadPool::Global().size());
  cpu.Set("hardwareConcurrency", static_cast<double>(std::thread::hardware_concurrency()));
  Napi::Array feats = Napi::Array::New(env);
  for (const std::string& f : CpuFeatureNames()) feats.Set(feats.Length(), f);
  cpu.Set("features", feats);
  list.Set(0u, cpu);
  for (const CudaDeviceInfo& d : CudaDevices()) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", "cuda");
    o.Set("device", "cuda:" + std::to_string(d.index));
    o.Set("index", d.index);
    o.Set("deviceName", d.name);
    o.Set("totalMemory", static_cast<double>(d.totalMemory));
    o.Set("computeCapability", std::to_string(d.major) + "." + std::to_string(d.minor));
    o.Set("multiProcessors", d.multiProcessors);
    list.Set(list.Length(), o);
  }
  return list;
}

Napi::Value CudaStatus(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("compiled", CudaCompiled());
  o.Set("devices", static_cast<double>(CudaDevices().size()));
  o.Set("reason", CudaUnavailableReason());
  return o;
}

Napi::Value MemoryStatsOf(const Napi::CallbackInfo& info) {
  const int device = RequireDevice(info[0], "device");
  const MemoryStats s = GetMemoryStats(device);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("currentBytes", static_cast<double>(s.current));
  o.Set("peakBytes", static_cast<double>(s.peak));
  o.Set("limitBytes",
        s.limit ? Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(s.limit))) : info.Env().Null());
  return o;
}

Napi::Value ResetPeakOf(const Napi::CallbackInfo& info) {
  ResetPeak(RequireDevice(info[0], "device"));
  return info.Env().Undefined();
}

Napi::Value SetLimitOf(const Napi::CallbackInfo& info) {
  const int device = RequireDevice(info[0], "device");
  std::size_t bytes = 0;
  if (!IsNullish(info[1])) {
    bytes = static_cast<std::size_t>(RequireInt(info[1], "bytes", 1, (std::int64_t{1} << 53)));
  }
  SetLimit(device, bytes);
  return info.Env().Undefined();
}

// Allocates a tracked Float32Array of `count` elements; used by tests of the allocator's
// limit and by callers that want output buffers counted as native memory.
Napi::Value AllocTracked(const Napi::CallbackInfo& info) {
  const std::int64_t count = RequireInt(info[0], "count", 0, (std::int64_t{1} << 40));
  return NewTrackedF32(info.Env(), static_cast<std::size_t>(count), "allocTracked");
}

Napi::Value SetErrorClasses(const Napi::CallbackInfo& info) {
  Napi::Object o = RequireObject(info[0], "classes");
  Napi::Value oom = Field(o, "OutOfMemoryError");
  if (!oom.IsFunction()) throw Napi::TypeError::New(info.Env(), "classes.OutOfMemoryError must be a class");
  Napi::Value device = Field(o, "DeviceError");
  if (!device.IsFunction()) throw Napi::TypeError::New(info.Env(), "classes.DeviceError must be a class");
  SetJsErrorClasses(info.Env(), oom.As<Napi::Function>(), device.As<Napi::Function>());
  return info.Env().Undefined();
}

}  // namespace

void RegisterCore(Napi::Env env, Napi::Object exports) {
  Export(env, exports, "version", Version);
  Export(env, exports, "buildInfo", BuildInfo);
  Export(env, exports, "backends", Backends);
  Export(env, exports, "cudaStatus", CudaStatus);
  Export(env, exports, "memoryStats", MemoryStatsOf);
  Export(env, exports, "resetPeak", ResetPeakOf);
  Export(env, exports, "setLimit", SetLimitOf);
  Export(env, exports, "allocTracked", AllocTracked);
  Export(env, exports, "setErrorClasses", SetErrorClasses);
}

}  // namespace sinkflex::addon
