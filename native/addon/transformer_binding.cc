// Bindings of the transformer (native/model/transformer.h): class Transformer (training
// forward/backward over packed batches, batched generation runs), class TransformerSession (a
// sequence's KV cache) and train states as tagged externals. Every array and option is
// validated (TypeError / RangeError naming it); long work runs off the main thread through
// AsyncTask and is serialised per model by its mutex.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/errors.h"
#include "../model/transformer.h"
#include "bindings.h"
#include "model_binding.h"
#include "napi_util.h"

namespace sinkflex::addon {

namespace {

using model::Session;
using model::TrainState;
using model::Transformer;

constexpr napi_type_tag kTransformerTag = {0x1c7e5a3f9d2b4086ull, 0xb3f08d6e2a1c5947ull};
constexpr napi_type_tag kSessionTag = {0x8d2f6b1e4a9c3057ull, 0x5e7a0c3b9f1d2684ull};
constexpr napi_type_tag kStateTag = {0x4b9e2d7a1f6c3085ull, 0x2c8f5a0e7d3b1964ull};
constexpr std::int64_t kMaxSeed = (std::int64_t{1} << 53) - 1;

bool OptionalBool(const Napi::Object& o, const char* key, const std::string& name, bool def) {
  const Napi::Value v = Field(o, key);
  if (IsNullish(v)) return def;
  if (!v.IsBoolean()) ThrowType(o.Env(), name + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

/** A copy of an Int32Array (or null when nullish and optional). */
std::vector<std::int32_t> IntArray(const Napi::Value& v, const std::string& name, std::int64_t length) {
  Napi::Int32Array a = RequireI32(v, name, static_cast<std::size_t>(length));
  return std::vector<std::int32_t>(a.Data(), a.Data() + a.ElementLength());
}

std::int64_t IntArrayLength(const Napi::Value& v, const std::string& name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    ThrowType(v.Env(), name + " must be an Int32Array");
  }
  return static_cast<std::int64_t>(v.As<Napi::TypedArray>().ElementLength());
}

Napi::Int32Array ToInt32Array(Napi::Env env, const std::vector<std::int32_t>& v) {
  Napi::Int32Array a = Napi::Int32Array::New(env, v.size());
  std::copy(v.begin(), v.end(), a.Data());
  return a;
}

Napi::Float32Array ToFloat32Array(Napi::Env env, const std::vector<float>& v) {
  Napi::Float32Array a = Napi::Float32Array::New(env, v.size());
  std::copy(v.begin(), v.end(), a.Data());
  return a;
}

/** A packed batch with its own copies of the arrays (so async work never reads JS memory). */
struct ParsedBatch {
  std::vector<std::int32_t> tokens, targets, positions, documentIds;
  bool hasTargets = false, hasDocuments = false;
  model::TokenBatch View() const {
    model::TokenBatch b;
    b.T = static_cast<std::int64_t>(tokens.size());
    b.tokens = tokens.data();
    b.targets = hasTargets ? targets.data() : nullptr;
    b.positions = positions.data();
    b.documentIds = hasDocuments ? documentIds.data() : nullptr;
    return b;
  }
};

ParsedBatch ParseBatch(const Napi::Value& v) {
  const Napi::Object o = RequireObject(v, "batch");
  OnlyFields(o, "batch", {"tokens", "targets", "positions", "documentIds"});
  ParsedBatch b;
  const std::int64_t T = IntArrayLength(Field(o, "tokens"), "batch.tokens");
  if (T < 1) ThrowRange(v.Env(), "batch.tokens must hold at least one token");
  b.tokens = IntArray(Field(o, "tokens"), "batch.tokens", T);
  b.positions = IntArray(Field(o, "positions"), "batch.positions", T);
  if (!IsNullish(Field(o, "targets"))) {
    b.targets = IntArray(Field(o, "targets"), "batch.targets", T);
    b.hasTargets = true;
  }
  if (!IsNullish(Field(o, "documentIds"))) {
    b.documentIds = IntArray(Field(o, "documentIds"), "batch.documentIds", T);
    b.hasDocuments = true;
  }
  return b;
}

model::TrainForwardOptions ParseForwardOptions(const Napi::Value& v) {
  model::TrainForwardOptions o;
  if (IsNullish(v)) return o;
  const Napi::Object obj = RequireObject(v, "options");
  OnlyFields(obj, "options", {"impl", "temperature", "save", "checkpoint", "headChunk"});
  const Napi::Value impl = Field(obj, "impl");
  if (!IsNullish(impl)) {
    o.impl = RequireEnum(impl, "options.impl", {"fused", "eager"}) == "eager" ? model::AttentionImpl::kEager
                                                                              : model::AttentionImpl::kFused;
  }
  const Napi::Value temp = Field(obj, "temperature");
  if (!IsNullish(temp)) {
    const double t = RequireNumber(temp, "options.temperature");
    if (!(t > 0.0)) ThrowRange(v.Env(), "options.temperature must be > 0, got " + std::to_string(t));
    o.temperature = static_cast<float>(t);
  }
  o.save = OptionalBool(obj, "save", "options.save", false);
  const Napi::Value checkpoint = Field(obj, "checkpoint");
  if (!IsNullish(checkpoint))
    o.checkpointLayers = RequireEnum(checkpoint, "options.checkpoint", {"none", "layers"}) == "layers";
  const Napi::Value chunk = Field(obj, "headChunk");
  if (!IsNullish(chunk)) o.headChunk = RequireInt(chunk, "options.headChunk", 0, std::int64_t{1} << 40);
  return o;
}

/** A train state handed to JavaScript: the state plus the model it belongs to. */
struct StateBox {
  std::shared_ptr<Transformer> model;
  std::shared_ptr<TrainState> state;
};

StateBox* UnwrapState(const Napi::Value& v) {
  if (!v.IsExternal() || !v.As<Napi::Object>().CheckTypeTag(&kStateTag)) {
    ThrowType(v.Env(), "state must be a train state returned by forward({ save: true })");
  }
  return v.As<Napi::External<StateBox>>().Data();
}

// ---- Transformer ------------------------------------------------------------------------------

class TransformerWrap : public Napi::ObjectWrap<TransformerWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Transformer",
                       {
                           InstanceMethod<&TransformerWrap::Forward>("forward"),
                           InstanceMethod<&TransformerWrap::ForwardAsync>("forwardAsync"),
                           InstanceMethod<&TransformerWrap::Backward>("backward"),
                           InstanceMethod<&TransformerWrap::BackwardAsync>("backwardAsync"),
                           InstanceMethod<&TransformerWrap::ReleaseState>("releaseState"),
                           InstanceMethod<&TransformerWrap::StateBytes>("stateBytes"),
                           InstanceMethod<&TransformerWrap::RunAsync>("runAsync"),
                           InstanceMethod<&TransformerWrap::Dispose>("dispose"),
                       });
  }

  explicit TransformerWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<TransformerWrap>(info) {
    Guarded(info, [&] {
      const Napi::Object o = RequireObject(info[0], "options");
      OnlyFields(o, "options", {"config", "store"});
      const model::ModelConfig config = ParseModelConfig(Field(o, "config"), "options.config");
      model_ = std::make_shared<Transformer>(config, UnwrapParamStore(Field(o, "store"), "options.store"));
      info.This().As<Napi::Object>().TypeTag(&kTransformerTag);
      return info.Env().Undefined();
    });
  }

  /** The model, or a thrown Error after dispose. */
  std::shared_ptr<Transformer> Model(Napi::Env env) const {
    if (!model_) throw Napi::Error::New(env, "the transformer has been disposed");
    return model_;
  }

  static TransformerWrap* From(const Napi::Value& v, const std::string& name) {
    if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kTransformerTag)) {
      ThrowType(v.Env(), name + " must be a native Transformer handle");
    }
    return Unwrap(v.As<Napi::Object>());
  }

 private:
  struct ForwardOut {
    HostBuffer<float> logp, entropy;
    std::shared_ptr<TrainState> state;
  };

  static std::function<void()> ForwardWork(std::shared_ptr<Transformer> m, std::shared_ptr<ParsedBatch> batch,
                                           model::TrainForwardOptions opts, std::shared_ptr<ForwardOut> out) {
    return [m, batch, opts, out] {
      const std::lock_guard<std::mutex> lock(m->mutex());
      const std::size_t T = batch->tokens.size();
      out->logp = HostBuffer<float>(T, "transformer logp");
      out->entropy = HostBuffer<float>(T, "transformer entropy");
      out->state = m->Forward(batch->View(), opts, out->logp.data(), out->entropy.data());
    };
  }

  static Napi::Value ForwardResult(Napi::Env env, const std::shared_ptr<Transformer>& m, ForwardOut& out) {
    Napi::Object r = Napi::Object::New(env);
    r.Set("logProbs", AdoptF32(env, std::move(out.logp)));
    r.Set("entropy", AdoptF32(env, std::move(out.entropy)));
    if (out.state) {
      auto* box = new StateBox{m, std::move(out.state)};
      Napi::External<StateBox> ext = Napi::External<StateBox>::New(env, box, [](Napi::Env, StateBox* b) { delete b; });
      ext.TypeTag(&kStateTag);
      r.Set("state", ext);
    } else {
      r.Set("state", env.Null());
    }
    return r;
  }

  Napi::Value Forward(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      auto m = Model(info.Env());
      auto batch = std::make_shared<ParsedBatch>(ParseBatch(info[0]));
      auto out = std::make_shared<ForwardOut>();
      ForwardWork(m, batch, ParseForwardOptions(info[1]), out)();
      return ForwardResult(info.Env(), m, *out);
    });
  }

  Napi::Value ForwardAsync(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      auto m = Model(info.Env());
      auto batch = std::make_shared<ParsedBatch>(ParseBatch(info[0]));
      auto out = std::make_shared<ForwardOut>();
      return Napi::Value(AsyncTask::Run(info.Env(), ForwardWork(m, batch, ParseForwardOptions(info[1]), out),
                                        [m, out](Napi::Env env) { return ForwardResult(env, m, *out); }, {}));
    });
  }

  struct BackwardIn {
    std::vector<float> dlogp, dentropy;
    bool hasDlogp = false, hasDentropy = false;
  };

  /** Parses (state, grads) and checks the state belongs to this model and was not used. */
  std::pair<std::shared_ptr<TrainState>, std::shared_ptr<BackwardIn>> ParseBackward(const Napi::CallbackInfo& info) {
    auto m = Model(info.Env());
    StateBox* box = UnwrapState(info[0]);
    if (!box->state) throw Napi::Error::New(info.Env(), "state has been released");
    if (box->model != m) ThrowRange(info.Env(), "state belongs to another transformer");
    const std::int64_t T = box->state->T;
    auto in = std::make_shared<BackwardIn>();
    const Napi::Object g = RequireObject(info[1], "grads");
    OnlyFields(g, "grads", {"dLogProbs", "dEntropy"});
    Napi::Float32Array a;
    if (OptionalF32(Field(g, "dLogProbs"), "grads.dLogProbs", static_cast<std::size_t>(T), &a)) {
      in->dlogp.assign(a.Data(), a.Data() + T);
      in->hasDlogp = true;
    }
    if (OptionalF32(Field(g, "dEntropy"), "grads.dEntropy", static_cast<std::size_t>(T), &a)) {
      in->dentropy.assign(a.Data(), a.Data() + T);
      in->hasDentropy = true;
    }
    std::shared_ptr<TrainState> state = std::move(box->state);  // a state is used once
    box->model.reset();  // the box no longer keeps the model (and its memory) alive
    return {state, in};
  }

  static std::function<void()> BackwardWork(std::shared_ptr<Transformer> m, std::shared_ptr<TrainState> st,
                                            std::shared_ptr<BackwardIn> in) {
    return [m, st, in] {
      const std::lock_guard<std::mutex> lock(m->mutex());
      m->Backward(*st, in->hasDlogp ? in->dlogp.data() : nullptr, in->hasDentropy ? in->dentropy.data() : nullptr);
    };
  }

  Napi::Value Backward(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      auto [st, in] = ParseBackward(info);
      BackwardWork(Model(info.Env()), st, in)();
      return info.Env().Undefined();
    });
  }

  Napi::Value BackwardAsync(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      auto [st, in] = ParseBackward(info);
      return Napi::Value(AsyncTask::Run(info.Env(), BackwardWork(Model(info.Env()), st, in),
                                        [](Napi::Env env) { return env.Undefined(); }, {}));
    });
  }

  Napi::Value ReleaseState(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      StateBox* box = UnwrapState(info[0]);
      box->state.reset();
      box->model.reset();
      return info.Env().Undefined();
    });
  }

  Napi::Value StateBytes(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      const StateBox* box = UnwrapState(info[0]);
      return Napi::Value(Napi::Number::New(info.Env(), box->state ? static_cast<double>(box->state->Bytes()) : 0.0));
    });
  }

  Napi::Value RunAsync(const Napi::CallbackInfo& info);

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    model_.reset();
    return info.Env().Undefined();
  }

  std::shared_ptr<Transformer> model_;
};

// ---- Session ----------------------------------------------------------------------------------

class SessionWrap : public Napi::ObjectWrap<SessionWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TransformerSession",
                       {
                           InstanceMethod<&SessionWrap::Append>("append"),
                           InstanceMethod<&SessionWrap::Length>("length"),
                           InstanceMethod<&SessionWrap::Processed>("processed"),
                           InstanceMethod<&SessionWrap::Logits>("logits"),
                           InstanceMethod<&SessionWrap::Bytes>("bytes"),
                           InstanceMethod<&SessionWrap::Busy>("busy"),
                           InstanceMethod<&SessionWrap::Dispose>("dispose"),
                           InstanceMethod<&SessionWrap::IsDisposed>("isDisposed"),
                       });
  }

  /** new TransformerSession({ model, seed }) or new TransformerSession({ forkOf, seed }). */
  explicit SessionWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SessionWrap>(info) {
    Guarded(info, [&] {
      Napi::Env env = info.Env();
      const Napi::Object o = RequireObject(info[0], "options");
      OnlyFields(o, "options", {"model", "forkOf", "seed"});
      const auto seed = static_cast<std::uint64_t>(RequireInt(Field(o, "seed"), "options.seed", 0, kMaxSeed));
      const bool fork = !IsNullish(Field(o, "forkOf"));
      if (fork == !IsNullish(Field(o, "model"))) ThrowType(env, "options must have exactly one of model and forkOf");
      if (fork) {
        SessionWrap* from = From(Field(o, "forkOf"), "options.forkOf");
        from->Usable(env);
        model_ = from->model_;
        session_ = std::shared_ptr<Session>(from->session_->Fork(seed));
      } else {
        model_ = TransformerWrap::From(Field(o, "model"), "options.model")->Model(env);
        session_ = std::make_shared<Session>(*model_, seed);
      }
      info.This().As<Napi::Object>().TypeTag(&kSessionTag);
      return env.Undefined();
    });
  }

  static SessionWrap* From(const Napi::Value& v, const std::string& name) {
    if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kSessionTag)) {
      ThrowType(v.Env(), name + " must be a TransformerSession");
    }
    return Unwrap(v.As<Napi::Object>());
  }

  /** Throws unless the session exists and no run is using it. */
  Session& Usable(Napi::Env env) {
    if (!session_) throw Napi::Error::New(env, "the session has been disposed");
    if (session_->busy.load()) throw Napi::Error::New(env, "the session is in use by a running generation");
    return *session_;
  }

  std::shared_ptr<Transformer> model_;
  std::shared_ptr<Session> session_;

 private:
  Napi::Value Append(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Session& s = Usable(info.Env());
      const std::int64_t n = IntArrayLength(info[0], "tokens");
      const std::vector<std::int32_t> tokens = IntArray(info[0], "tokens", n);
      s.Append(tokens.data(), n);
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(s.length())));
    });
  }
  Napi::Value Length(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      if (!session_) throw Napi::Error::New(info.Env(), "the session has been disposed");
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(session_->length())));
    });
  }
  Napi::Value Processed(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      if (!session_) throw Napi::Error::New(info.Env(), "the session has been disposed");
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(session_->processed())));
    });
  }
  Napi::Value Logits(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      const Session& s = Usable(info.Env());
      const float* l = s.logits();
      if (!l) return info.Env().Null();
      const std::size_t V = static_cast<std::size_t>(s.model().config().vocab);
      Napi::Float32Array a = Napi::Float32Array::New(info.Env(), V);
      std::copy(l, l + V, a.Data());
      return Napi::Value(a);
    });
  }
  Napi::Value Bytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), session_ ? static_cast<double>(session_->Bytes()) : 0.0);
  }
  Napi::Value Busy(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), session_ && session_->busy.load());
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    session_.reset();  // a running generation keeps its own reference until it ends
    model_.reset();    // nor does a disposed session keep the model (and its memory) alive
    return info.Env().Undefined();
  }
  Napi::Value IsDisposed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !session_); }
};

model::SampleParams ParseSampleParams(const Napi::Object& o, const std::string& name) {
  OnlyFields(o, name,
             {"kind", "temperature", "topP", "topK", "minP", "repetitionPenalty", "presencePenalty", "frequencyPenalty",
              "logprobsMode", "maxTokens", "stop"});
  model::SampleParams p;
  auto num = [&](const char* key, double def) {
    const Napi::Value f = Field(o, key);
    return IsNullish(f) ? def : RequireNumber(f, name + "." + key);
  };
  p.temperature = num("temperature", 1.0);
  if (!(p.temperature >= 0.0)) ThrowRange(o.Env(), name + ".temperature must be >= 0");
  p.topP = num("topP", 1.0);
  if (!(p.topP > 0.0 && p.topP <= 1.0)) ThrowRange(o.Env(), name + ".topP must be in (0, 1]");
  const Napi::Value k = Field(o, "topK");
  p.topK = IsNullish(k) ? 0 : RequireInt(k, name + ".topK", 0, std::int64_t{1} << 31);
  p.minP = num("minP", 0.0);
  if (!(p.minP >= 0.0 && p.minP <= 1.0)) ThrowRange(o.Env(), name + ".minP must be in [0, 1]");
  p.repetitionPenalty = num("repetitionPenalty", 1.0);
  if (!(p.repetitionPenalty > 0.0) || !std::isfinite(p.repetitionPenalty))
    ThrowRange(o.Env(), name + ".repetitionPenalty must be a finite number > 0");
  p.presencePenalty = num("presencePenalty", 0.0);
  if (!(p.presencePenalty >= -2.0 && p.presencePenalty <= 2.0))
    ThrowRange(o.Env(), name + ".presencePenalty must be in [-2, 2]");
  p.frequencyPenalty = num("frequencyPenalty", 0.0);
  if (!(p.frequencyPenalty >= -2.0 && p.frequencyPenalty <= 2.0))
    ThrowRange(o.Env(), name + ".frequencyPenalty must be in [-2, 2]");
  const Napi::Value mode = Field(o, "logprobsMode");
  if (!IsNullish(mode)) {
    const std::string m = RequireString(mode, name + ".logprobsMode");
    if (m == "tempered")
      p.logprobsMode = model::LogprobsMode::kTempered;
    else if (m == "raw")
      p.logprobsMode = model::LogprobsMode::kRaw;
    else if (m == "processed")
      p.logprobsMode = model::LogprobsMode::kProcessed;
    else
      ThrowRange(o.Env(), name + ".logprobsMode must be 'tempered', 'raw' or 'processed'");
  }
  p.maxTokens = RequireInt(Field(o, "maxTokens"), name + ".maxTokens", 0, std::int64_t{1} << 31);
  const Napi::Value stop = Field(o, "stop");
  if (!IsNullish(stop)) {
    const std::int64_t n = IntArrayLength(stop, name + ".stop");
    p.stop = IntArray(stop, name + ".stop", n);
  }
  return p;
}

/** Clears the busy flags of a run's sessions when the run settles (on the JS thread). */
struct BusyGuard {
  std::vector<std::shared_ptr<Session>> sessions;
  ~BusyGuard() {
    for (auto& s : sessions) s->busy.store(false);
  }
};

/**
 * runAsync(items, options): items = [{ session, job? }], job = { kind: 'sample', temperature,
 * topP, topK, maxTokens, stop } | { kind: 'prefill' }; options = { maxForwards, prefillChunk }.
 * Resolves to [{ tokens, logProbs, done, finishReason, length }] in item order.
 */
Napi::Value TransformerWrap::RunAsync(const Napi::CallbackInfo& info) {
  return Guarded(info, [&] {
    Napi::Env env = info.Env();
    auto m = Model(env);
    if (!info[0].IsArray()) ThrowType(env, "items must be an array");
    const Napi::Array items = info[0].As<Napi::Array>();
    model::RunOptions ro;
    if (!IsNullish(info[1])) {
      const Napi::Object o = RequireObject(info[1], "options");
      OnlyFields(o, "options", {"maxForwards", "prefillChunk"});
      if (!IsNullish(Field(o, "maxForwards")))
        ro.maxForwards = RequireInt(Field(o, "maxForwards"), "options.maxForwards", 0, kMaxSeed);
      if (!IsNullish(Field(o, "prefillChunk")))
        ro.prefillChunk = RequireInt(Field(o, "prefillChunk"), "options.prefillChunk", 1, kMaxSeed);
    }
    // Parse and check everything before touching any session.
    std::vector<std::shared_ptr<Session>> sessions;
    std::vector<int> jobKind;  // 0 none, 1 sample, 2 prefill
    std::vector<model::SampleParams> params;
    for (std::uint32_t i = 0; i < items.Length(); ++i) {
      const std::string where = "items[" + std::to_string(i) + "]";
      const Napi::Object it = RequireObject(items.Get(i), where);
      OnlyFields(it, where, {"session", "job"});
      SessionWrap* sw = SessionWrap::From(Field(it, "session"), where + ".session");
      Session& s = sw->Usable(env);
      if (sw->model_ != m) ThrowRange(env, where + ".session belongs to another transformer");
      for (const auto& other : sessions) {
        if (other.get() == &s) ThrowRange(env, where + ".session appears twice");
      }
      sessions.push_back(sw->session_);
      const Napi::Value job = Field(it, "job");
      if (IsNullish(job)) {
        jobKind.push_back(0);
        params.emplace_back();
        continue;
      }
      const Napi::Object jo = RequireObject(job, where + ".job");
      const std::string kind = RequireEnum(Field(jo, "kind"), where + ".job.kind", {"sample", "prefill"});
      if (s.jobActive()) ThrowRange(env, where + ".session already has a job running");
      if (kind == "sample") {
        params.push_back(ParseSampleParams(jo, where + ".job"));
        jobKind.push_back(1);
      } else {
        OnlyFields(jo, where + ".job", {"kind"});
        params.emplace_back();
        jobKind.push_back(2);
      }
    }
    try {
      for (std::size_t i = 0; i < sessions.size(); ++i) {
        if (jobKind[i] == 1) sessions[i]->StartSample(params[i]);
        if (jobKind[i] == 2) sessions[i]->StartPrefill();
      }
    } catch (...) {  // e.g. sampling from an empty session: undo the jobs started so far
      for (std::size_t i = 0; i < sessions.size(); ++i) {
        if (jobKind[i] != 0) sessions[i]->AbortJob();
      }
      throw;
    }
    for (auto& s : sessions) s->busy.store(true);
    auto guard = std::make_shared<BusyGuard>();  // cleared on the JS thread when the run settles
    guard->sessions = sessions;
    struct Out {
      std::vector<std::vector<std::int32_t>> tokens;
      std::vector<std::vector<float>> logps;
      std::vector<bool> done;
      std::vector<std::string> reason;
      std::vector<std::int64_t> length;
      std::exception_ptr error;
    };
    auto out = std::make_shared<Out>();
    const std::size_t n = sessions.size();
    auto work = [m, sessions, ro, out, n] {
      const std::lock_guard<std::mutex> lock(m->mutex());
      std::vector<Session*> raw;
      for (auto& s : sessions) raw.push_back(s.get());
      try {
        m->Run(raw, ro);
      } catch (...) {
        for (auto& s : sessions) s->AbortJob();
        out->error = std::current_exception();
        return;
      }
      out->tokens.resize(n);
      out->logps.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        sessions[i]->Drain(&out->tokens[i], &out->logps[i]);
        out->done.push_back(!sessions[i]->jobActive());
        out->reason.push_back(model::FinishReasonName(sessions[i]->finishReason()));
        out->length.push_back(sessions[i]->length());
      }
    };
    auto done = [out, n, guard](Napi::Env e) mutable {
      guard.reset();  // the sessions are free again
      if (out->error) std::rethrow_exception(out->error);
      Napi::Array r = Napi::Array::New(e, n);
      for (std::size_t i = 0; i < n; ++i) {
        Napi::Object o = Napi::Object::New(e);
        o.Set("tokens", ToInt32Array(e, out->tokens[i]));
        o.Set("logProbs", ToFloat32Array(e, out->logps[i]));
        o.Set("done", static_cast<bool>(out->done[i]));
        o.Set("finishReason", out->reason[i]);
        o.Set("length", static_cast<double>(out->length[i]));
        r.Set(static_cast<std::uint32_t>(i), o);
      }
      return Napi::Value(r);
    };
    guard.reset();
    sessions.clear();
    return Napi::Value(AsyncTask::Run(env, std::move(work), std::move(done), {}));
  });
}

}  // namespace

void RegisterTransformer(Napi::Env env, Napi::Object exports) {
  exports.Set("Transformer", TransformerWrap::Define(env));
  exports.Set("TransformerSession", SessionWrap::Define(env));
}

}  // namespace sinkflex::addon
