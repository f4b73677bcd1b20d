// Bindings of native/grpo: advantages, their token broadcast and the policy loss, each with a
// Promise variant, plus the parallel copy used as the benchmarks' bandwidth baseline.
// Argument types are checked here (TypeError); values by the kernels' own checks (RangeError).
// Every kernel takes `device` ('cpu' | 'cuda'); the TypeScript layer resolves 'auto' and
// reports an unavailable device, a CUDA implementation plugs in at Dispatch*().
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../core/errors.h"
#include "../grpo/grpo.h"
#include "../grpo/loss_kernel.h"
#include "bindings.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

using grpo::AggMode;
using grpo::Estimator;
using grpo::KlType;

constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

// ---- option helpers ---------------------------------------------------------------------

Napi::Object OptionsObject(const Napi::Value& v, const char* name) {
  if (IsNullish(v)) return Napi::Object::New(v.Env());
  return RequireObject(v, name);
}

bool OptBool(const Napi::Object& o, const char* key, bool dflt) {
  const Napi::Value v = Field(o, key);
  if (IsNullish(v)) return dflt;
  if (!v.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

/** A number option; finiteness and ranges are the kernels' checks (so NaN reaches them). */
std::optional<double> OptNumber(const Napi::Object& o, const char* key) {
  const Napi::Value v = Field(o, key);
  if (IsNullish(v)) return std::nullopt;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

/** The device a kernel runs on; only 'cpu' has kernels in this build. */
void RequireCpuDevice(const Napi::Object& o) {
  const Napi::Value v = Field(o, "device");
  if (IsNullish(v)) return;
  const std::string d = RequireEnum(v, "device", {"cpu", "cuda"});
  if (d == "cuda") throw Napi::Error::New(o.Env(), "device 'cuda' is not available: this build has no CUDA GRPO kernels");
}

/** opts.out: a caller-provided output array of `count` elements, or nothing. */
bool OptOut(const Napi::Object& o, std::size_t count, Napi::Float32Array* out) {
  return OptionalF32(Field(o, "out"), "out", count, out);
}

bool Overlaps(const Napi::TypedArray& a, const Napi::TypedArray& b) {
  const char* pa = static_cast<const char*>(a.ArrayBuffer().Data()) + a.ByteOffset();
  const char* pb = static_cast<const char*>(b.ArrayBuffer().Data()) + b.ByteOffset();
  return pa < pb + b.ByteLength() && pb < pa + a.ByteLength();
}

void RequireNoOverlap(const Napi::TypedArray& out, const std::vector<Napi::TypedArray>& inputs) {
  for (const Napi::TypedArray& in : inputs) {
    if (Overlaps(out, in)) throw Napi::RangeError::New(out.Env(), "out must not overlap an input array");
  }
}

std::vector<Napi::Value> Values(const std::vector<Napi::Float32Array>& arrays) {
  return std::vector<Napi::Value>(arrays.begin(), arrays.end());
}

/** Output storage: the caller's array, or a tracked buffer allocated when the kernel runs. */
struct Output {
  std::size_t count = 0;
  Napi::Reference<Napi::Float32Array> given;
  float* givenData = nullptr;
  HostBuffer<float> own;

  float* Prepare(const char* what) {
    if (givenData) return givenData;
    own = HostBuffer<float>(count, what);
    return own.data();
  }
  Napi::Float32Array ToJs(Napi::Env env) {
    if (givenData) return given.Value();
    return AdoptF32(env, std::move(own));
  }
};

void SetOutput(Output& out, const Napi::Object& opts, std::size_t count) {
  out.count = count;
  Napi::Float32Array arr;
  if (OptOut(opts, count, &arr)) {
    out.given = Napi::Persistent(arr);
    out.givenData = arr.Data();
  }
}

/** Runs now (sync) or on a worker thread (Promise). */
Napi::Value Launch(Napi::Env env, bool async, std::function<void()> work, std::function<Napi::Value(Napi::Env)> done,
                   const std::vector<Napi::Value>& keepAlive) {
  if (!async) {
    work();
    return done(env);
  }
  return AsyncTask::Run(env, std::move(work), std::move(done), keepAlive);
}

// ---- advantages ---------------------------------------------------------------------------

struct AdvantageJob {
  const float* rewards = nullptr;
  const std::int32_t* ids = nullptr;
  std::int64_t n = 0;
  grpo::AdvantageOptions opts;
  Output out;
};

Napi::Value Advantages(const Napi::CallbackInfo& info, bool async) {
  Napi::Env env = info.Env();
  const Napi::Float32Array rewards = RequireF32(info[0], "rewards");
  const std::size_t n = rewards.ElementLength();
  if (n == 0) throw Napi::RangeError::New(env, "rewards must not be empty");
  const Napi::Int32Array ids = RequireI32(info[1], "groupIds", n);
  const Napi::Object o = OptionsObject(info[2], "opts");
  RequireCpuDevice(o);
  auto job = std::make_shared<AdvantageJob>();
  job->rewards = rewards.Data();
  job->ids = ids.Data();
  job->n = static_cast<std::int64_t>(n);
  const Napi::Value est = Field(o, "estimator");
  if (!IsNullish(est)) {
    const std::string e = RequireEnum(est, "estimator", {"grpo", "rloo", "grpo_passk"});
    job->opts.estimator = e == "grpo" ? Estimator::kGrpo : e == "rloo" ? Estimator::kRloo : Estimator::kGrpoPassK;
  }
  job->opts.normByStd = OptBool(o, "normByStd", true);
  if (auto eps = OptNumber(o, "eps")) job->opts.eps = *eps;
  if (!(job->opts.eps >= 0) || !std::isfinite(job->opts.eps)) {
    throw Napi::RangeError::New(env, "eps must be a finite number >= 0, got " + std::to_string(job->opts.eps));
  }
  SetOutput(job->out, o, n);
  std::vector<Napi::Value> keep{rewards, ids};
  if (job->out.givenData) {
    RequireNoOverlap(job->out.given.Value(), {rewards, ids});
    keep.push_back(job->out.given.Value());
  }
  return Launch(
      env, async,
      [job] { grpo::ComputeAdvantages(job->rewards, job->ids, job->n, job->opts, job->out.Prepare("grpo advantages")); },
      [job](Napi::Env e) -> Napi::Value { return job->out.ToJs(e); }, keep);
}

Napi::Value AdvantagesSync(const Napi::CallbackInfo& info) { return Advantages(info, false); }
Napi::Value AdvantagesAsync(const Napi::CallbackInfo& info) { return Advantages(info, true); }

// ---- broadcast ----------------------------------------------------------------------------

struct BroadcastJob {
  const float* adv = nullptr;
  const float* mask = nullptr;
  std::int64_t batch = 0, len = 0;
  Output out;
};

Napi::Value Broadcast(const Napi::CallbackInfo& info, bool async) {
  Napi::Env env = info.Env();
  const std::int64_t batch = RequireInt(info[2], "batch", 1, kMaxElements);
  const std::int64_t len = RequireInt(info[3], "responseLen", 1, kMaxElements);
  if (batch * len > kMaxElements) throw Napi::RangeError::New(env, "batch * responseLen is too large");
  const Napi::Float32Array adv = RequireF32(info[0], "adv", static_cast<std::size_t>(batch));
  const Napi::Float32Array mask = RequireF32(info[1], "responseMask", static_cast<std::size_t>(batch * len));
  const Napi::Object o = OptionsObject(info[4], "opts");
  RequireCpuDevice(o);
  auto job = std::make_shared<BroadcastJob>();
  job->adv = adv.Data();
  job->mask = mask.Data();
  job->batch = batch;
  job->len = len;
  SetOutput(job->out, o, static_cast<std::size_t>(batch * len));
  std::vector<Napi::Value> keep{adv, mask};
  if (job->out.givenData) {
    RequireNoOverlap(job->out.given.Value(), {adv, mask});
    keep.push_back(job->out.given.Value());
  }
  return Launch(
      env, async,
      [job] { grpo::BroadcastAdvantages(job->adv, job->mask, job->batch, job->len, job->out.Prepare("grpo broadcast")); },
      [job](Napi::Env e) -> Napi::Value { return job->out.ToJs(e); }, keep);
}

Napi::Value BroadcastSync(const Napi::CallbackInfo& info) { return Broadcast(info, false); }
Napi::Value BroadcastAsync(const Napi::CallbackInfo& info) { return Broadcast(info, true); }

// ---- policy loss --------------------------------------------------------------------------

struct LossJob {
  grpo::PolicyLossInputs in;
  grpo::PolicyLossOptions opts;
  grpo::PolicyLossResult result;
  Output out;
};

KlType ParseKl(const Napi::Value& v) {
  const std::string k = RequireEnum(v, "klType", {"k1", "k2", "k3", "abs", "kl", "mse", "low_var_kl"});
  if (k == "k1" || k == "kl") return KlType::kK1;
  if (k == "k2" || k == "mse") return KlType::kK2;
  if (k == "abs") return KlType::kAbs;
  return KlType::kK3;
}

AggMode ParseAgg(const Napi::Value& v) {
  const std::string m = RequireEnum(v, "aggMode", {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                                                   "seq-mean-token-sum-norm"});
  if (m == "token-mean") return AggMode::kTokenMean;
  if (m == "seq-mean-token-sum") return AggMode::kSeqMeanTokenSum;
  if (m == "seq-mean-token-mean") return AggMode::kSeqMeanTokenMean;
  return AggMode::kSeqMeanTokenSumNorm;
}

Napi::Object LossResult(Napi::Env env, LossJob& job) {
  const grpo::PolicyLossResult& r = job.result;
  Napi::Object metrics = Napi::Object::New(env);
  metrics.Set("actor/pg_loss", r.pgLoss);
  metrics.Set("actor/pg_clipfrac", r.pgClipfrac);
  metrics.Set("actor/pg_clipfrac_lower", r.pgClipfracLower);
  metrics.Set("actor/ppo_kl", r.ppoKl);
  if (job.in.refLogProbs) metrics.Set("actor/kl_loss", r.klLoss);
  if (job.in.entropy) metrics.Set("actor/entropy", r.entropy);
  Napi::Object o = Napi::Object::New(env);
  o.Set("loss", r.loss);
  o.Set("dLogProbs", job.out.ToJs(env));
  o.Set("metrics", metrics);
  return o;
}

Napi::Value Loss(const Napi::CallbackInfo& info, bool async) {
  Napi::Env env = info.Env();
  const Napi::Object inp = RequireObject(info[0], "inp");
  const Napi::Object shape = RequireObject(info[1], "shape");
  const Napi::Object o = OptionsObject(info[2], "opts");
  const std::int64_t batch = RequireInt(Field(shape, "batch"), "shape.batch", 1, kMaxElements);
  const std::int64_t len = RequireInt(Field(shape, "responseLen"), "shape.responseLen", 1, kMaxElements);
  if (batch * len > kMaxElements) throw Napi::RangeError::New(env, "batch * responseLen is too large");
  const std::size_t total = static_cast<std::size_t>(batch * len);
  RequireCpuDevice(o);

  std::vector<Napi::Float32Array> arrays;
  auto job = std::make_shared<LossJob>();
  grpo::PolicyLossInputs& in = job->in;
  in.batch = batch;
  in.responseLen = len;
  auto token = [&](const char* key) {
    const Napi::Float32Array a = RequireF32(Field(inp, key), key, total);
    arrays.push_back(a);
    return a.Data();
  };
  in.logProbs = token("logProbs");
  in.oldLogProbs = token("oldLogProbs");
  const Napi::Float32Array adv = RequireF32(Field(inp, "advantages"), "advantages");
  if (adv.ElementLength() != total && adv.ElementLength() != static_cast<std::size_t>(batch)) {
    throw Napi::RangeError::New(env, "advantages has length " + std::to_string(adv.ElementLength()) + ", expected " +
                                         std::to_string(total) + " (batch * responseLen) or " + std::to_string(batch) +
                                         " (batch)");
  }
  arrays.push_back(adv);
  in.advantages = adv.Data();
  in.advantagesPerToken = adv.ElementLength() == total;
  in.responseMask = token("responseMask");
  Napi::Float32Array opt;
  if (OptionalF32(Field(inp, "refLogProbs"), "refLogProbs", total, &opt)) {
    arrays.push_back(opt);
    in.refLogProbs = opt.Data();
  }
  if (OptionalF32(Field(inp, "entropy"), "entropy", total, &opt)) {
    arrays.push_back(opt);
    in.entropy = opt.Data();
  }

  grpo::PolicyLossOptions& po = job->opts;
  if (auto v = OptNumber(o, "clipLow")) po.clipLow = *v;
  if (auto v = OptNumber(o, "clipHigh")) po.clipHigh = *v;
  if (auto v = OptNumber(o, "dualClipC")) po.dualClipC = *v;
  const Napi::Value kl = Field(o, "klType");
  po.klType = !IsNullish(kl) ? ParseKl(kl) : in.refLogProbs ? KlType::kK3 : KlType::kNone;
  // With reference log-probs the KL loss is on, at VERL's kl_loss_coef default.
  po.klCoef = in.refLogProbs ? 0.001 : 0.0;
  if (auto v = OptNumber(o, "klCoef")) po.klCoef = *v;
  if (auto v = OptNumber(o, "entropyCoef")) po.entropyCoef = *v;
  const Napi::Value agg = Field(o, "aggMode");
  if (!IsNullish(agg)) po.aggMode = ParseAgg(agg);
  po.lossScale = OptNumber(o, "lossScale");
  po.globalTokenCount = OptNumber(o, "globalTokenCount");
  po.globalSeqCount = OptNumber(o, "globalSeqCount");
  grpo::ValidatePolicyLoss(in, po);

  SetOutput(job->out, o, total);
  std::vector<Napi::Value> keep = Values(arrays);
  if (job->out.givenData) {
    RequireNoOverlap(job->out.given.Value(), std::vector<Napi::TypedArray>(arrays.begin(), arrays.end()));
    keep.push_back(job->out.given.Value());
  }
  return Launch(
      env, async,
      [job] { job->result = grpo::PolicyLoss(job->in, job->opts, job->out.Prepare("grpo policyLoss: dLogProbs")); },
      [job](Napi::Env e) -> Napi::Value { return LossResult(e, *job); }, keep);
}

Napi::Value LossSync(const Napi::CallbackInfo& info) { return Loss(info, false); }
Napi::Value LossAsync(const Napi::CallbackInfo& info) { return Loss(info, true); }

// ---- device list and the copy baseline ------------------------------------------------------

Napi::Value Devices(const Napi::CallbackInfo& info) {
  Napi::Array list = Napi::Array::New(info.Env());
  list.Set(0u, "cpu");
  return list;
}

/** Which build of the CPU token kernel runs here: 'avx512', 'avx2' or 'generic'. */
Napi::Value KernelIsa(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), grpo::LossPieceIsa()); }

Napi::Value Copy(const Napi::CallbackInfo& info) {
  const Napi::Float32Array src = RequireF32(info[1], "src");
  Napi::Float32Array dst = RequireF32(info[0], "dst", src.ElementLength());
  if (Overlaps(dst, src)) throw Napi::RangeError::New(info.Env(), "dst must not overlap src");
  grpo::ParallelCopy(dst.Data(), src.Data(), static_cast<std::int64_t>(src.ElementLength()));
  return info.Env().Undefined();
}

}  // namespace

void RegisterGrpo(Napi::Env env, Napi::Object exports) {
  Export(env, exports, "grpoDevices", Devices);
  Export(env, exports, "grpoAdvantages", AdvantagesSync);
  Export(env, exports, "grpoAdvantagesAsync", AdvantagesAsync);
  Export(env, exports, "grpoBroadcast", BroadcastSync);
  Export(env, exports, "grpoBroadcastAsync", BroadcastAsync);
  Export(env, exports, "grpoPolicyLoss", LossSync);
  Export(env, exports, "grpoPolicyLossAsync", LossAsync);
  Export(env, exports, "grpoCopy", Copy);
  Export(env, exports, "grpoKernelIsa", KernelIsa);
}

}  // namespace sinkflex::addon
