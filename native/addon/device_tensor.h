// The JS DeviceTensor handle (a Napi::ObjectWrap over a shared TensorStorage): a tensor that
// stays on its device ('cpu' host memory or 'cuda:k' device memory) between calls, counted by
// the tracked allocator of that device. JavaScript creates one with
// `deviceTensorFromArray(data, shape, device, dtype)` (lib/native toDevice), reads it back with
// `toArray()` (an explicit copy to the host) and frees it with `dispose()` (or at GC).
// Bindings accept them through RequireTensor and return new ones through WrapTensor.
#pragma once

#include <napi.h>

#include <string>

#include "../core/tensor_storage.h"

namespace sinkflex::addon {

/** Registers the DeviceTensor class and deviceTensorFromArray. */
void RegisterDeviceTensor(Napi::Env env, Napi::Object exports);

/** True when `v` is a DeviceTensor (disposed or not). */
bool IsDeviceTensor(const Napi::Value& v);

/**
 * The storage of DeviceTensor `v`: TypeError (naming `name`) when `v` is not a DeviceTensor,
 * Error when it was disposed.
 */
TensorRef RequireTensor(const Napi::Value& v, const std::string& name);

/** A new DeviceTensor handle owning (a reference to) `storage`. */
Napi::Object WrapTensor(Napi::Env env, TensorRef storage);

/** "cpu" or "cuda:<k>" for an allocator slot. */
std::string SlotName(int slot);

}  // namespace sinkflex::addon
