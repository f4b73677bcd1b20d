#include "model_config.h"

#include <cmath>
#include <string>

#include "../core/errors.h"

namespace sinkflex::model {
namespace {

void RequireRange(const char* name, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) {
    throw ArgumentError(std::string("config.") + name + " must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + std::to_string(v));
  }
}

}  // namespace

const char* LoraTargetName(LoraTarget t) {
  static const char* const kNames[kLoraTargets] = {"q_proj",           "k_proj",  "v_proj",    "o_proj",
                                                   "gate_proj",        "up_proj", "down_proj", "experts.gate_up_proj",
                                                   "experts.down_proj"};
  return kNames[static_cast<int>(t)];
}

double LoraSettings::Scale() const {
  const double r = static_cast<double>(rank);
  return rslora ? alpha / std::sqrt(r) : alpha / r;
}

std::pair<std::int64_t, std::int64_t> LoraShape(const ModelConfig& c, LoraTarget t) {
  const std::int64_t q = c.heads * c.headDim, kv = c.kvHeads * c.headDim;
  switch (t) {
    case LoraTarget::kQ:
      return {c.width, q};
    case LoraTarget::kK:
    case LoraTarget::kV:
      return {c.width, kv};
    case LoraTarget::kO:
      return {q, c.width};
    case LoraTarget::kGate:
    case LoraTarget::kUp:
      return {c.width, c.ffn};
    case LoraTarget::kDown:
      return {c.ffn, c.width};
    case LoraTarget::kExpertsGateUp:
      return {c.width, 2 * c.ffn};
    case LoraTarget::kExpertsDown:
      return {c.ffn, c.width};
  }
  return {0, 0};
}

std::string LoraPrefix(std::int64_t layer, LoraTarget t) {
  static const char* const kModules[kLoraTargets] = {"attn.q",          "attn.k", "attn.v",   "attn.o",
                                                     "mlp.gate",        "mlp.up", "mlp.down", "mlp.experts.gate_up",
                                                     "mlp.experts.down"};
  return "layers." + std::to_string(layer) + "." + kModules[static_cast<int>(t)];
}

void ModelConfig::Validate() const {
  RequireRange("layers", layers, 1, 1024);
  RequireRange("width", width, 1, 1 << 16);
  RequireRange("heads", heads, 1, 1024);
  RequireRange("kvHeads", kvHeads, 1, heads);
  if (heads % kvHeads != 0) {
    throw ArgumentError("config.kvHeads (" + std::to_string(kvHeads) + ") must divide config.heads (" +
                        std::to_string(heads) + ")");
  }
  RequireRange("headDim", headDim, 2, 1024);
  if (headDim % 2 != 0) throw ArgumentError("config.headDim must be even (RoPE), got " + std::to_string(headDim));
  RequireRange("vocab", vocab, 2, 1 << 24);
  RequireRange("context", context, 1, 1 << 24);
  RequireRange("window", window, 0, context);
  RequireRange("ffn", ffn, 1, 1 << 18);
  if (!(std::isfinite(ropeTheta) && ropeTheta > 1.0))
    throw ArgumentError("config.ropeTheta must be a finite number > 1");
  if (!(std::isfinite(normEps) && normEps > 0.0 && normEps < 1.0))
    throw ArgumentError("config.normEps must be in (0, 1)");
  if (!(std::isfinite(initStd) && initStd > 0.0 && initStd < 10.0))
    throw ArgumentError("config.initStd must be in (0, 10)");
  if (!(swiglu.alpha > 0.0f && std::isfinite(swiglu.alpha)) || !(swiglu.limit >= 0.0f && std::isfinite(swiglu.limit)) ||
      !std::isfinite(swiglu.upBias)) {
    throw ArgumentError("config.swiglu has invalid parameters");
  }
  if (!layerTypes.empty()) {
    if (static_cast<std::int64_t>(layerTypes.size()) != layers) {
      throw ArgumentError("config.layerTypes must have one entry per layer (" + std::to_string(layers) + "), got " +
                          std::to_string(layerTypes.size()));
    }
    for (std::size_t l = 0; l < layerTypes.size(); ++l) {
      if (layerTypes[l] == LayerType::kSliding && window < 1) {
        throw ArgumentError("config.layerTypes[" + std::to_string(l) + "] is 'sliding' but config.window is 0");
      }
    }
  }
  RequireRange("experts", experts, 0, 1 << 16);
  if (experts == 0) {
    if (expertsPerToken != 0) {
      throw ArgumentError("config.expertsPerToken must be 0 without experts, got " + std::to_string(expertsPerToken));
    }
  } else {
    RequireRange("expertsPerToken", expertsPerToken, 1, experts);
  }
  ropeScaling.Validate("config.ropeScaling");
  if (tokenShift && (lora.rank != 0 || lora.targets != 0)) {
    throw ArgumentError(
        "config.tokenShift cannot be combined with config.lora (LoRA adapts pretrained models, which have "
        "no token shift)");
  }
  if (lora.rank != 0 || lora.targets != 0) {
    RequireRange("lora.rank", lora.rank, 1, 1 << 16);
    if (!std::isfinite(lora.alpha)) throw ArgumentError("config.lora.alpha must be a finite number");
    if (lora.targets == 0) throw ArgumentError("config.lora.targets must name at least one module");
    if (lora.targets >> kLoraTargets) throw ArgumentError("config.lora.targets has unknown target bits");
    if (experts > 0) {
      for (LoraTarget t : {LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown}) {
        if (lora.Has(t)) {
          throw ArgumentError(std::string("config.lora.targets: '") + LoraTargetName(t) +
                              "' is an MLP projection, but this config's MLP is a mixture of experts (experts = " +
                              std::to_string(experts) +
                              "); LoRA on experts is not supported: target the attention projections (q_proj, k_proj, "
                              "v_proj, o_proj) or the experts (experts.gate_up_proj, experts.down_proj)");
        }
      }
    } else {
      for (LoraTarget t : {LoraTarget::kExpertsGateUp, LoraTarget::kExpertsDown}) {
        if (lora.Has(t)) {
          throw ArgumentError(
              std::string("config.lora.targets: '") + LoraTargetName(t) +
              "' adapts the experts of a mixture of experts, but this config has a dense MLP (experts = 0)");
        }
      }
    }
  }
}

std::vector<ParamSpec> ParamLayout(const ModelConfig& c) {
  c.Validate();
  std::vector<ParamSpec> specs;
  const double outStd = c.initStd / std::sqrt(2.0 * static_cast<double>(c.layers));
  auto tensor = [&](std::string name, std::vector<std::int64_t> shape, double std) {
    specs.push_back({std::move(name), std::move(shape), ParamInit::kNormal, std, true});
  };
  auto matrix = [&](std::string name, std::int64_t rows, std::int64_t cols, double std) {
    tensor(std::move(name), {rows, cols}, std);
  };
  auto vector = [&](std::string name, std::vector<std::int64_t> shape, ParamInit init) {
    specs.push_back({std::move(name), std::move(shape), init, 0.0, false});
  };
  const std::int64_t q = c.heads * c.headDim, kv = c.kvHeads * c.headDim, E = c.experts, F = c.ffn, D = c.width;
  matrix("embed.weight", c.vocab, D, c.initStd);
  if (c.tokenShift) matrix("token_shift.weight", D, D, c.initStd);
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    vector(p + "attn_norm.weight", {D}, ParamInit::kOnes);
    matrix(p + "attn.q.weight", q, D, c.initStd);
    if (c.qkvBias) vector(p + "attn.q.bias", {q}, ParamInit::kZeros);
    matrix(p + "attn.k.weight", kv, D, c.initStd);
    if (c.qkvBias) vector(p + "attn.k.bias", {kv}, ParamInit::kZeros);
    matrix(p + "attn.v.weight", kv, D, c.initStd);
    if (c.qkvBias) vector(p + "attn.v.bias", {kv}, ParamInit::kZeros);
    if (c.qkNorm) {
      vector(p + "attn.q_norm.weight", {c.headDim}, ParamInit::kOnes);
      vector(p + "attn.k_norm.weight", {c.headDim}, ParamInit::kOnes);
    }
    matrix(p + "attn.o.weight", D, q, outStd);
    if (c.oBias) vector(p + "attn.o.bias", {D}, ParamInit::kZeros);
    if (c.sinks) vector(p + "attn.sinks", {c.heads}, ParamInit::kZeros);
    vector(p + "mlp_norm.weight", {D}, ParamInit::kOnes);
    if (E == 0) {
      matrix(p + "mlp.gate_up.weight", 2 * F, D, c.initStd);
      if (c.mlpBias) vector(p + "mlp.gate_up.bias", {2 * F}, ParamInit::kZeros);
      matrix(p + "mlp.down.weight", D, F, outStd);
      if (c.mlpBias) vector(p + "mlp.down.bias", {D}, ParamInit::kZeros);
    } else {
      matrix(p + "mlp.router.weight", E, D, c.initStd);
      if (c.mlpBias) vector(p + "mlp.router.bias", {E}, ParamInit::kZeros);
      tensor(p + "mlp.experts.gate_up.weight", {E, 2 * F, D}, c.initStd);
      if (c.mlpBias) vector(p + "mlp.experts.gate_up.bias", {E, 2 * F}, ParamInit::kZeros);
      tensor(p + "mlp.experts.down.weight", {E, D, F}, outStd);
      if (c.mlpBias) vector(p + "mlp.experts.down.bias", {E, D}, ParamInit::kZeros);
    }
  }
  vector("norm.weight", {D}, ParamInit::kOnes);
  if (!c.tieEmbeddings) matrix("lm_head.weight", c.vocab, D, c.initStd);
  if (c.lora.enabled()) {
    const std::int64_t r = c.lora.rank;
    for (std::int64_t i = 0; i < c.layers; ++i) {
      for (int t = 0; t < kLoraTargets; ++t) {
        const LoraTarget target = static_cast<LoraTarget>(t);
        if (!c.lora.Has(target)) continue;
        const auto [in, out] = LoraShape(c, target);
        const std::string p = LoraPrefix(i, target);
        // kaiming_uniform(a = sqrt 5) over fan_in = in: U(-1/sqrt(in), 1/sqrt(in)), whose standard
        // deviation is 1/sqrt(3 in) (kUniform takes the standard deviation).
        const double std = 1.0 / std::sqrt(3.0 * static_cast<double>(in));
        if (IsExpertLoraTarget(target)) {
          specs.push_back({p + ".lora_a", {E, r, in}, ParamInit::kUniform, std, true});
          specs.push_back({p + ".lora_b", {E, out, r}, ParamInit::kZeros, 0.0, true});
        } else {
          specs.push_back({p + ".lora_a", {r, in}, ParamInit::kUniform, std, true});
          specs.push_back({p + ".lora_b", {out, r}, ParamInit::kZeros, 0.0, true});
        }
      }
    }
  }
  return specs;
}

}  // namespace sinkflex::model
