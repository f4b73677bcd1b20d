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
  if (!(std::isfinite(ropeTheta) && ropeTheta > 1.0)) throw ArgumentError("config.ropeTheta must be a finite number > 1");
  if (!(std::isfinite(normEps) && normEps > 0.0 && normEps < 1.0)) throw ArgumentError("config.normEps must be in (0, 1)");
  if (!(std::isfinite(initStd) && initStd > 0.0 && initStd < 10.0)) throw ArgumentError("config.initStd must be in (0, 10)");
  if (!(swiglu.alpha > 0.0f && std::isfinite(swiglu.alpha)) || !(swiglu.limit >= 0.0f && std::isfinite(swiglu.limit)) ||
      !std::isfinite(swiglu.upBias)) {
    throw ArgumentError("config.swiglu has invalid parameters");
  }
}

std::vector<ParamSpec> ParamLayout(const ModelConfig& c) {
  c.Validate();
  std::vector<ParamSpec> specs;
  const double outStd = c.initStd / std::sqrt(2.0 * static_cast<double>(c.layers));
  auto matrix = [&](std::string name, std::int64_t rows, std::int64_t cols, double std) {
    specs.push_back({std::move(name), {rows, cols}, ParamInit::kNormal, std, true});
  };
  auto vector = [&](std::string name, std::int64_t n, ParamInit init) {
    specs.push_back({std::move(name), {n}, init, 0.0, false});
  };
  const std::int64_t q = c.heads * c.headDim, kv = c.kvHeads * c.headDim;
  matrix("embed.weight", c.vocab, c.width, c.initStd);
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    vector(p + "attn_norm.weight", c.width, ParamInit::kOnes);
    matrix(p + "attn.q.weight", q, c.width, c.initStd);
    if (c.bias) vector(p + "attn.q.bias", q, ParamInit::kZeros);
    matrix(p + "attn.k.weight", kv, c.width, c.initStd);
    if (c.bias) vector(p + "attn.k.bias", kv, ParamInit::kZeros);
    matrix(p + "attn.v.weight", kv, c.width, c.initStd);
    if (c.bias) vector(p + "attn.v.bias", kv, ParamInit::kZeros);
    matrix(p + "attn.o.weight", c.width, q, outStd);
    if (c.bias) vector(p + "attn.o.bias", c.width, ParamInit::kZeros);
    vector(p + "attn.sinks", c.heads, ParamInit::kZeros);
    vector(p + "mlp_norm.weight", c.width, ParamInit::kOnes);
    matrix(p + "mlp.gate_up.weight", 2 * c.ffn, c.width, c.initStd);
    if (c.bias) vector(p + "mlp.gate_up.bias", 2 * c.ffn, ParamInit::kZeros);
    matrix(p + "mlp.down.weight", c.width, c.ffn, outStd);
    if (c.bias) vector(p + "mlp.down.bias", c.width, ParamInit::kZeros);
  }
  vector("norm.weight", c.width, ParamInit::kOnes);
  matrix("lm_head.weight", c.vocab, c.width, c.initStd);
  return specs;
}

}  // namespace sinkflex::model
