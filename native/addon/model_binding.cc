// Bindings of native/model: GEMM, the model ops (forward and backward), AdamW, the model
// config's parameter layout and the native parameter store (class ParamStore). Every op takes
// one options object; arrays are validated for type and exact length, sizes for range, and
// unsafe aliasing between inputs and outputs is rejected (RangeError naming both arguments).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../model/gemm.h"
#include "../model/kernel_table.h"
#include "../model/gemm_bench.h"
#include "../model/matmul_precision.h"
#include "../model/model_config.h"
#include "../model/ops.h"
#include "../model/ops_table.h"
#include "../core/device_buffer.h"
#include "../core/cuda_device.h"
#include "../core/errors.h"
#include "../model/param_store.h"
#include "bindings.h"
#include "model_args.h"
#include "model_binding.h"
#include "napi_util.h"

namespace sinkflex::addon {

namespace {
using namespace sinkflex::model;

using model_args::Args;
using model_args::kMaxDim;

// ---- GEMM -----------------------------------------------------------------------------------------

struct GemmCall {
  bool transA, transB;
  std::int64_t m, n, k;
  float alpha, beta;
  Args::Weight a, b;  // float32, or bfloat16 bits
  float* c;
};

GemmCall ParseGemm(const Args& a) {
  GemmCall g{};
  g.m = a.Int("m");
  g.n = a.Int("n");
  g.k = a.Int("k");
  g.transA = a.Bool("transA", false);
  g.transB = a.Bool("transB", false);
  g.alpha = static_cast<float>(a.Num("alpha", 1.0));
  g.beta = static_cast<float>(a.Num("beta", 0.0));
  g.a = a.WeightArray("a", g.m * g.k);
  g.b = a.WeightArray("b", g.k * g.n);
  g.c = a.F32("c", g.m * g.n);
  a.DisjointAll("c", {"a", "b"});
  return g;
}

void RunGemm(const GemmCall& g, bool naive, const ModelOps& ops = CpuOps()) {
  const std::int64_t lda = std::max<std::int64_t>(1, g.transA ? g.m : g.k);
  const std::int64_t ldb = std::max<std::int64_t>(1, g.transB ? g.k : g.n);
  const std::int64_t ldc = std::max<std::int64_t>(1, g.n);
  if (g.a.bf16 || g.b.bf16) {
    if (naive) throw ArgumentError("gemmNaive takes float32 arrays only");
    ops.gemmMixed(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a.ptr, g.a.bf16, lda, g.b.ptr, g.b.bf16, ldb, g.beta,
                  g.c, ldc);
    return;
  }
  auto fn = naive ? GemmNaive : ops.gemm;
  fn(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a.f32(), lda, g.b.f32(), ldb, g.beta, g.c, ldc);
}

Napi::Value GemmJs(const Napi::CallbackInfo& info) {
  Args a(info);
  RunGemm(ParseGemm(a), false, a.Ops());
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value GemmNaiveJs(const Napi::CallbackInfo& info) {
  RunGemm(ParseGemm(Args(info, false)), true);
  return info.Env().Undefined();
}

Napi::Value GemmAsyncJs(const Napi::CallbackInfo& info) {
  Args a(info, false);
  const GemmCall g = ParseGemm(a);
  return AsyncTask::Run(
      info.Env(), [g] { RunGemm(g, false); }, [](Napi::Env env) { return env.Undefined(); }, a.Arrays());
}

Napi::Value GemmInfoJs(const Napi::CallbackInfo& info) {
  const KernelTable& kt = ActiveKernels();
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("kernel", GemmKernelName());
  o.Set("isa", kt.name);
  o.Set("mr", kt.gemmMr);
  o.Set("nr", kt.gemmNr);
  o.Set("vectorWidth", kt.vectorWidth);
  return o;
}

Napi::Value MatmulPrecisionJs(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), MatmulPrecisionName(GetMatmulPrecision()));
}

Napi::Value MatmulOperandJs(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), MatmulOperandName(GetMatmulOperand()));
}

// setMatmulPrecision(precision, dtype?): dtype ('bfloat16' or 'float16') only with 'medium'.
Napi::Value SetMatmulPrecisionJs(const Napi::CallbackInfo& info) {
  const std::string name = RequireString(info[0], "precision");
  MatmulPrecision p;
  if (!ParseMatmulPrecision(name, &p)) {
    throw Napi::RangeError::New(info.Env(), "precision must be 'highest' or 'medium' (got '" + name + "')");
  }
  MatmulOperand operand = MatmulOperand::kBf16;
  if (info.Length() > 1 && !IsNullish(info[1])) {
    const std::string dtype = RequireString(info[1], "dtype");
    if (!ParseMatmulOperand(dtype, &operand)) {
      throw Napi::RangeError::New(info.Env(), "dtype must be 'bfloat16' or 'float16' (got '" + dtype + "')");
    }
    if (p != MatmulPrecision::kMedium) {
      throw Napi::RangeError::New(info.Env(),
                                  "dtype is the tensor cores' operand type: it goes with precision 'medium' only");
    }
  }
  SetMatmulPrecision(p, operand);
  return info.Env().Undefined();
}

/**
 * gemmTimeCuda({ m, n, k, transA?, transB?, aDtype?, bDtype?, precision?, iterations?, device? }):
 * seconds per CUDA GEMM on device-resident random operands (bench/gemm-gpu.ts).
 */
Napi::Value GemmTimeCudaJs(const Napi::CallbackInfo& info) {
  const Napi::Object o = RequireObject(info[0], "options");
  OnlyFields(
      o, "options",
      {"m", "n", "k", "transA", "transB", "aDtype", "bDtype", "precision", "operandDtype", "iterations", "device"});
  GemmTimingArgs g;
  g.m = RequireInt(Field(o, "m"), "options.m", 1, kMaxDim);
  g.n = RequireInt(Field(o, "n"), "options.n", 1, kMaxDim);
  g.k = RequireInt(Field(o, "k"), "options.k", 1, kMaxDim);
  auto flag = [&](const char* key) {
    const Napi::Value v = Field(o, key);
    if (IsNullish(v)) return false;
    if (!v.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string("options.") + key + " must be a boolean");
    return v.As<Napi::Boolean>().Value();
  };
  g.transA = flag("transA");
  g.transB = flag("transB");
  auto dtype = [&](const char* key) {
    const Napi::Value v = Field(o, key);
    return !IsNullish(v) && RequireEnum(v, std::string("options.") + key, {"float32", "bfloat16"}) == "bfloat16";
  };
  g.aBf16 = dtype("aDtype");
  g.bBf16 = dtype("bDtype");
  const Napi::Value p = Field(o, "precision");
  g.tensorCores = !IsNullish(p) && RequireEnum(p, "options.precision", {"highest", "medium"}) == "medium";
  const Napi::Value od = Field(o, "operandDtype");
  g.f16Operands = !IsNullish(od) && RequireEnum(od, "options.operandDtype", {"bfloat16", "float16"}) == "float16";
  if (g.f16Operands && !g.tensorCores)
    throw Napi::RangeError::New(info.Env(), "options.operandDtype 'float16' goes with precision 'medium' only");
  const Napi::Value it = Field(o, "iterations");
  g.iterations = IsNullish(it) ? 10 : static_cast<int>(RequireInt(it, "options.iterations", 1, 10000));
  const Napi::Value d = Field(o, "device");
  g.device = IsNullish(d) ? 0 : static_cast<int>(RequireInt(d, "options.device", 0, 63));
  const GemmTimer timer = GetGemmTimer();
  if (timer == nullptr) throw DeviceError("gemmTimeCuda: this build has no CUDA GEMM kernels");
  if (g.device >= static_cast<int>(CudaDevices().size())) {
    throw DeviceError("gemmTimeCuda: cuda:" + std::to_string(g.device) +
                      " is not available: " + CudaUnavailableReason());
  }
  return Napi::Number::New(info.Env(), timer(g));
}

Napi::Value FmaPeakJs(const Napi::CallbackInfo& info) {
  const double seconds = RequireNumber(info[0], "seconds");
  if (seconds <= 0.0 || seconds > 10.0) throw Napi::RangeError::New(info.Env(), "seconds must be in (0, 10]");
  return Napi::Number::New(info.Env(), MeasureFmaPeakGflops(seconds));
}

// ---- linear ---------------------------------------------------------------------------------------

Napi::Value LinearForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), in = a.Int("inFeatures"), out = a.Int("outFeatures");
  const float* x = a.F32("x", T * in);
  const Args::Weight w = a.WeightArray("weight", out * in);
  const float* b = a.OptF32("bias", out);
  float* y = a.F32("out", T * out);
  a.DisjointAll("out", {"x", "weight", "bias"});
  if (w.bf16)
    a.Ops().linearForwardBf16(x, w.bits(), b, y, T, in, out);
  else
    a.Ops().linearForward(x, w.f32(), b, y, T, in, out);
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value LinearBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), in = a.Int("inFeatures"), out = a.Int("outFeatures");
  const float* dy = a.F32("dy", T * out);
  float* dx = a.OptF32("dx", T * in);
  float* dw = a.OptF32("dweight", out * in);
  float* db = a.OptF32("dbias", out);
  const float* x = dw ? a.F32("x", T * in) : a.OptF32("x", T * in);
  const Args::Weight w = dx ? a.WeightArray("weight", out * in) : a.OptWeightArray("weight", out * in);
  a.DisjointAll("dx", {"dy", "weight", "x", "dweight", "dbias"});
  a.DisjointAll("dweight", {"dy", "x", "weight", "dbias"});
  a.DisjointAll("dbias", {"dy"});
  if (w.bf16) {
    if (dw)
      throw Napi::TypeError::New(info.Env(),
                                 "dweight must be null for a bfloat16 weight (bfloat16 weights are frozen)");
    a.Ops().linearBackwardBf16(w.bits(), dy, dx, db, T, in, out, a.Bool("accumulate", false));
  } else {
    a.Ops().linearBackward(x, w.f32(), dy, dx, dw, db, T, in, out, a.Bool("accumulate", false));
  }
  a.Finish();
  return info.Env().Undefined();
}

// ---- RMSNorm --------------------------------------------------------------------------------------

Napi::Value RmsNormForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), D = a.Int("dim", 1);
  const float* x = a.F32("x", T * D);
  const float* g = a.F32("weight", D);
  float* y = a.F32("out", T * D);
  float* rstd = a.F32("rstd", T);
  a.Disjoint("out", "x", true);
  a.DisjointAll("out", {"weight", "rstd"});
  a.DisjointAll("rstd", {"x", "weight"});
  a.Ops().rmsNormForward(x, g, y, rstd, T, D, static_cast<float>(a.Num("eps", 1e-5)));
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value RmsNormBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), D = a.Int("dim", 1);
  const float* x = a.F32("x", T * D);
  const float* g = a.F32("weight", D);
  const float* rstd = a.F32("rstd", T);
  const float* dy = a.F32("dy", T * D);
  float* dx = a.F32("dx", T * D);
  float* dg = a.F32("dweight", D);
  a.Disjoint("dx", "dy", true);
  a.DisjointAll("dx", {"x", "weight", "rstd", "dweight"});
  a.DisjointAll("dweight", {"x", "weight", "rstd", "dy"});
  a.Ops().rmsNormBackward(x, g, rstd, dy, dx, dg, T, D, a.Bool("accumulate", false));
  a.Finish();
  return info.Env().Undefined();
}

// ---- RoPE -----------------------------------------------------------------------------------------

/**
 * A RoPE table covering `needed` positions, cached across calls with the same headDim/theta
 * (bindings run on the JavaScript thread only). Deliberately never destroyed at exit, so its
 * tracked memory is not released after the allocator's counters are gone.
 */
const RopeTable& CachedRopeTable(std::int64_t headDim, double theta, const RopeScaling& scaling, std::int64_t needed) {
  static RopeTable* cache = nullptr;
  if (!cache || cache->headDim() != headDim || cache->theta() != theta || !SameRopeScaling(cache->scaling(), scaling) ||
      cache->maxPositions() < needed) {
    delete cache;
    cache = nullptr;
    cache = new RopeTable(headDim, std::max<std::int64_t>(needed, 64), theta, scaling);
  }
  return *cache;
}

Napi::Value RopeJs(const Napi::CallbackInfo& info, bool backward) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), H = a.Int("heads"), Dh = a.Int("headDim", 2, 1 << 16);
  if (Dh % 2 != 0) throw Napi::RangeError::New(info.Env(), "headDim must be even, got " + std::to_string(Dh));
  const double theta = a.Num("theta", 10000.0);
  if (!(theta > 0.0)) throw Napi::RangeError::New(info.Env(), "theta must be positive");
  const char* inName = backward ? "dy" : "x";
  const char* outName = backward ? "dx" : "out";
  const float* x = a.F32(inName, T * H * Dh);
  float* out = a.F32(outName, T * H * Dh);
  const std::int32_t* pos = a.I32("positions", T);
  a.Disjoint(outName, inName, true);
  a.Disjoint(outName, "positions");
  std::int64_t maxPos = 0;
  const std::int32_t* posHost = a.HostI32("positions");
  for (std::int64_t t = 0; t < T; ++t) {
    if (posHost[t] < 0 || posHost[t] >= (1 << 24)) {
      throw Napi::RangeError::New(info.Env(), "positions[" + std::to_string(t) + "] = " + std::to_string(posHost[t]) +
                                                  " is out of range [0, 16777216)");
    }
    maxPos = std::max<std::int64_t>(maxPos, posHost[t]);
  }
  const RopeScaling scaling = ParseRopeScaling(a.Get("scaling"), "scaling");
  const RopeTable& table = CachedRopeTable(Dh, theta, scaling, maxPos + 1);
  if (backward)
    a.Ops().ropeBackward(table, x, out, pos, T, H);
  else
    a.Ops().ropeForward(table, x, out, pos, T, H);
  a.Finish();
  return info.Env().Undefined();
}
Napi::Value RopeForwardJs(const Napi::CallbackInfo& info) { return RopeJs(info, false); }

/** { headDim, theta, scaling } → { inverseFrequencies: Float64Array, attentionFactor } of the RoPE table. */
Napi::Value RopeParametersJs(const Napi::CallbackInfo& info) {
  const Napi::Object o = RequireObject(info[0], "options");
  const std::int64_t Dh = RequireInt(Field(o, "headDim"), "headDim", 2, 1 << 16);
  if (Dh % 2 != 0) throw Napi::RangeError::New(info.Env(), "headDim must be even, got " + std::to_string(Dh));
  const Napi::Value th = Field(o, "theta");
  const double theta = IsNullish(th) ? 10000.0 : RequireNumber(th, "theta");
  if (!(theta > 0.0)) throw Napi::RangeError::New(info.Env(), "theta must be positive");
  const RopeTable table(Dh, 1, theta, ParseRopeScaling(Field(o, "scaling"), "scaling"));
  const std::vector<double>& f = table.inverseFrequencies();
  Napi::Float64Array inv = Napi::Float64Array::New(info.Env(), f.size());
  std::copy(f.begin(), f.end(), inv.Data());
  Napi::Object r = Napi::Object::New(info.Env());
  r.Set("inverseFrequencies", inv);
  r.Set("attentionFactor", table.attentionFactor());
  return r;
}
Napi::Value RopeBackwardJs(const Napi::CallbackInfo& info) { return RopeJs(info, true); }

// ---- SwiGLU ---------------------------------------------------------------------------------------

SwiGluParams ParseSwiGlu(const Args& a) {
  SwiGluParams p;
  p.alpha = static_cast<float>(a.Num("alpha", 1.0));
  p.limit = static_cast<float>(a.Num("limit", 0.0));
  p.upBias = static_cast<float>(a.Num("upBias", 0.0));
  return p;
}

Napi::Value SwiGluForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), F = a.Int("ffn");
  const float* h = a.F32("h", T * 2 * F);
  float* out = a.F32("out", T * F);
  a.Disjoint("out", "h");
  a.Ops().swiGluForward(h, out, T, F, ParseSwiGlu(a));
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value SwiGluBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), F = a.Int("ffn");
  const float* h = a.F32("h", T * 2 * F);
  const float* dout = a.F32("dout", T * F);
  float* dh = a.F32("dh", T * 2 * F);
  a.DisjointAll("dh", {"h", "dout"});
  a.Ops().swiGluBackward(h, dout, dh, T, F, ParseSwiGlu(a), a.Bool("accumulate", false));
  a.Finish();
  return info.Env().Undefined();
}

// ---- embedding ------------------------------------------------------------------------------------

Napi::Value EmbeddingForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1), D = a.Int("dim");
  const Args::Weight table = a.WeightArray("table", V * D);
  const std::int32_t* ids = a.I32("ids", T);
  float* out = a.F32("out", T * D);
  a.DisjointAll("out", {"table", "ids"});
  if (a.OnCuda()) CheckTokenIds(a.HostI32("ids"), T, V, "ids", false);
  if (table.bf16)
    a.Ops().embeddingForwardBf16(table.bits(), ids, out, T, V, D);
  else
    a.Ops().embeddingForward(table.f32(), ids, out, T, V, D);
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value EmbeddingBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1), D = a.Int("dim");
  const std::int32_t* ids = a.I32("ids", T);
  const float* dout = a.F32("dout", T * D);
  float* dtable = a.F32("dtable", V * D);
  a.DisjointAll("dtable", {"ids", "dout"});
  if (a.OnCuda()) CheckTokenIds(a.HostI32("ids"), T, V, "ids", false);
  a.Ops().embeddingBackward(ids, dout, dtable, T, V, D);
  a.Finish();
  return info.Env().Undefined();
}

// ---- log-softmax / cross-entropy ------------------------------------------------------------------

Napi::Value LogSoftmaxForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1);
  const float* logits = a.F32("logits", T * V);
  const std::int32_t* targets = a.OptI32("targets", T);
  float* logp = a.OptF32("logp", T);
  float* entropy = a.OptF32("entropy", T);
  float* lse = a.F32("lse", T);
  if (logp && !targets) throw Napi::TypeError::New(info.Env(), "targets must be an Int32Array when logp is given");
  for (const char* out : {"logp", "entropy", "lse"}) a.DisjointAll(out, {"logits", "targets"});
  a.DisjointAll("logp", {"entropy", "lse"});
  a.Disjoint("entropy", "lse");
  if (a.OnCuda() && targets) CheckTokenIds(a.HostI32("targets"), T, V, "targets", true);
  a.Ops().logSoftmaxForward(logits, targets, T, V, static_cast<float>(a.Num("scale", 1.0)), logp, entropy, lse);
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value LogSoftmaxBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1);
  const float* logits = a.F32("logits", T * V);
  const std::int32_t* targets = a.OptI32("targets", T);
  const float* lse = a.F32("lse", T);
  const float* dlogp = a.OptF32("dlogp", T);
  const float* dentropy = a.OptF32("dentropy", T);
  const float* entropy = dentropy ? a.F32("entropy", T) : a.OptF32("entropy", T);
  float* dlogits = a.F32("dlogits", T * V);
  const bool accumulate = a.Bool("accumulate", false);
  if (dlogp && !targets) throw Napi::TypeError::New(info.Env(), "targets must be an Int32Array when dlogp is given");
  a.Disjoint("dlogits", "logits", !accumulate);
  a.DisjointAll("dlogits", {"targets", "lse", "dlogp", "dentropy", "entropy"});
  if (a.OnCuda() && targets) CheckTokenIds(a.HostI32("targets"), T, V, "targets", true);
  a.Ops().logSoftmaxBackward(logits, targets, lse, entropy, dlogp, dentropy, dlogits, T, V,
                             static_cast<float>(a.Num("scale", 1.0)), accumulate);
  a.Finish();
  return info.Env().Undefined();
}

Napi::Value CrossEntropyForwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1);
  const float* logits = a.F32("logits", T * V);
  const std::int32_t* targets = a.I32("targets", T);
  float* losses = a.OptF32("losses", T);
  float* lse = a.F32("lse", T);
  for (const char* out : {"losses", "lse"}) a.DisjointAll(out, {"logits", "targets"});
  a.Disjoint("losses", "lse");
  if (a.OnCuda()) CheckTokenIds(a.HostI32("targets"), T, V, "targets", true);
  const CrossEntropyResult r = a.Ops().crossEntropyForward(logits, targets, T, V, losses, lse);
  a.Finish();
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("loss", r.loss);
  o.Set("count", static_cast<double>(r.count));
  return o;
}

Napi::Value CrossEntropyBackwardJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const std::int64_t T = a.Int("rows"), V = a.Int("vocab", 1);
  const float* logits = a.F32("logits", T * V);
  const std::int32_t* targets = a.I32("targets", T);
  const float* lse = a.F32("lse", T);
  float* dlogits = a.F32("dlogits", T * V);
  const bool accumulate = a.Bool("accumulate", false);
  a.Disjoint("dlogits", "logits", !accumulate);
  a.DisjointAll("dlogits", {"targets", "lse"});
  if (a.OnCuda()) CheckTokenIds(a.HostI32("targets"), T, V, "targets", true);
  a.Ops().crossEntropyBackward(logits, targets, lse, dlogits, T, V, static_cast<float>(a.Num("gradScale", 1.0)),
                               accumulate);
  a.Finish();
  return info.Env().Undefined();
}

// ---- optimiser ------------------------------------------------------------------------------------

Napi::Value AdamWUpdateJs(const Napi::CallbackInfo& info) {
  Args a(info);
  const Napi::Float32Array p = RequireF32(a.Get("param"), "param");
  const std::int64_t n = static_cast<std::int64_t>(p.ElementLength());
  float* param = a.F32("param", n);
  const float* grad = a.F32("grad", n);
  float* m = a.F32("m", n);
  float* v = a.F32("v", n);
  a.DisjointAll("param", {"grad", "m", "v"});
  a.DisjointAll("m", {"grad", "v"});
  a.Disjoint("v", "grad");
  AdamWOptions o;
  o.lr = a.Num("lr", o.lr);
  o.beta1 = a.Num("beta1", o.beta1);
  o.beta2 = a.Num("beta2", o.beta2);
  o.eps = a.Num("eps", o.eps);
  o.weightDecay = a.Num("weightDecay", o.weightDecay);
  a.Ops().adamwUpdate(param, grad, m, v, n, o, a.Int("step", 1, std::int64_t{1} << 53),
                      static_cast<float>(a.Num("gradScale", 1.0)), a.Bool("decay", true));
  a.Finish();
  return info.Env().Undefined();
}

/** ['cpu'], plus 'cuda' when this build has the CUDA model kernels and a GPU is usable. */
Napi::Value ModelOpsDevicesJs(const Napi::CallbackInfo& info) {
  Napi::Array list = Napi::Array::New(info.Env());
  list.Set(0u, "cpu");
  if (GetCudaOps() != nullptr && !CudaDevices().empty()) list.Set(1u, "cuda");
  return list;
}

Napi::Value SumSquaresJs(const Napi::CallbackInfo& info) {
  const Napi::Float32Array x = RequireF32(info[0], "x");
  const auto n = static_cast<std::int64_t>(x.ElementLength());
  const int slot = IsNullish(info[1]) ? kCpuDevice : RequireDevice(info[1], "device");
  if (slot == kCpuDevice || n == 0) return Napi::Number::New(info.Env(), SumSquares(x.Data(), n));
  const ModelOps* ops = GetCudaOps();
  if (ops == nullptr) throw DeviceError("device 'cuda' is not available: this build has no CUDA model kernels");
  ops->useDevice(slot - 1);
  DeviceBuffer<float> d(slot - 1, static_cast<std::size_t>(n), "sumSquares argument (cuda)");
  d.Upload(x.Data());
  return Napi::Number::New(info.Env(), ops->sumSquares(d.data(), n));
}

// ---- model config -----------------------------------------------------------------------------------

Napi::Value ParamLayoutJs(const Napi::CallbackInfo& info) {
  const std::vector<ParamSpec> specs = ParamLayout(ParseModelConfig(info[0], "config"));
  Napi::Env env = info.Env();
  Napi::Array list = Napi::Array::New(env, specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& s = specs[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", s.name);
    Napi::Array shape = Napi::Array::New(env, s.shape.size());
    for (std::size_t d = 0; d < s.shape.size(); ++d)
      shape.Set(static_cast<std::uint32_t>(d), static_cast<double>(s.shape[d]));
    o.Set("shape", shape);
    o.Set("init", s.init == ParamInit::kNormal    ? "normal"
                  : s.init == ParamInit::kUniform ? "uniform"
                  : s.init == ParamInit::kOnes    ? "ones"
                                                  : "zeros");
    o.Set("std", s.std);
    o.Set("decay", s.decay);
    list.Set(static_cast<std::uint32_t>(i), o);
  }
  return list;
}

Napi::Value OpsIsaJs(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), OpsIsa()); }

}  // namespace

namespace {

bool OptionalBoolField(const Napi::Object& o, const char* key, const std::string& name, bool def) {
  const Napi::Value f = Field(o, key);
  if (IsNullish(f)) return def;
  if (!f.IsBoolean()) throw Napi::TypeError::New(o.Env(), name + "." + key + " must be a boolean");
  return f.As<Napi::Boolean>().Value();
}

}  // namespace

model::RopeScaling ParseRopeScaling(const Napi::Value& v, const std::string& name) {
  model::RopeScaling r;
  if (IsNullish(v)) return r;
  const Napi::Object o = RequireObject(v, name);
  const std::string type = RequireEnum(Field(o, "type"), name + ".type", {"linear", "llama3", "yarn"});
  auto num = [&](const char* key) { return RequireNumber(Field(o, key), name + "." + key); };
  auto optNum = [&](const char* key, double def) {
    const Napi::Value f = Field(o, key);
    return IsNullish(f) ? def : RequireNumber(f, name + "." + key);
  };
  auto context = [&] {
    return RequireInt(Field(o, "originalContext"), name + ".originalContext", 1, std::int64_t{1} << 24);
  };
  r.factor = num("factor");
  if (type == "linear") {
    r.type = model::RopeScaling::Type::kLinear;
  } else if (type == "llama3") {
    r.type = model::RopeScaling::Type::kLlama3;
    r.lowFreqFactor = num("lowFreqFactor");
    r.highFreqFactor = num("highFreqFactor");
    r.originalContext = context();
  } else {
    r.type = model::RopeScaling::Type::kYarn;
    r.originalContext = context();
    r.betaFast = optNum("betaFast", 32.0);
    r.betaSlow = optNum("betaSlow", 1.0);
    r.truncate = OptionalBoolField(o, "truncate", name, true);
    // null: derived from factor (and mscale / mscaleAllDim); a given value must be positive
    const Napi::Value af = Field(o, "attentionFactor");
    if (!IsNullish(af)) {
      r.attentionFactor = RequireNumber(af, name + ".attentionFactor");
      if (!(r.attentionFactor > 0.0)) {
        throw Napi::RangeError::New(
            v.Env(), name + ".attentionFactor must be > 0 or null, got " + std::to_string(r.attentionFactor));
      }
    }
    r.mscale = optNum("mscale", 0.0);
    r.mscaleAllDim = optNum("mscaleAllDim", 0.0);
  }
  r.Validate(name.c_str());
  return r;
}

model::LoraSettings ParseLora(const Napi::Value& v, const std::string& name) {
  model::LoraSettings l;
  if (IsNullish(v)) return l;
  const Napi::Object o = RequireObject(v, name);
  l.rank = RequireInt(Field(o, "rank"), name + ".rank", 1, std::int64_t{1} << 16);
  l.alpha = RequireNumber(Field(o, "alpha"), name + ".alpha");
  l.rslora = OptionalBoolField(o, "rslora", name, false);
  const Napi::Value targets = Field(o, "targets");
  if (!targets.IsArray()) throw Napi::TypeError::New(v.Env(), name + ".targets must be an array of module names");
  const Napi::Array arr = targets.As<Napi::Array>();
  std::vector<std::string> names;
  for (int t = 0; t < model::kLoraTargets; ++t)
    names.push_back(model::LoraTargetName(static_cast<model::LoraTarget>(t)));
  for (std::uint32_t i = 0; i < arr.Length(); ++i) {
    const std::string where = name + ".targets[" + std::to_string(i) + "]";
    const std::string t = RequireString(arr.Get(i), where);
    const auto it = std::find(names.begin(), names.end(), t);
    if (it == names.end()) {
      throw Napi::RangeError::New(
          v.Env(), where + " = '" + t +
                       "' is not a LoRA target (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, "
                       "experts.gate_up_proj, experts.down_proj)");
    }
    const std::uint32_t bit = 1u << static_cast<unsigned>(it - names.begin());
    if (l.targets & bit) throw Napi::RangeError::New(v.Env(), where + " = '" + t + "' is listed twice");
    l.targets |= bit;
  }
  if (l.targets == 0) throw Napi::RangeError::New(v.Env(), name + ".targets must name at least one module");
  return l;
}

model::ModelConfig ParseModelConfig(const Napi::Value& v, const std::string& name) {
  const Napi::Object o = RequireObject(v, name);
  auto num = [&](const char* key, double def) {
    const Napi::Value f = Field(o, key);
    return IsNullish(f) ? def : RequireNumber(f, name + "." + key);
  };
  auto integer = [&](const char* key) { return RequireInt(Field(o, key), name + "." + key, 0, kMaxDim); };
  auto optInteger = [&](const char* key) {
    const Napi::Value f = Field(o, key);
    return IsNullish(f) ? std::int64_t{0} : RequireInt(f, name + "." + key, 0, kMaxDim);
  };
  model::ModelConfig c;
  c.layers = integer("layers");
  c.width = integer("width");
  c.heads = integer("heads");
  c.kvHeads = integer("kvHeads");
  c.headDim = integer("headDim");
  c.window = integer("window");
  c.vocab = integer("vocab");
  c.context = integer("context");
  c.ffn = integer("ffn");
  c.ropeTheta = num("ropeTheta", c.ropeTheta);
  c.normEps = num("normEps", c.normEps);
  c.initStd = num("initStd", c.initStd);
  const Napi::Value sw = Field(o, "swiglu");
  if (!IsNullish(sw)) {
    c.swiglu = RequireEnum(sw, name + ".swiglu", {"standard", "clamped"}) == "clamped"
                   ? model::SwiGluParams::GptOss()
                   : model::SwiGluParams::Standard();
  }
  // `bias` (legacy) sets the three bias flags that are not given; when given with them it must
  // equal their conjunction (what TypeScript's validated configs carry).
  const bool hasBias = !IsNullish(Field(o, "bias"));
  const bool bias = OptionalBoolField(o, "bias", name, false);
  c.qkvBias = OptionalBoolField(o, "qkvBias", name, bias);
  c.oBias = OptionalBoolField(o, "oBias", name, bias);
  c.mlpBias = OptionalBoolField(o, "mlpBias", name, bias);
  if (hasBias && bias != (c.qkvBias && c.oBias && c.mlpBias)) {
    const char* which = c.qkvBias != bias ? "qkvBias" : c.oBias != bias ? "oBias" : "mlpBias";
    throw Napi::RangeError::New(v.Env(), name + ".bias (" + (bias ? "true" : "false") + ") contradicts " + name + "." +
                                             which + " (" + (bias ? "false" : "true") + ")");
  }
  c.sinks = OptionalBoolField(o, "sinks", name, true);
  c.qkNorm = OptionalBoolField(o, "qkNorm", name, false);
  c.tieEmbeddings = OptionalBoolField(o, "tieEmbeddings", name, false);
  c.tokenShift = OptionalBoolField(o, "tokenShift", name, false);
  const Napi::Value lt = Field(o, "layerTypes");
  if (!IsNullish(lt)) {
    if (!lt.IsArray())
      throw Napi::TypeError::New(v.Env(), name + ".layerTypes must be null or an array of 'sliding' / 'full'");
    const Napi::Array arr = lt.As<Napi::Array>();
    for (std::uint32_t i = 0; i < arr.Length(); ++i) {
      const std::string t =
          RequireEnum(arr.Get(i), name + ".layerTypes[" + std::to_string(i) + "]", {"sliding", "full"});
      c.layerTypes.push_back(t == "sliding" ? model::LayerType::kSliding : model::LayerType::kFull);
    }
    if (c.layerTypes.empty())
      throw Napi::RangeError::New(v.Env(), name + ".layerTypes must not be empty (null: the built-in rule)");
  }
  c.experts = optInteger("experts");
  c.expertsPerToken = optInteger("expertsPerToken");
  c.ropeScaling = ParseRopeScaling(Field(o, "ropeScaling"), name + ".ropeScaling");
  c.lora = ParseLora(Field(o, "lora"), name + ".lora");
  c.Validate();
  return c;
}

void RegisterModel(Napi::Env env, Napi::Object exports) {
  Export(env, exports, "gemm", GemmJs);
  Export(env, exports, "gemmNaive", GemmNaiveJs);
  Export(env, exports, "gemmAsync", GemmAsyncJs);
  Export(env, exports, "gemmInfo", GemmInfoJs);
  Export(env, exports, "matmulPrecision", MatmulPrecisionJs);
  Export(env, exports, "gemmTimeCuda", GemmTimeCudaJs);
  Export(env, exports, "setMatmulPrecision", SetMatmulPrecisionJs);
  Export(env, exports, "matmulOperandDtype", MatmulOperandJs);
  Export(env, exports, "fmaPeakGflops", FmaPeakJs);
  Export(env, exports, "opsIsa", OpsIsaJs);
  Export(env, exports, "linearForward", LinearForwardJs);
  Export(env, exports, "linearBackward", LinearBackwardJs);
  Export(env, exports, "rmsnormForward", RmsNormForwardJs);
  Export(env, exports, "rmsnormBackward", RmsNormBackwardJs);
  Export(env, exports, "ropeForward", RopeForwardJs);
  Export(env, exports, "ropeBackward", RopeBackwardJs);
  Export(env, exports, "ropeParameters", RopeParametersJs);
  Export(env, exports, "swigluForward", SwiGluForwardJs);
  Export(env, exports, "swigluBackward", SwiGluBackwardJs);
  Export(env, exports, "embeddingForward", EmbeddingForwardJs);
  Export(env, exports, "embeddingBackward", EmbeddingBackwardJs);
  Export(env, exports, "logSoftmaxForward", LogSoftmaxForwardJs);
  Export(env, exports, "logSoftmaxBackward", LogSoftmaxBackwardJs);
  Export(env, exports, "crossEntropyForward", CrossEntropyForwardJs);
  Export(env, exports, "crossEntropyBackward", CrossEntropyBackwardJs);
  Export(env, exports, "adamwUpdate", AdamWUpdateJs);
  Export(env, exports, "sumSquares", SumSquaresJs);
  Export(env, exports, "modelOpsDevices", ModelOpsDevicesJs);
  Export(env, exports, "modelParamLayout", ParamLayoutJs);
  RegisterParamStore(env, exports);
  RegisterMoe(env, exports);
}

}  // namespace sinkflex::addon
