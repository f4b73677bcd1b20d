// The ParamStore class: a JavaScript handle on a native model::ParamStore (parameters,
// gradients, AdamW moments, step counter and RNG state). Memory is released by dispose() (or
// when the handle is garbage collected); views returned by view() alias the native buffers and
// are detached (length 0) by dispose(), so they can never reach freed memory. A store made with
// { device: 'cuda' | 'cuda:k' } keeps every buffer in that GPU's memory: read()/write() copy,
// view() is refused (there is no host memory to alias).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../model/lora.h"
#include "../model/model_config.h"
#include "../model/param_store.h"
#include "bindings.h"
#include "model_binding.h"
#include "napi_util.h"

namespace sinkflex::addon {

namespace {
using model::ParamBuffer;
using model::ParamStore;

// Marks ParamStore handles so that other bindings can recognise them (UnwrapParamStore).
constexpr napi_type_tag kParamStoreTag = {0x6a1f3c9e2b8d4f07ull, 0x93e5b71c0d2a6f48ull};

model::ParamInit ParseInit(const Napi::Value& v, const std::string& name) {
  if (IsNullish(v)) return model::ParamInit::kNormal;
  const std::string s = RequireEnum(v, name, {"normal", "uniform", "ones", "zeros"});
  return s == "ones"      ? model::ParamInit::kOnes
         : s == "zeros"   ? model::ParamInit::kZeros
         : s == "uniform" ? model::ParamInit::kUniform
                          : model::ParamInit::kNormal;
}

std::vector<model::ParamSpec> ParseSpecs(const Napi::Value& v, const std::string& name = "options.specs") {
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), name + " must be an array");
  const Napi::Array arr = v.As<Napi::Array>();
  std::vector<model::ParamSpec> specs;
  for (std::uint32_t i = 0; i < arr.Length(); ++i) {
    const std::string where = name + "[" + std::to_string(i) + "]";
    const Napi::Object o = RequireObject(arr.Get(i), where);
    model::ParamSpec s;
    s.name = RequireString(Field(o, "name"), where + ".name");
    const Napi::Value shape = Field(o, "shape");
    if (!shape.IsArray()) throw Napi::TypeError::New(v.Env(), where + ".shape must be an array of integers");
    const Napi::Array dims = shape.As<Napi::Array>();
    for (std::uint32_t d = 0; d < dims.Length(); ++d) {
      s.shape.push_back(RequireInt(dims.Get(d), where + ".shape[" + std::to_string(d) + "]", 1, std::int64_t{1} << 31));
    }
    s.init = ParseInit(Field(o, "init"), where + ".init");
    const Napi::Value dtype = Field(o, "dtype");
    if (!IsNullish(dtype)) {
      const std::string d = RequireEnum(dtype, where + ".dtype", {"float32", "bfloat16", "mxfp4"});
      s.dtype = d == "bfloat16" ? model::ParamDtype::kBFloat16
                : d == "mxfp4"  ? model::ParamDtype::kMxfp4
                                : model::ParamDtype::kFloat32;
    }
    const Napi::Value trainable = Field(o, "trainable");
    if (!IsNullish(trainable)) {
      if (!trainable.IsBoolean()) throw Napi::TypeError::New(v.Env(), where + ".trainable must be a boolean");
      s.trainable = trainable.As<Napi::Boolean>().Value();
    } else {
      s.trainable = s.dtype == model::ParamDtype::kFloat32;  // bfloat16 and MXFP4 parameters are frozen
    }
    const Napi::Value std = Field(o, "std");
    s.std = IsNullish(std) ? 0.02 : RequireNumber(std, where + ".std");
    const Napi::Value decay = Field(o, "decay");
    if (!IsNullish(decay)) {
      if (!decay.IsBoolean()) throw Napi::TypeError::New(v.Env(), where + ".decay must be a boolean");
      s.decay = decay.As<Napi::Boolean>().Value();
    } else {
      s.decay = s.shape.size() >= 2;
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

ParamBuffer ParseWhich(const Napi::Value& v) {
  if (IsNullish(v)) return ParamBuffer::kValue;
  const std::string s = RequireEnum(v, "which", {"value", "grad", "m", "v"});
  return s == "grad" ? ParamBuffer::kGrad
         : s == "m"  ? ParamBuffer::kM
         : s == "v"  ? ParamBuffer::kV
                     : ParamBuffer::kValue;
}

class ParamStoreWrap : public Napi::ObjectWrap<ParamStoreWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ParamStore",
                       {
                           InstanceMethod<&ParamStoreWrap::Names>("names"),
                           InstanceMethod<&ParamStoreWrap::Info>("info"),
                           InstanceMethod<&ParamStoreWrap::Read>("read"),
                           InstanceMethod<&ParamStoreWrap::Write>("write"),
                           InstanceMethod<&ParamStoreWrap::ReadBf16>("readBf16"),
                           InstanceMethod<&ParamStoreWrap::ReadMxfp4>("readMxfp4"),
                           InstanceMethod<&ParamStoreWrap::WriteMxfp4>("writeMxfp4"),
                           InstanceMethod<&ParamStoreWrap::Bytes>("bytes"),
                           InstanceMethod<&ParamStoreWrap::TrainableNumel>("trainableNumel"),
                           InstanceMethod<&ParamStoreWrap::View>("view"),
                           InstanceMethod<&ParamStoreWrap::ZeroGrad>("zeroGrad"),
                           InstanceMethod<&ParamStoreWrap::GradNorm>("gradNorm"),
                           InstanceMethod<&ParamStoreWrap::AdamWStep>("adamwStep"),
                           InstanceMethod<&ParamStoreWrap::GetStep>("getStep"),
                           InstanceMethod<&ParamStoreWrap::SetStep>("setStep"),
                           InstanceMethod<&ParamStoreWrap::RngState>("rngState"),
                           InstanceMethod<&ParamStoreWrap::SetRngState>("setRngState"),
                           InstanceMethod<&ParamStoreWrap::Numel>("numel"),
                           InstanceMethod<&ParamStoreWrap::Seed>("seed"),
                           InstanceMethod<&ParamStoreWrap::Device>("device"),
                           InstanceMethod<&ParamStoreWrap::Append>("append"),
                           InstanceMethod<&ParamStoreWrap::Truncate>("truncate"),
                           InstanceMethod<&ParamStoreWrap::Freeze>("freeze"),
                           InstanceMethod<&ParamStoreWrap::LayoutVersion>("layoutVersion"),
                           InstanceMethod<&ParamStoreWrap::MergeLora>("mergeLora"),
                           InstanceMethod<&ParamStoreWrap::Dispose>("dispose"),
                           InstanceMethod<&ParamStoreWrap::IsDisposed>("isDisposed"),
                       });
  }

  explicit ParamStoreWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ParamStoreWrap>(info) {
    Guarded(info, [&] {
      const Napi::Object o = RequireObject(info[0], "options");
      const std::int64_t seed = RequireInt(Field(o, "seed"), "options.seed", 0, (std::int64_t{1} << 53) - 1);
      const bool hasSpecs = !IsNullish(Field(o, "specs")), hasConfig = !IsNullish(Field(o, "config"));
      if (hasSpecs == hasConfig)
        throw Napi::TypeError::New(info.Env(), "options must have exactly one of specs and config");
      std::vector<model::ParamSpec> specs =
          hasSpecs ? ParseSpecs(Field(o, "specs"))
                   : model::ParamLayout(ParseModelConfig(Field(o, "config"), "options.config"));
      const Napi::Value device = Field(o, "device");
      const int slot = IsNullish(device) ? kCpuDevice : RequireDevice(device, "options.device");
      store_ = std::make_shared<ParamStore>(std::move(specs), static_cast<std::uint64_t>(seed), slot - 1);
      info.This().As<Napi::Object>().TypeTag(&kParamStoreTag);
      return info.Env().Undefined();
    });
  }

 public:
  /** The native store (null after dispose). */
  const std::shared_ptr<ParamStore>& shared() const { return store_; }

 private:
  ParamStore& Store(Napi::Env env) {
    if (!store_) throw Napi::Error::New(env, "ParamStore has been disposed");
    return *store_;
  }
  model::Parameter& Param(const Napi::CallbackInfo& info) {
    return Store(info.Env()).Get(RequireString(info[0], "name"));
  }

  Napi::Value Names(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      ParamStore& s = Store(info.Env());
      Napi::Array a = Napi::Array::New(info.Env(), s.size());
      for (std::size_t i = 0; i < s.size(); ++i) a.Set(static_cast<std::uint32_t>(i), s.at(i).spec.name);
      return Napi::Value(a);
    });
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Napi::Env env = info.Env();
      ParamStore& s = Store(env);
      Napi::Array a = Napi::Array::New(env, s.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        const model::Parameter& p = s.at(i);
        Napi::Object o = Napi::Object::New(env);
        o.Set("name", p.spec.name);
        Napi::Array shape = Napi::Array::New(env, p.spec.shape.size());
        for (std::size_t d = 0; d < p.spec.shape.size(); ++d) {
          shape.Set(static_cast<std::uint32_t>(d), static_cast<double>(p.spec.shape[d]));
        }
        o.Set("shape", shape);
        o.Set("numel", static_cast<double>(p.numel));
        o.Set("init", p.spec.init == model::ParamInit::kNormal    ? "normal"
                      : p.spec.init == model::ParamInit::kUniform ? "uniform"
                      : p.spec.init == model::ParamInit::kOnes    ? "ones"
                                                                  : "zeros");
        o.Set("std", p.spec.std);
        o.Set("decay", p.spec.decay);
        o.Set("dtype", p.mxfp4() ? "mxfp4" : p.bf16() ? "bfloat16" : "float32");
        o.Set("trainable", p.trainable());
        a.Set(static_cast<std::uint32_t>(i), o);
      }
      return Napi::Value(a);
    });
  }

  Napi::Value Read(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      model::Parameter& p = Param(info);
      const ParamBuffer which = ParseWhich(info[1]);
      Napi::Float32Array out = NewTrackedF32(info.Env(), static_cast<std::size_t>(p.numel), "ParamStore.read copy");
      store_->Read(p, which, out.Data());
      return Napi::Value(out);
    });
  }

  Napi::Value Write(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      model::Parameter& p = Param(info);
      const ParamBuffer which = ParseWhich(info[2]);
      const Napi::Value v = info[1];
      if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array) {
        // raw bfloat16 bits, copied without rounding (a loader's checkpoint bits)
        const Napi::Uint16Array bits = v.As<Napi::Uint16Array>();
        if (!p.bf16() || which != ParamBuffer::kValue) {
          throw Napi::TypeError::New(info.Env(),
                                     "data: a Uint16Array (bfloat16 bits) is accepted only for the value of a "
                                     "bfloat16 parameter; '" +
                                         p.spec.name + "' is " +
                                         (p.bf16()    ? "bfloat16 (write its value)"
                                          : p.mxfp4() ? "MXFP4 (use writeMxfp4)"
                                                      : "float32"));
        }
        if (bits.ElementLength() != static_cast<std::size_t>(p.numel)) {
          throw Napi::RangeError::New(info.Env(), "data must have " + std::to_string(p.numel) + " elements, got " +
                                                      std::to_string(bits.ElementLength()));
        }
        store_->WriteBf16(p, bits.Data());
        return info.Env().Undefined();
      }
      const Napi::Float32Array data = RequireF32(v, "data", static_cast<std::size_t>(p.numel));
      store_->Write(p, which, data.Data());
      return info.Env().Undefined();
    });
  }

  Napi::Value ReadBf16(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      model::Parameter& p = Param(info);
      if (!p.bf16() && !p.mxfp4())
        throw Napi::TypeError::New(info.Env(), "readBf16: parameter '" + p.spec.name + "' is float32 (use read)");
      Napi::Uint16Array out = Napi::Uint16Array::New(info.Env(), static_cast<std::size_t>(p.numel));
      store_->ReadBf16(p, out.Data());
      return Napi::Value(out);
    });
  }

  /** readMxfp4(name) -> { blocks: Uint8Array (numel / 2), scales: Uint8Array (numel / 32) }. */
  Napi::Value ReadMxfp4(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      model::Parameter& p = Param(info);
      if (!p.mxfp4()) throw Napi::TypeError::New(info.Env(), "readMxfp4: parameter '" + p.spec.name + "' is not MXFP4");
      const std::size_t n = static_cast<std::size_t>(p.numel);
      Napi::Uint8Array blocks = Napi::Uint8Array::New(info.Env(), n / 2);
      Napi::Uint8Array scales = Napi::Uint8Array::New(info.Env(), n / 32);
      store_->ReadMxfp4(p, blocks.Data(), scales.Data());
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("blocks", blocks);
      o.Set("scales", scales);
      return Napi::Value(o);
    });
  }

  /** writeMxfp4(name, blocks: Uint8Array (numel / 2), scales: Uint8Array (numel / 32)). */
  Napi::Value WriteMxfp4(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Napi::Env env = info.Env();
      model::Parameter& p = Param(info);
      if (!p.mxfp4()) throw Napi::TypeError::New(env, "writeMxfp4: parameter '" + p.spec.name + "' is not MXFP4");
      const std::size_t n = static_cast<std::size_t>(p.numel);
      auto bytes = [&](const Napi::Value& v, const char* what, std::size_t len) {
        if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
          throw Napi::TypeError::New(
              env, std::string("writeMxfp4: ") + what + " of '" + p.spec.name + "' must be a Uint8Array");
        }
        const Napi::Uint8Array a = v.As<Napi::Uint8Array>();
        if (a.ElementLength() != len) {
          throw Napi::RangeError::New(env, std::string("writeMxfp4: ") + what + " of '" + p.spec.name + "' must have " +
                                               std::to_string(len) + " bytes, got " +
                                               std::to_string(a.ElementLength()));
        }
        return a.Data();
      };
      const std::uint8_t* b = bytes(info[1], "blocks", n / 2);
      const std::uint8_t* sc = bytes(info[2], "scales", n / 32);
      store_->WriteMxfp4(p, b, sc);
      return env.Undefined();
    });
  }

  Napi::Value Bytes(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).bytes())));
    });
  }

  Napi::Value TrainableNumel(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).trainableNumel())));
    });
  }

  Napi::Value View(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Napi::Env env = info.Env();
      model::Parameter& p = Param(info);
      if (store_->device() >= 0) {
        throw Napi::Error::New(env, "view: the store lives on " + DeviceName(store_->device() + 1) +
                                        " (no host memory to alias); use read() and write()");
      }
      const ParamBuffer which = ParseWhich(info[1]);
      float* ptr = ParamStore::Buffer(p, which);
      if (ptr == nullptr) {
        throw Napi::Error::New(
            env, "view: parameter '" + p.spec.name + "' has no float32 " +
                     (which == ParamBuffer::kValue ? "values (it is bfloat16 or MXFP4; use read() and readBf16())"
                                                   : "gradient or moments (it is not trainable)"));
      }
      // Drop references to views that were collected, then hand out a new aliasing view that
      // keeps the store alive until it is collected or detached.
      std::vector<Napi::Reference<Napi::ArrayBuffer>> live;
      for (auto& r : views_)
        if (!r.Value().IsEmpty()) live.push_back(std::move(r));
      views_ = std::move(live);
      auto* hold = new std::shared_ptr<ParamStore>(store_);
      Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
          env, ptr, static_cast<std::size_t>(p.numel) * sizeof(float),
          [](Napi::Env, void*, std::shared_ptr<ParamStore>* h) { delete h; }, hold);
      views_.push_back(Napi::Weak(ab));
      return Napi::Value(Napi::Float32Array::New(env, static_cast<std::size_t>(p.numel), ab, 0));
    });
  }

  Napi::Value ZeroGrad(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Store(info.Env()).ZeroGrad();
      return info.Env().Undefined();
    });
  }

  Napi::Value GradNorm(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] { return Napi::Value(Napi::Number::New(info.Env(), Store(info.Env()).GradNorm())); });
  }

  Napi::Value AdamWStep(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Napi::Env env = info.Env();
      const Napi::Object o = RequireObject(info[0], "options");
      auto num = [&](const char* key, double def) {
        const Napi::Value v = Field(o, key);
        return IsNullish(v) ? def : RequireNumber(v, key);
      };
      model::AdamWStepOptions opt;
      opt.lr = num("lr", opt.lr);
      opt.beta1 = num("beta1", opt.beta1);
      opt.beta2 = num("beta2", opt.beta2);
      opt.eps = num("eps", opt.eps);
      opt.weightDecay = num("weightDecay", opt.weightDecay);
      opt.maxGradNorm = num("maxGradNorm", 0.0);
      const Napi::Value skip = Field(o, "skipNonFinite");
      if (!IsNullish(skip)) {
        if (!skip.IsBoolean()) throw Napi::TypeError::New(env, "skipNonFinite must be a boolean");
        opt.skipNonFinite = skip.As<Napi::Boolean>().Value();
      }
      const model::AdamWStepResult r = Store(env).AdamWStep(opt);
      Napi::Object out = Napi::Object::New(env);
      out.Set("gradNorm", r.gradNorm);
      out.Set("clipScale", r.clipScale);
      out.Set("finite", r.finite);
      out.Set("applied", r.applied);
      out.Set("step", static_cast<double>(r.step));
      return Napi::Value(out);
    });
  }

  Napi::Value GetStep(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).step())));
    });
  }

  Napi::Value SetStep(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Store(info.Env()).set_step(RequireInt(info[0], "step", 0, (std::int64_t{1} << 53) - 1));
      return info.Env().Undefined();
    });
  }

  Napi::Value RngState(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      std::string hex;
      char buf[17];
      for (std::uint64_t w : Store(info.Env()).rng().state()) {
        std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(w));
        hex += buf;
      }
      return Napi::Value(Napi::String::New(info.Env(), hex));
    });
  }

  Napi::Value SetRngState(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Napi::Env env = info.Env();
      ParamStore& s = Store(env);
      const std::string hex = RequireString(info[0], "state");
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
        throw Napi::RangeError::New(env, "state must be 64 hexadecimal digits");
      }
      model::Rng::State st{};
      for (int i = 0; i < 4; ++i) st[i] = std::stoull(hex.substr(i * 16, 16), nullptr, 16);
      if ((st[0] | st[1] | st[2] | st[3]) == 0) throw Napi::RangeError::New(env, "state must not be all zeros");
      s.rng().set_state(st);
      return env.Undefined();
    });
  }

  Napi::Value Numel(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).numel())));
    });
  }

  Napi::Value Seed(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).seed())));
    });
  }

  Napi::Value Device(const Napi::CallbackInfo& info) {
    return Guarded(
        info, [&] { return Napi::Value(Napi::String::New(info.Env(), DeviceName(Store(info.Env()).device() + 1))); });
  }

  Napi::Value Append(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      Store(info.Env()).Append(ParseSpecs(info[0], "specs"));
      return info.Env().Undefined();
    });
  }

  Napi::Value Truncate(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      ParamStore& s = Store(info.Env());
      const std::int64_t count = RequireInt(info[0], "count", 1, static_cast<std::int64_t>(s.size()));
      // Views of the parameters about to go are detached first: they must never reach freed memory.
      std::vector<const void*> gone;
      for (std::size_t i = static_cast<std::size_t>(count); i < s.size(); ++i) {
        model::Parameter& p = s.at(i);
        for (const void* ptr : {static_cast<const void*>(p.value.data()), static_cast<const void*>(p.grad.data()),
                                static_cast<const void*>(p.m.data()), static_cast<const void*>(p.v.data())}) {
          if (ptr) gone.push_back(ptr);
        }
      }
      s.Truncate(static_cast<std::size_t>(count));
      DetachViews(gone);
      return info.Env().Undefined();
    });
  }

  Napi::Value Freeze(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      ParamStore& s = Store(info.Env());
      if (!info[0].IsArray()) throw Napi::TypeError::New(info.Env(), "names must be an array of parameter names");
      const Napi::Array arr = info[0].As<Napi::Array>();
      std::vector<std::string> names;
      std::vector<const void*> gone;
      for (std::uint32_t i = 0; i < arr.Length(); ++i) {
        names.push_back(RequireString(arr.Get(i), "names[" + std::to_string(i) + "]"));
        model::Parameter& p = s.Get(names.back());
        for (const void* ptr : {static_cast<const void*>(p.grad.data()), static_cast<const void*>(p.m.data()),
                                static_cast<const void*>(p.v.data())}) {
          if (ptr) gone.push_back(ptr);
        }
      }
      s.Freeze(names);
      DetachViews(gone);  // views of the freed gradients and moments
      return info.Env().Undefined();
    });
  }

  /** Detaches the views whose memory is one of `gone` (buffers about to be or just freed). */
  void DetachViews(const std::vector<const void*>& gone) {
    for (auto& r : views_) {
      Napi::ArrayBuffer ab = r.Value();
      if (ab.IsEmpty() || ab.IsDetached()) continue;
      if (std::find(gone.begin(), gone.end(), static_cast<const void*>(ab.Data())) != gone.end()) ab.Detach();
    }
  }

  Napi::Value LayoutVersion(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      return Napi::Value(Napi::Number::New(info.Env(), static_cast<double>(Store(info.Env()).layoutVersion())));
    });
  }

  // mergeLora({ weight, rowOffset, loraA, loraB, scale }): weight rows += scale B A (lora.h).
  Napi::Value MergeLora(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] {
      ParamStore& s = Store(info.Env());
      const Napi::Object o = RequireObject(info[0], "options");
      model::Parameter& w = s.Get(RequireString(Field(o, "weight"), "options.weight"));
      model::Parameter& a = s.Get(RequireString(Field(o, "loraA"), "options.loraA"));
      model::Parameter& b = s.Get(RequireString(Field(o, "loraB"), "options.loraB"));
      const std::int64_t rowOffset = RequireInt(Field(o, "rowOffset"), "options.rowOffset", 0, std::int64_t{1} << 40);
      const double scale = RequireNumber(Field(o, "scale"), "options.scale");
      if (!std::isfinite(scale)) throw Napi::RangeError::New(info.Env(), "options.scale must be finite");
      if (s.device() >= 0) throw Napi::Error::New(info.Env(), "mergeLora runs on CPU stores only");
      std::unique_lock<std::shared_mutex> lock(s.layoutMutex(), std::try_to_lock);
      if (!lock.owns_lock()) {
        throw Napi::Error::New(info.Env(),
                               "the store is in use by a running forward, backward or generation; wait for it");
      }
      model::LoraMerge(w, rowOffset, a, b, scale);
      return info.Env().Undefined();
    });
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    for (auto& r : views_) {
      Napi::ArrayBuffer ab = r.Value();
      if (!ab.IsEmpty() && !ab.IsDetached()) ab.Detach();
    }
    views_.clear();
    store_.reset();
    return info.Env().Undefined();
  }

  Napi::Value IsDisposed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !store_); }

  std::shared_ptr<ParamStore> store_;
  std::vector<Napi::Reference<Napi::ArrayBuffer>> views_;
};

}  // namespace

std::shared_ptr<model::ParamStore> UnwrapParamStore(const Napi::Value& v, const std::string& name) {
  if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kParamStoreTag)) {
    throw Napi::TypeError::New(v.Env(), name + " must be a native ParamStore handle (ParamStore.handle)");
  }
  const std::shared_ptr<ParamStore>& store = ParamStoreWrap::Unwrap(v.As<Napi::Object>())->shared();
  if (!store) throw Napi::Error::New(v.Env(), name + " has been disposed");
  return store;
}

void RegisterParamStore(Napi::Env env, Napi::Object exports) { exports.Set("ParamStore", ParamStoreWrap::Define(env)); }

}  // namespace sinkflex::addon
