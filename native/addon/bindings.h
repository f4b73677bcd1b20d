// One registration function per kernel family; module.cc calls them all.
#pragma once

#include <napi.h>

namespace sinkflex::addon {

/** version info, backends, memory counters, error classes. */
void RegisterCore(Napi::Env env, Napi::Object exports);
/** DeviceTensor handles (tensors that stay on a device between calls). */
void RegisterDeviceTensor(Napi::Env env, Napi::Object exports);
/** sink attention: forward/backward (sync and async), masks, block masks. */
void RegisterAttention(Napi::Env env, Napi::Object exports);
/** model ops (GEMM, norms, RoPE, SwiGLU, embedding, log-softmax, AdamW) and ParamStore. */
void RegisterModel(Napi::Env env, Napi::Object exports);
/** the ParamStore class (model_store_binding.cc; RegisterModel calls it). */
void RegisterParamStore(Napi::Env env, Napi::Object exports);
/** the MoE op bindings (model_moe_binding.cc; RegisterModel calls it). */
void RegisterMoe(Napi::Env env, Napi::Object exports);
/** GRPO advantages, broadcast, policy loss (native/grpo). */
void RegisterGrpo(Napi::Env env, Napi::Object exports);
/** the built-in transformer: Transformer (training forward/backward, generation runs) and TransformerSession. */
void RegisterTransformer(Napi::Env env, Napi::Object exports);

}  // namespace sinkflex::addon
