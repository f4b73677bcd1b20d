// Entry point of the sinkflex native addon.
#include <napi.h>

#include "bindings.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  sinkflex::addon::RegisterCore(env, exports);
  sinkflex::addon::RegisterDeviceTensor(env, exports);
  sinkflex::addon::RegisterAttention(env, exports);
  sinkflex::addon::RegisterModel(env, exports);
  sinkflex::addon::RegisterGrpo(env, exports);
  sinkflex::addon::RegisterTransformer(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(sinkflex, Init)
