// Bindings of native/grpo: advantages, their token broadcast and the policy loss, each with a
// Promise variant, plus the parallel copy used as the benchmarks' bandwidth baseline.
// Argument types are checked here (TypeError); values by the kernels' own checks (RangeError).
// Float arguments are Float32Arrays or float32 DeviceTensors (grpo_args.h); a call runs on its
// tensors' device or on `device` ('cpu' | 'cuda' | 'cuda:k'; the TypeScript layer resolves
// 'auto'), on the CPU kernels or the registered CUDA backend (native/grpo/grpo_cuda.cu).
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
#include "../core/cuda_device.h"
#include "../grpo/grpo_cuda.h"
#include "../grpo/loss_kernel.h"
#include "bindings.h"
#include "grpo_args.h"
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

/** The CUDA GRPO backend, or DeviceError in builds without it. */
const grpo::CudaGrpoBackend& Backend() {
  const grpo::CudaGrpoBackend* b = grpo::GetCudaGrpoBackend();
  if (b == nullptr) throw DeviceError("this build has no CUDA GRPO kernels");
  return *b;
}

/** A device check failed: reruns the CPU kernel on host copies, which throws the exact error. */
[[noreturn]] void RethrowOnCpu(const std::function<void()>& cpu, const char* what) {
  cpu();
  throw DeviceError(std::string(what) + ": the CUDA kernel flagged an invalid input the CPU kernel accepts");
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

constexpr std::size_t kAnyCount = static_cast<std::size_t>(-1);

// ---- advantages ---------------------------------------------------------------------------

struct AdvantageJob {
  FloatIn rewards;
  const std::int32_t* ids = nullptr;
  std::int64_t n = 0;
  int slot = kCpuDevice;
  grpo::AdvantageOptions opts;
  FloatOut out;

  void Run() {
    Staging st(slot);
    if (!st.onCuda()) {
      grpo::ComputeAdvantages(st.Host(rewards, "grpo advantages: rewards"), ids, n, opts,
                              out.HostData("grpo advantages"));
      return;
    }
    const grpo::CudaGrpoBackend& cb = Backend();
    const grpo::GroupPlan plan = grpo::PlanGroups(ids, n);
    const grpo::DeviceCheck check = cb.advantages(slot - 1, st.Device(rewards, "grpo advantages: rewards"), n, plan,
                                                  opts, out.DeviceData("grpo advantages"));
    if (check.bad >= 0 || (opts.estimator == Estimator::kGrpoPassK && plan.singleton >= 0)) {
      RethrowOnCpu(
          [&] {
            HostBuffer<float> scratch(static_cast<std::size_t>(n), "grpo advantages: check");
            grpo::ComputeAdvantages(st.Host(rewards, "grpo advantages: rewards"), ids, n, opts, scratch.data());
          },
          "grpo advantages");
    }
    out.Download("grpo advantages");
  }
};

Napi::Value Advantages(const Napi::CallbackInfo& info, bool async) {
  Napi::Env env = info.Env();
  auto job = std::make_shared<AdvantageJob>();
  job->rewards = ReadFloatIn(info[0], "rewards", kAnyCount);
  const std::size_t n = job->rewards.count;
  if (n == 0) throw Napi::RangeError::New(env, "rewards must not be empty");
  const Napi::Int32Array ids = RequireI32(info[1], "groupIds", n);
  const Napi::Object o = OptionsObject(info[2], "opts");
  bool tensors = false;
  job->slot = CallSlot(env, {&job->rewards}, OptionalDeviceSlot(o), &tensors);
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
  SetFloatOut(job->out, o, n, tensors, job->slot, {static_cast<std::int64_t>(n)}, {&job->rewards});
  std::vector<Napi::Value> keep{info[0], ids};
  if (job->out.givenData) {
    RequireNoOverlap(job->out.given.Value(), {ids});
    keep.push_back(job->out.given.Value());
  }
  return Launch(
      env, async, [job] { job->Run(); }, [job](Napi::Env e) -> Napi::Value { return job->out.ToJs(e); }, keep);
}

Napi::Value AdvantagesSync(const Napi::CallbackInfo& info) { return Advantages(info, false); }
Napi::Value AdvantagesAsync(const Napi::CallbackInfo& info) { return Advantages(info, true); }

// ---- broadcast ----------------------------------------------------------------------------

struct BroadcastJob {
  FloatIn adv, mask;
  std::int64_t batch = 0, len = 0;
  int slot = kCpuDevice;
  FloatOut out;

  void Run() {
    Staging st(slot);
    auto cpu = [&](float* dst) {
      grpo::BroadcastAdvantages(st.Host(adv, "grpo broadcast: adv"), st.Host(mask, "grpo broadcast: responseMask"),
                                batch, len, dst);
    };
    if (!st.onCuda()) {
      cpu(out.HostData("grpo broadcast"));
      return;
    }
    const grpo::DeviceCheck check = Backend().broadcast(slot - 1, st.Device(adv, "grpo broadcast: adv"),
                                                        st.Device(mask, "grpo broadcast: responseMask"), batch, len,
                                                        out.DeviceData("grpo broadcast"));
    if (check.bad >= 0) {
      RethrowOnCpu(
          [&] {
            HostBuffer<float> scratch(static_cast<std::size_t>(batch * len), "grpo broadcast: check");
            cpu(scratch.data());
          },
          "grpo broadcast");
    }
    out.Download("grpo broadcast");
  }
};

Napi::Value Broadcast(const Napi::CallbackInfo& info, bool async) {
  Napi::Env env = info.Env();
  const std::int64_t batch = RequireInt(info[2], "batch", 1, kMaxElements);
  const std::int64_t len = RequireInt(info[3], "responseLen", 1, kMaxElements);
  if (batch * len > kMaxElements) throw Napi::RangeError::New(env, "batch * responseLen is too large");
  auto job = std::make_shared<BroadcastJob>();
  job->adv = ReadFloatIn(info[0], "adv", static_cast<std::size_t>(batch));
  job->mask = ReadFloatIn(info[1], "responseMask", static_cast<std::size_t>(batch * len));
  const Napi::Object o = OptionsObject(info[4], "opts");
  bool tensors = false;
  job->slot = CallSlot(env, {&job->adv, &job->mask}, OptionalDeviceSlot(o), &tensors);
  job->batch = batch;
  job->len = len;
  SetFloatOut(job->out, o, static_cast<std::size_t>(batch * len), tensors, job->slot, {batch, len},
              {&job->adv, &job->mask});
  std::vector<Napi::Value> keep{info[0], info[1]};
  if (job->out.givenData) keep.push_back(job->out.given.Value());
  return Launch(
      env, async, [job] { job->Run(); }, [job](Napi::Env e) -> Napi::Value { return job->out.ToJs(e); }, keep);
}

Napi::Value BroadcastSync(const Napi::CallbackInfo& info) { return Broadcast(info, false); }
Napi::Value BroadcastAsync(const Napi::CallbackInfo& info) { return Broadcast(info, true); }

// ---- policy loss --------------------------------------------------------------------------

struct LossJob {
  FloatIn logp, old, adv, mask, ref, ent;
  grpo::PolicyLossInputs in;  // sizes and flags; pointers are set when it runs
  grpo::PolicyLossOptions opts;
  grpo::PolicyLossResult result;
  int slot = kCpuDevice;
  FloatOut out;

  grpo::PolicyLossInputs Bind(Staging& st, bool device) const {
    grpo::PolicyLossInputs b = in;
    auto view = [&](const FloatIn& f, const char* what) { return device ? st.Device(f, what) : st.Host(f, what); };
    b.logProbs = view(logp, "grpo policyLoss: logProbs");
    b.oldLogProbs = view(old, "grpo policyLoss: oldLogProbs");
    b.advantages = view(adv, "grpo policyLoss: advantages");
    b.responseMask = view(mask, "grpo policyLoss: responseMask");
    b.refLogProbs = view(ref, "grpo policyLoss: refLogProbs");
    b.entropy = view(ent, "grpo policyLoss: entropy");
    return b;
  }

  void Run() {
    Staging st(slot);
    if (!st.onCuda()) {
      result = grpo::PolicyLoss(Bind(st, false), opts, out.HostData("grpo policyLoss: dLogProbs"));
      return;
    }
    bool ok = false;
    result = Backend().policyLoss(slot - 1, Bind(st, true), opts, out.DeviceData("grpo policyLoss: dLogProbs"), &ok);
    if (!ok) {
      RethrowOnCpu(
          [&] {
            HostBuffer<float> scratch(static_cast<std::size_t>(in.batch * in.responseLen), "grpo policyLoss: check");
            grpo::PolicyLoss(Bind(st, false), opts, scratch.data());
          },
          "grpo policyLoss");
    }
    out.Download("grpo policyLoss: dLogProbs");
  }
};

KlType ParseKl(const Napi::Value& v) {
  const std::string k = RequireEnum(v, "klType", {"k1", "k2", "k3", "abs", "kl", "mse", "low_var_kl"});
  if (k == "k1" || k == "kl") return KlType::kK1;
  if (k == "k2" || k == "mse") return KlType::kK2;
  if (k == "abs") return KlType::kAbs;
  return KlType::kK3;
}

AggMode ParseAgg(const Napi::Value& v) {
  const std::string m =
      RequireEnum(v, "aggMode", {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"});
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
  if (job.ref.given()) metrics.Set("actor/kl_loss", r.klLoss);
  if (job.ent.given()) metrics.Set("actor/entropy", r.entropy);
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

  auto job = std::make_shared<LossJob>();
  std::vector<Napi::Value> keep{inp};
  auto read = [&](const char* key, std::size_t count, bool optional) {
    const Napi::Value v = Field(inp, key);
    keep.push_back(v);
    return ReadFloatIn(v, key, count, optional);
  };
  job->logp = read("logProbs", total, false);
  job->old = read("oldLogProbs", total, false);
  job->adv = read("advantages", kAnyCount, false);
  if (job->adv.count != total && job->adv.count != static_cast<std::size_t>(batch)) {
    throw Napi::RangeError::New(env, "advantages has length " + std::to_string(job->adv.count) + ", expected " +
                                         std::to_string(total) + " (batch * responseLen) or " + std::to_string(batch) +
                                         " (batch)");
  }
  job->mask = read("responseMask", total, false);
  job->ref = read("refLogProbs", total, true);
  job->ent = read("entropy", total, true);
  const std::vector<const FloatIn*> all{&job->logp, &job->old, &job->adv, &job->mask, &job->ref, &job->ent};
  bool tensors = false;
  job->slot = CallSlot(env, all, OptionalDeviceSlot(o), &tensors);

  grpo::PolicyLossInputs& in = job->in;
  in.batch = batch;
  in.responseLen = len;
  in.advantagesPerToken = job->adv.count == total;
  // Placeholders so that ValidatePolicyLoss sees which inputs are present.
  static const float kPresent = 0;
  in.logProbs = in.oldLogProbs = in.advantages = in.responseMask = &kPresent;
  in.refLogProbs = job->ref.given() ? &kPresent : nullptr;
  in.entropy = job->ent.given() ? &kPresent : nullptr;

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

  SetFloatOut(job->out, o, total, tensors, job->slot, {batch, len}, all);
  if (job->out.givenData) keep.push_back(job->out.given.Value());
  return Launch(
      env, async, [job] { job->Run(); }, [job](Napi::Env e) -> Napi::Value { return LossResult(e, *job); }, keep);
}

Napi::Value LossSync(const Napi::CallbackInfo& info) { return Loss(info, false); }
Napi::Value LossAsync(const Napi::CallbackInfo& info) { return Loss(info, true); }

// ---- device list and the copy baseline ------------------------------------------------------

Napi::Value Devices(const Napi::CallbackInfo& info) {
  Napi::Array list = Napi::Array::New(info.Env());
  list.Set(0u, "cpu");
  if (grpo::GetCudaGrpoBackend() != nullptr && !CudaDevices().empty()) list.Set(1u, "cuda");
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
