// One registration function per kernel family; module.cc calls them all.
#pragma once

#include <napi.h>

namespace sinkflex::addon {

/** version info, backends, memory counters, error classes. */
void RegisterCore(Napi::Env env, Napi::Object exports);
/** GRPO advantages, broadcast, policy loss (native/grpo). */
void RegisterGrpo(Napi::Env env, Napi::Object exports);

}  // namespace sinkflex::addon
