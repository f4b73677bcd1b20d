// What the model bindings share across files: the model configuration parser
// (model_binding.cc) and the ParamStore handles (model_store_binding.cc), used by the
// ParamStore and Transformer classes.
#pragma once

#include <napi.h>

#include <memory>
#include <string>

#include "../model/model_config.h"
#include "../model/param_store.h"

namespace sinkflex::addon {

/** Reads a model configuration object (TypeError / RangeError naming the field). */
model::ModelConfig ParseModelConfig(const Napi::Value& v, const std::string& name);

/** Reads a RoPE scaling object or null (TypeError / RangeError naming the field). */
model::RopeScaling ParseRopeScaling(const Napi::Value& v, const std::string& name);

/** The native store of a ParamStore handle (TypeError naming `name` when `v` is not one). */
std::shared_ptr<model::ParamStore> UnwrapParamStore(const Napi::Value& v, const std::string& name);

}  // namespace sinkflex::addon
