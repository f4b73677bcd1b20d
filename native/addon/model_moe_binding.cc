// Bindings of the MoE layer op (native/model/moe.h): moeForward returns the output, the router
// logits, the chosen experts and their weights, and a state (a tagged external holding what the
// backward needs) that moeBackward takes. Weights may be bfloat16 bits (Uint16Array); the experts'
// may be MXFP4 (gateUp / down: Uint8Array blocks with gateUpScales / downScales). With
// `device` 'cuda' the arrays are staged in device memory (model_args.h), the CUDA MoE
// (moe_device.h) runs on them and the state keeps its activations in device memory.
#include <memory>
#include <string>

#include "../core/errors.h"
#include "../model/moe.h"
#include "../model/moe_device.h"
#include "bindings.h"
#include "model_args.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

using model::MoeParams;
using model::MoeSaved;
using model_args::Args;

constexpr napi_type_tag kMoeStateTag = {0x7d3a9e1c5b2f4086ull, 0x1e6c8a4f0b3d9275ull};

/** A forward's saved state (host, or device for a CUDA forward) with the shape it was made for. */
struct MoeStateBox {
  MoeSaved saved;
  std::unique_ptr<model::DeviceMoeSaved> device;
  std::int64_t D, F, E, K;
};

/** The CUDA MoE (Error when this build has none). */
const model::DeviceMoe& CudaMoe(Napi::Env env) {
  const model::DeviceMoe* moe = model::GetCudaMoe();
  if (moe == nullptr) throw Napi::Error::New(env, "device 'cuda' is not available: this build has no CUDA MoE kernels");
  return *moe;
}

/** Shapes, SwiGLU and weights of an MoE call (arrays checked for type and length). */
MoeParams ParseParams(const Args& a, std::int64_t* rows) {
  MoeParams p;
  *rows = a.Int("rows");
  p.width = a.Int("width", 1);
  p.ffn = a.Int("ffn", 1);
  p.experts = a.Int("experts", 1, 1 << 16);
  p.topK = a.Int("topK", 1, p.experts);
  p.swiglu.alpha = static_cast<float>(a.Num("alpha", 1.0));
  p.swiglu.limit = static_cast<float>(a.Num("limit", 0.0));
  p.swiglu.upBias = static_cast<float>(a.Num("upBias", 0.0));
  const std::int64_t D = p.width, F = p.ffn, E = p.experts;
  const Args::Weight r = a.WeightArray("router", E * D);
  const Args::Weight gu = a.WeightOrMxfp4("gateUp", "gateUpScales", E * 2 * F * D);
  const Args::Weight dn = a.WeightOrMxfp4("down", "downScales", E * D * F);
  p.router = {r.ptr, r.bf16};
  p.gateUp = {gu.ptr, gu.bf16, gu.scales};
  p.down = {dn.ptr, dn.bf16, dn.scales};
  p.routerBias = a.OptF32("routerBias", E);
  p.gateUpBias = a.OptF32("gateUpBias", E * 2 * F);
  p.downBias = a.OptF32("downBias", E * D);
  if (a.Has("gateUpLoraA") || a.Has("gateUpLoraB") || a.Has("downLoraA") || a.Has("downLoraB")) {
    const std::int64_t R = a.Int("loraRank", 1, 1 << 16);
    p.lora.rank = R;
    p.lora.scale = static_cast<float>(a.Num("loraScale", 1.0));
    p.lora.gateUpA = a.OptF32("gateUpLoraA", E * R * D);
    p.lora.gateUpB = a.OptF32("gateUpLoraB", E * 2 * F * R);
    p.lora.downA = a.OptF32("downLoraA", E * R * F);
    p.lora.downB = a.OptF32("downLoraB", E * D * R);
  }
  return p;
}

Napi::Value MoeForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  std::int64_t T = 0;
  const MoeParams p = ParseParams(a, &T);
  const float* x = a.F32("x", T * p.width);
  float* out = a.F32("out", T * p.width);
  float* logits = a.F32("logits", T * p.experts);
  a.DisjointAll("out", {"x", "router", "gateUp", "down", "gateUpScales", "downScales", "routerBias", "gateUpBias",
                        "downBias", "logits", "gateUpLoraA", "gateUpLoraB", "downLoraA", "downLoraB"});
  a.DisjointAll("logits", {"x", "router", "gateUp", "down", "gateUpScales", "downScales", "routerBias", "gateUpBias",
                           "downBias"});
  auto box = std::make_unique<MoeStateBox>();
  box->D = p.width;
  box->F = p.ffn;
  box->E = p.experts;
  box->K = p.topK;
  Napi::Env env = info.Env();
  const std::int64_t A = T * p.topK;
  Napi::Int32Array experts = Napi::Int32Array::New(env, static_cast<std::size_t>(A));
  Napi::Float32Array weights = Napi::Float32Array::New(env, static_cast<std::size_t>(A));
  if (a.OnCuda()) {
    const model::DeviceMoe& moe = CudaMoe(env);
    box->device = std::make_unique<model::DeviceMoeSaved>();
    moe.forward(p, x, out, T, box->device.get(), logits);
    a.Finish();
    if (A > 0) {
      box->device->index.Download(experts.Data());
      box->device->weight.Download(weights.Data());
    }
  } else {
    model::MoeForward(p, x, out, T, &box->saved, logits);
    for (std::int64_t i = 0; i < A; ++i) {
      experts.Data()[i] = box->saved.index[i];
      weights.Data()[i] = box->saved.weight[i];
    }
  }
  Napi::External<MoeStateBox> ext =
      Napi::External<MoeStateBox>::New(env, box.release(), [](Napi::Env, MoeStateBox* b) { delete b; });
  ext.TypeTag(&kMoeStateTag);
  Napi::Object r = Napi::Object::New(env);
  r.Set("experts", experts);
  r.Set("weights", weights);
  r.Set("state", ext);
  return r;
}

Napi::Value MoeBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  std::int64_t T = 0;
  const MoeParams p = ParseParams(a, &T);
  const Napi::Value sv = a.Get("state");
  if (!sv.IsExternal() || !sv.As<Napi::Object>().CheckTypeTag(&kMoeStateTag)) {
    throw Napi::TypeError::New(info.Env(), "state must be the state returned by moeForward");
  }
  MoeStateBox& box = *sv.As<Napi::External<MoeStateBox>>().Data();
  if (box.device && !a.OnCuda()) {
    throw Napi::RangeError::New(info.Env(),
                                "state was made by a forward on cuda: run the backward there (device 'cuda')");
  }
  if (!box.device && a.OnCuda()) {
    throw Napi::RangeError::New(info.Env(), "state was made by a forward on the cpu: run the backward there");
  }
  const std::int64_t savedT = box.device ? box.device->T : box.saved.T;
  if (savedT != T || box.D != p.width || box.F != p.ffn || box.E != p.experts || box.K != p.topK) {
    throw Napi::RangeError::New(info.Env(),
                                "state was made by a forward of other shapes (rows, width, ffn, experts, topK)");
  }
  const float* x = a.F32("x", T * p.width);
  const float* dout = a.F32("dout", T * p.width);
  float* dx = a.F32("dx", T * p.width);
  model::MoeGrads g;
  g.router = a.OptF32("drouter", p.experts * p.width);
  g.routerBias = a.OptF32("drouterBias", p.experts);
  g.gateUp = a.OptF32("dgateUp", p.experts * 2 * p.ffn * p.width);
  g.gateUpBias = a.OptF32("dgateUpBias", p.experts * 2 * p.ffn);
  g.down = a.OptF32("ddown", p.experts * p.width * p.ffn);
  g.downBias = a.OptF32("ddownBias", p.experts * p.width);
  if ((!p.lora.gateUp() && (a.Has("dgateUpLoraA") || a.Has("dgateUpLoraB"))) ||
      (!p.lora.down() && (a.Has("ddownLoraA") || a.Has("ddownLoraB")))) {
    throw Napi::TypeError::New(info.Env(),
                               "an expert adapter gradient (dgateUpLoraA, ...) is given without its adapter");
  }
  const std::int64_t rank = p.lora.rank;
  g.gateUpLoraA = a.OptF32("dgateUpLoraA", p.experts * rank * p.width);
  g.gateUpLoraB = a.OptF32("dgateUpLoraB", p.experts * 2 * p.ffn * rank);
  g.downLoraA = a.OptF32("ddownLoraA", p.experts * rank * p.ffn);
  g.downLoraB = a.OptF32("ddownLoraB", p.experts * p.width * rank);
  for (const char* out : {"dx", "drouter", "drouterBias", "dgateUp", "dgateUpBias", "ddown", "ddownBias",
                          "dgateUpLoraA", "dgateUpLoraB", "ddownLoraA", "ddownLoraB"}) {
    a.DisjointAll(out, {"x", "dout", "router", "gateUp", "down", "routerBias", "gateUpBias", "downBias", "gateUpLoraA",
                        "gateUpLoraB", "downLoraA", "downLoraB"});
  }
  a.DisjointAll("dx", {"drouter", "drouterBias", "dgateUp", "dgateUpBias", "ddown", "ddownBias", "dgateUpLoraA",
                       "dgateUpLoraB", "ddownLoraA", "ddownLoraB"});
  if (p.router.bf16 && g.router)
    throw Napi::TypeError::New(info.Env(), "drouter must be null for a bfloat16 router (frozen)");
  if (p.gateUp.frozen() && g.gateUp)
    throw Napi::TypeError::New(info.Env(), "dgateUp must be null for bfloat16 experts (frozen; MXFP4 experts too)");
  if (p.down.frozen() && g.down)
    throw Napi::TypeError::New(info.Env(), "ddown must be null for bfloat16 experts (frozen; MXFP4 experts too)");
  if (box.device) {
    const int device = box.device->index.device();
    if (box.device->T > 0 && a.Device() != device) {
      throw Napi::RangeError::New(info.Env(),
                                  "state lives on cuda:" + std::to_string(device) + ": run the backward there");
    }
    CudaMoe(info.Env()).backward(p, x, dout, *box.device, dx, g, a.Bool("accumulate", false), model::SavedUse::kKeep);
    a.Finish();
  } else {
    model::MoeBackward(p, x, dout, box.saved, dx, g, a.Bool("accumulate", false), model::SavedUse::kKeep);
  }
  return info.Env().Undefined();
}

}  // namespace

void RegisterMoe(Napi::Env env, Napi::Object exports) {
  Export(env, exports, "moeForward", MoeForwardJs);
  Export(env, exports, "moeBackward", MoeBackwardJs);
}

}  // namespace sinkflex::addon
