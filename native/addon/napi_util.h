// Helpers shared by every binding: argument validation that throws TypeError/RangeError
// naming the argument, conversion of native exceptions into JavaScript errors, tracked
// output arrays, and Promise-returning tasks that run off the main thread.
#pragma once

#include <napi.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "../core/allocator.h"

namespace sinkflex::addon {

// ---- argument validation -------------------------------------------------------------

/** `v` must be a Float32Array (TypeError otherwise). */
Napi::Float32Array RequireF32(const Napi::Value& v, const std::string& name);
/** Like RequireF32 with a required element count (RangeError when it differs). */
Napi::Float32Array RequireF32(const Napi::Value& v, const std::string& name, std::size_t length);
/** `v` must be an Int32Array of `length` elements. */
Napi::Int32Array RequireI32(const Napi::Value& v, const std::string& name, std::size_t length);
/** null/undefined → empty; otherwise a Float32Array of `length` elements. */
bool OptionalF32(const Napi::Value& v, const std::string& name, std::size_t length, Napi::Float32Array* out);
/** An integer number in [min, max]. */
std::int64_t RequireInt(const Napi::Value& v, const std::string& name, std::int64_t min, std::int64_t max);
/** A finite number. */
double RequireNumber(const Napi::Value& v, const std::string& name);
Napi::Object RequireObject(const Napi::Value& v, const std::string& name);
std::string RequireString(const Napi::Value& v, const std::string& name);
/** A string among `allowed` (RangeError listing them otherwise). */
std::string RequireEnum(const Napi::Value& v, const std::string& name, std::initializer_list<const char*> allowed);
bool IsNullish(const Napi::Value& v);
/** obj[key] or undefined when obj lacks it. */
Napi::Value Field(const Napi::Object& obj, const char* key);
/**
 * Rejects fields of `o` outside `allowed` (RangeError naming the field and listing the allowed
 * ones), so that a misspelt option is not silently ignored.
 */
void OnlyFields(const Napi::Object& o, const std::string& name, std::initializer_list<const char*> allowed);
/** Throws a RangeError with `msg`. */
[[noreturn]] void ThrowRange(Napi::Env env, const std::string& msg);
/** Throws a TypeError with `msg`. */
[[noreturn]] void ThrowType(Napi::Env env, const std::string& msg);

// ---- errors -----------------------------------------------------------------------------

/**
 * Converts the exception in `ep` into the matching JavaScript error object (the one place
 * where native errors become JavaScript ones): ArgumentError → RangeError, OutOfMemoryError →
 * the package's OutOfMemoryError (code ERR_SINKFLEX_OOM), DeviceError → the package's
 * DeviceError (code ERR_SINKFLEX_DEVICE), a JavaScript error as it is, anything else → Error.
 */
Napi::Error ToJsError(Napi::Env env, std::exception_ptr ep);

/**
 * Runs `fn` (which returns a Napi::Value) so that a native exception becomes the matching
 * JavaScript exception ({@link ToJsError}); for ObjectWrap constructors and methods, which
 * node-addon-api does not convert (MakeFunction does this for plain functions).
 */
template <typename Fn>
Napi::Value Guarded(const Napi::CallbackInfo& info, Fn&& fn) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw ToJsError(info.Env(), std::current_exception());
  }
}

/** Wraps a binding so that native exceptions become JavaScript exceptions (see ToJsError). */
Napi::Function MakeFunction(Napi::Env env, const char* name, Napi::Value (*fn)(const Napi::CallbackInfo&));

/** Registers a guarded function as exports[name]. */
void Export(Napi::Env env, Napi::Object exports, const char* name, Napi::Value (*fn)(const Napi::CallbackInfo&));

/** Stores the JavaScript OutOfMemoryError and DeviceError classes used by ToJsError (the loader calls this once). */
void SetJsErrorClasses(Napi::Env env, Napi::Function outOfMemory, Napi::Function device);

/** Keeps a native class constructor (e.g. an ObjectWrap) per environment under `key`. */
void SetClass(Napi::Env env, const std::string& key, Napi::Function ctor);
/** The constructor stored under `key` (Error when none was registered). */
Napi::Function GetClass(Napi::Env env, const std::string& key);

// ---- outputs ----------------------------------------------------------------------------

/**
 * Hands a tracked host buffer to JavaScript as a Float32Array without copying; its bytes stay
 * counted by the tracked allocator until the array is garbage collected.
 */
Napi::Float32Array AdoptF32(Napi::Env env, HostBuffer<float>&& buf);
/** A tracked, uninitialised Float32Array of `count` elements. */
Napi::Float32Array NewTrackedF32(Napi::Env env, std::size_t count, const char* what);

// ---- async ------------------------------------------------------------------------------

/**
 * Runs `work` on a libuv thread (which may fan out to the kernel thread pool) and settles a
 * Promise: resolved with `done(env)` on the JS thread, rejected with the converted error.
 * `keepAlive` values (the input arrays) are referenced until the task settles.
 */
class AsyncTask : public Napi::AsyncWorker {
 public:
  AsyncTask(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done,
            const std::vector<Napi::Value>& keepAlive);
  Napi::Promise Promise() { return deferred_.Promise(); }
  /** Creates, queues and returns the promise of a task. */
  static Napi::Promise Run(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done,
                           const std::vector<Napi::Value>& keepAlive);

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  Napi::Promise::Deferred deferred_;
  std::function<void()> work_;
  std::function<Napi::Value(Napi::Env)> done_;
  std::vector<Napi::Reference<Napi::Value>> refs_;
  std::exception_ptr error_;
};

}  // namespace sinkflex::addon

namespace sinkflex::addon {
/**
 * Parses a device argument: "cpu", "cuda" (= "cuda:0") or "cuda:<k>" → allocator slot
 * (0 = cpu, 1 + k = cuda:k). A CUDA device that is not available throws an Error giving why.
 */
int RequireDevice(const Napi::Value& v, const std::string& name);
}  // namespace sinkflex::addon
