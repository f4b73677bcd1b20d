// Bindings of native/attention: argument checks (TypeError / RangeError naming the argument),
// mask trees and block masks as tagged externals, synchronous and Promise-returning forward
// and backward, and device dispatch: Float32Array calls on the cpu run the CPU kernels here;
// calls with DeviceTensors or on CUDA go through attention_device.cc (the registered CUDA
// backend, or the CPU kernels for 'cpu' DeviceTensors).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../attention/sink_attention.h"
#include "../core/errors.h"
#include "attention_call.h"
#include "bindings.h"
#include "device_tensor.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

using attention::BlockMask;
using attention::MaskProgram;
using attention::Shape;

constexpr std::int64_t kMaxInt = std::int64_t{1} << 53;
constexpr napi_type_tag kBlockMaskTag = {0x5f1c0e4a9b7d4c21ull, 0x8e2f6a3d1b0c9e74ull};
constexpr napi_type_tag kSavedTag = {0x2d7b9f0e3c5a4e18ull, 0xa4c1e8f26d3b5097ull};

// ---- masks --------------------------------------------------------------------------------

const std::int32_t* CopyIds(const Napi::Value& v, const std::string& name, const Shape& s, MaskHolder* h) {
  Napi::Int32Array a = RequireI32(v, name, static_cast<std::size_t>(s.batch * s.kvLen));
  h->ids.emplace_back(a.ElementLength(), "attention mask document ids");
  std::int32_t* dst = h->ids.back().data();
  for (std::size_t i = 0; i < a.ElementLength(); ++i) dst[i] = a[i];
  return dst;
}

int ParseNode(const Napi::Value& v, const std::string& name, const Shape& s, MaskHolder* h, int depth);

// The shorthand {causal, window, prefix, documentIds}: causal AND (window OR prefix) AND documents.
int ParseStandard(const Napi::Object& o, const std::string& name, const Shape& s, MaskHolder* h) {
  OnlyFields(o, name, {"causal", "window", "prefix", "documentIds"});
  MaskProgram& p = h->program;
  const Napi::Value causal = Field(o, "causal");
  if (!IsNullish(causal) && !causal.IsBoolean()) ThrowType(o.Env(), name + ".causal must be a boolean");
  const bool isCausal = IsNullish(causal) || causal.As<Napi::Boolean>().Value();
  const Napi::Value w = Field(o, "window"), pre = Field(o, "prefix"), docs = Field(o, "documentIds");
  const std::int64_t window = IsNullish(w) ? 0 : RequireInt(w, name + ".window", 0, kMaxInt);
  const std::int64_t prefix = IsNullish(pre) ? 0 : RequireInt(pre, name + ".prefix", 0, kMaxInt);
  std::vector<int> parts;
  if (isCausal) parts.push_back(p.AddCausal());
  if (window > 0) {
    int node = p.AddWindow(window);
    if (prefix > 0) node = p.AddOr({node, p.AddPrefix(prefix)});
    parts.push_back(node);
  }
  if (!IsNullish(docs)) parts.push_back(p.AddDocuments(CopyIds(docs, name + ".documentIds", s, h), s.kvLen, s.batch));
  if (parts.empty()) return p.AddAll();
  return parts.size() == 1 ? parts[0] : p.AddAnd(parts);
}

int ParseNode(const Napi::Value& v, const std::string& name, const Shape& s, MaskHolder* h, int depth) {
  if (depth > MaskProgram::kMaxDepth) ThrowRange(v.Env(), name + " is nested deeper than 32 levels");
  Napi::Object o = RequireObject(v, name);
  if (!o.Has("kind")) return ParseStandard(o, name, s, h);
  const std::string kind = RequireEnum(o.Get("kind"), name + ".kind",
                                       {"all", "causal", "slidingWindow", "prefix", "documents", "and", "or", "not"});
  MaskProgram& p = h->program;
  if (kind == "all" || kind == "causal") {
    OnlyFields(o, name, {"kind"});
    return kind == "all" ? p.AddAll() : p.AddCausal();
  }
  if (kind == "slidingWindow") {
    OnlyFields(o, name, {"kind", "window"});
    return p.AddWindow(RequireInt(Field(o, "window"), name + ".window", 1, kMaxInt));
  }
  if (kind == "prefix") {
    OnlyFields(o, name, {"kind", "length"});
    return p.AddPrefix(RequireInt(Field(o, "length"), name + ".length", 0, kMaxInt));
  }
  if (kind == "documents") {
    OnlyFields(o, name, {"kind", "ids"});
    return p.AddDocuments(CopyIds(Field(o, "ids"), name + ".ids", s, h), s.kvLen, s.batch);
  }
  if (kind == "not") {
    OnlyFields(o, name, {"kind", "mask"});
    return p.AddNot(ParseNode(Field(o, "mask"), name + ".mask", s, h, depth + 1));
  }
  OnlyFields(o, name, {"kind", "masks"});
  const Napi::Value list = Field(o, "masks");
  if (!list.IsArray()) ThrowType(v.Env(), name + ".masks must be an array of masks");
  Napi::Array arr = list.As<Napi::Array>();
  if (arr.Length() == 0) ThrowRange(v.Env(), name + ".masks must not be empty");
  std::vector<int> kids;
  for (std::uint32_t i = 0; i < arr.Length(); ++i) {
    kids.push_back(ParseNode(arr.Get(i), name + ".masks[" + std::to_string(i) + "]", s, h, depth + 1));
  }
  return kind == "and" ? p.AddAnd(kids) : p.AddOr(kids);
}

/** Parses a mask (tree or shorthand; nullish = causal) for `shape`. */
std::shared_ptr<MaskHolder> ParseMask(const Napi::Value& v, const std::string& name, const Shape& s) {
  auto h = std::make_shared<MaskHolder>();
  if (IsNullish(v)) {
    h->program.SetRoot(h->program.AddCausal());
  } else {
    h->program.SetRoot(ParseNode(v, name, s, h.get(), 1));
  }
  return h;
}

// ---- shapes and handles -----------------------------------------------------------------------

Shape ParseShape(const Napi::Value& v) {
  Napi::Object o = RequireObject(v, "shape");
  OnlyFields(o, "shape", {"batch", "seqLen", "qHeads", "kvHeads", "headDim", "kvLen", "queryOffset"});
  Shape s;
  s.batch = RequireInt(Field(o, "batch"), "shape.batch", 1, kMaxInt);
  s.qLen = RequireInt(Field(o, "seqLen"), "shape.seqLen", 1, kMaxInt);
  s.qHeads = RequireInt(Field(o, "qHeads"), "shape.qHeads", 1, kMaxInt);
  s.kvHeads = RequireInt(Field(o, "kvHeads"), "shape.kvHeads", 1, kMaxInt);
  s.headDim = RequireInt(Field(o, "headDim"), "shape.headDim", 1, attention::kMaxHeadDim);
  const Napi::Value kv = Field(o, "kvLen"), off = Field(o, "queryOffset");
  s.kvLen = IsNullish(kv) ? s.qLen : RequireInt(kv, "shape.kvLen", 1, kMaxInt);
  s.qOffset = IsNullish(off) ? 0 : RequireInt(off, "shape.queryOffset", 0, kMaxInt);
  attention::ValidateShape(s);  // qHeads % kvHeads, sizes (ArgumentError -> RangeError)
  return s;
}

template <typename T>
T* RequireHandle(const Napi::Value& v, const napi_type_tag& tag, const std::string& name, const char* what) {
  if (!v.IsExternal() || !v.As<Napi::External<T>>().CheckTypeTag(&tag)) ThrowType(v.Env(), name + " must be " + what);
  return v.As<Napi::External<T>>().Data();
}

// ---- calls ------------------------------------------------------------------------------------

// A main tensor (q, k, v, out, dOut): all Float32Arrays, or all DeviceTensors like q.
TensorIn MainInput(Call* c, const Napi::Value& v, const std::string& name, std::int64_t n,
                   std::vector<std::int64_t>* shape = nullptr) {
  TensorIn t;
  c->keep.push_back(v);
  if (!c->tensors) {
    if (IsDeviceTensor(v)) ThrowType(v.Env(), name + " is a DeviceTensor but q is not: pass all tensors alike");
    t.host = RequireF32(v, name, static_cast<std::size_t>(n)).Data();
    return t;
  }
  if (!IsDeviceTensor(v)) ThrowType(v.Env(), name + " must be a DeviceTensor (q is one)");
  t.tensor = RequireTensor(v, name);
  if (t.tensor->slot() != c->device) {
    ThrowRange(v.Env(), name + " is on " + SlotName(t.tensor->slot()) + ", but q is on " + SlotName(c->device));
  }
  if (t.tensor->dtype() != c->dtype) {
    ThrowType(v.Env(), name + " is " + DTypeName(t.tensor->dtype()) + ", but q is " + DTypeName(c->dtype));
  }
  if (t.tensor->count() != static_cast<std::size_t>(n)) {
    ThrowRange(v.Env(), name + " has " + std::to_string(t.tensor->count()) + " elements (shape " +
                            t.tensor->ShapeString() + "), expected " + std::to_string(n));
  }
  if (shape) *shape = t.tensor->shape();
  return t;
}

// An fp32 tensor (sinks, lse, dLse): a Float32Array, or a float32 DeviceTensor on the call's device.
TensorIn F32Input(Call* c, const Napi::Value& v, const std::string& name, std::int64_t n) {
  TensorIn t;
  c->keep.push_back(v);
  if (!IsDeviceTensor(v)) {
    t.host = RequireF32(v, name, static_cast<std::size_t>(n)).Data();
    return t;
  }
  t.tensor = RequireTensor(v, name);
  if (t.tensor->slot() != c->device) {
    ThrowRange(v.Env(),
               name + " is on " + SlotName(t.tensor->slot()) + ", but the call runs on " + SlotName(c->device));
  }
  if (t.tensor->dtype() != DType::kF32)
    ThrowType(v.Env(), name + " must be float32, got " + DTypeName(t.tensor->dtype()));
  if (t.tensor->count() != static_cast<std::size_t>(n)) {
    ThrowRange(v.Env(),
               name + " has " + std::to_string(t.tensor->count()) + " elements, expected " + std::to_string(n));
  }
  return t;
}

// Reads opts; returns opts.dLse (parsed once the call's device is known) or undefined.
Napi::Value ParseOptions(const Napi::Value& v, bool backward, Call* c, bool* deviceGiven) {
  Napi::Env env = v.Env();
  Napi::Object o = IsNullish(v) ? Napi::Object::New(env) : RequireObject(v, "opts");
  if (backward) {
    OnlyFields(o, "opts",
               {"mask", "blockMask", "scale", "softcap", "impl", "device", "isa", "blockSize", "saved", "dLse",
                "backwardSplit"});
  } else {
    OnlyFields(o, "opts", {"mask", "blockMask", "scale", "softcap", "impl", "device", "isa", "blockSize", "save"});
  }
  const Napi::Value bmv = Field(o, "blockMask");
  if (!IsNullish(bmv)) {
    c->blockMask =
        *RequireHandle<BlockMaskRef>(bmv, kBlockMaskTag, "opts.blockMask", "a block mask from createBlockMask");
    c->keep.push_back(bmv);
  }
  const Napi::Value mv = Field(o, "mask");
  if (c->blockMask && IsNullish(mv)) {
    c->mask = c->blockMask->mask;
  } else {
    c->mask = ParseMask(mv, "opts.mask", c->shape);
    if (c->blockMask && c->mask->program.Signature() != c->blockMask->signature) {
      ThrowRange(env, "opts.blockMask was built for the mask " + c->blockMask->signature + ", but opts.mask is " +
                          c->mask->program.Signature());
    }
  }
  c->opts.mask = &c->mask->program;
  const Napi::Value sc = Field(o, "scale"), cap = Field(o, "softcap");
  if (!IsNullish(sc)) c->opts.scale = static_cast<float>(RequireNumber(sc, "opts.scale"));
  if (!IsNullish(cap)) {
    const double x = RequireNumber(cap, "opts.softcap");
    if (x < 0) ThrowRange(env, "opts.softcap must be >= 0 (0 = none), got " + std::to_string(x));
    c->opts.softcap = static_cast<float>(x);
  }
  const Napi::Value impl = Field(o, "impl");
  if (!IsNullish(impl))
    c->impl = RequireEnum(impl, "opts.impl", {"fused", "eager"}) == "eager" ? Impl::kEager : Impl::kFused;
  const Napi::Value dev = Field(o, "device");
  *deviceGiven = !IsNullish(dev);
  if (*deviceGiven) c->device = RequireDevice(dev, "opts.device");
  const Napi::Value isa = Field(o, "isa");
  if (!IsNullish(isa)) {
    const std::string s = RequireEnum(isa, "opts.isa", {"auto", "avx512", "avx2", "generic"});
    c->opts.isa = s == "avx512"    ? attention::CpuIsa::kAvx512
                  : s == "avx2"    ? attention::CpuIsa::kAvx2
                  : s == "generic" ? attention::CpuIsa::kGeneric
                                   : attention::CpuIsa::kAuto;
    if (!attention::IsaSupported(c->opts.isa)) ThrowRange(env, "opts.isa '" + s + "' is not supported by this CPU");
  }
  const Napi::Value bs = Field(o, "blockSize");
  if (!IsNullish(bs)) {
    c->opts.blockSize = RequireInt(bs, "opts.blockSize", BlockMask::kMinBlock, BlockMask::kMaxBlock);
    if (c->opts.blockSize % 16 != 0) ThrowRange(env, "opts.blockSize must be a multiple of 16");
  }
  if (c->blockMask) {
    c->blockMask->blocks.CheckFits(c->shape, "opts.blockMask");
    c->opts.blockMask = &c->blockMask->blocks;
  }
  if (!backward) {
    const Napi::Value save = Field(o, "save");
    if (!IsNullish(save) && !save.IsBoolean()) ThrowType(env, "opts.save must be a boolean");
    c->save = !IsNullish(save) && save.As<Napi::Boolean>().Value();
    return env.Undefined();
  }
  const Napi::Value split = Field(o, "backwardSplit");
  if (!IsNullish(split)) {
    const std::string x = RequireEnum(split, "opts.backwardSplit", {"auto", "blocks", "groups"});
    c->opts.backwardSplit = x == "blocks"   ? attention::BackwardSplit::kBlocks
                            : x == "groups" ? attention::BackwardSplit::kGroups
                                            : attention::BackwardSplit::kAuto;
  }
  const Napi::Value saved = Field(o, "saved");
  if (!IsNullish(saved)) {
    c->saved = *RequireHandle<SavedRef>(saved, kSavedTag, "opts.saved", "saved state from an eager forward");
    if (!c->saved) ThrowRange(env, "opts.saved was released");
    c->keep.push_back(saved);
  }
  return Field(o, "dLse");
}

void CheckDevice(const Call& c) {
  if (c.device != kCpuDevice && attention::GetCudaBackend() == nullptr) {
    throw DeviceError("device '" + DeviceName(c.device) + "' has no sink-attention kernels in this build; use 'cpu'");
  }
}

// Checks the sink values (NaN or +inf are rejected; -inf means no sink for that head).
void CheckSinks(Napi::Env env, const Call& c) {
  if (!c.sinks.given()) return;
  const std::int64_t n = c.shape.qHeads;
  std::vector<float> copy;
  const float* s = c.sinks.host;
  if (s == nullptr) {
    copy.resize(static_cast<std::size_t>(n));
    c.sinks.tensor->CopyToFloats(copy.data());
    s = copy.data();
  }
  for (std::int64_t h = 0; h < n; ++h) {
    if (std::isnan(s[h]) || s[h] == INFINITY)
      ThrowRange(env, "sinks[" + std::to_string(h) + "] must be finite or -Infinity");
  }
}

/** Parses (q, k, v, sinks, [out, lse, dOut,] shape, opts). */
Call ParseCall(const Napi::CallbackInfo& info, bool backward) {
  Call c;
  const std::size_t shapeArg = backward ? 7 : 4;
  c.shape = ParseShape(info[shapeArg]);
  const Shape& s = c.shape;
  bool deviceGiven = false;
  const Napi::Value dLse = ParseOptions(info[shapeArg + 1], backward, &c, &deviceGiven);
  if (IsDeviceTensor(info[0])) {
    const TensorRef q = RequireTensor(info[0], "q");
    if (deviceGiven && c.device != q->slot()) {
      ThrowRange(info.Env(), "opts.device is '" + SlotName(c.device) + "' but q is on " + SlotName(q->slot()));
    }
    c.tensors = true;
    c.device = q->slot();
    c.dtype = q->dtype();
  }
  c.q = MainInput(&c, info[0], "q", s.qElems(), &c.qShape);
  c.k = MainInput(&c, info[1], "k", s.kvElems(), &c.kShape);
  c.v = MainInput(&c, info[2], "v", s.kvElems(), &c.vShape);
  if (!IsNullish(info[3])) c.sinks = F32Input(&c, info[3], "sinks", s.qHeads);
  if (backward) {
    c.out = MainInput(&c, info[4], "out", s.qElems());
    c.lse = F32Input(&c, info[5], "lse", s.lseElems());
    c.dOut = MainInput(&c, info[6], "dOut", s.qElems());
    if (!IsNullish(dLse)) c.dLse = F32Input(&c, dLse, "opts.dLse", s.lseElems());
  }
  if (c.saved && c.impl != Impl::kEager) ThrowRange(info.Env(), "opts.saved needs opts.impl 'eager'");
  if (c.save && c.impl != Impl::kEager) ThrowRange(info.Env(), "opts.save needs opts.impl 'eager'");
  if (c.saved && c.saved->slot != c.device) {
    ThrowRange(info.Env(),
               "opts.saved was made on " + SlotName(c.saved->slot) + ", but this call runs on " + SlotName(c.device));
  }
  CheckDevice(c);
  CheckSinks(info.Env(), c);
  return c;
}

void RunForward(const Call& c, ForwardResult* r) {
  if (c.tensors || c.device != kCpuDevice) {
    RunDeviceForward(c, r);
    return;
  }
  r->out = HostBuffer<float>(static_cast<std::size_t>(c.shape.qElems()), "attention out");
  r->lse = HostBuffer<float>(static_cast<std::size_t>(c.shape.lseElems()), "attention lse");
  const attention::ForwardArgs a{c.q.host, c.k.host, c.v.host, c.sinks.host, r->out.data(), r->lse.data()};
  if (c.impl == Impl::kEager) {
    if (c.save) r->saved = std::make_shared<SavedState>();
    attention::EagerForward(c.shape, c.opts, a, r->saved ? &r->saved->cpu : nullptr);
  } else {
    attention::FusedForward(c.shape, c.opts, a);
  }
}

Napi::Value ForwardValue(Napi::Env env, ForwardResult* r) {
  Napi::Object o = Napi::Object::New(env);
  if (r->outT) {
    o.Set("out", WrapTensor(env, std::move(r->outT)));
    o.Set("lse", WrapTensor(env, std::move(r->lseT)));
  } else {
    o.Set("out", AdoptF32(env, std::move(r->out)));
    o.Set("lse", AdoptF32(env, std::move(r->lse)));
  }
  if (r->saved) {
    const auto bytes = static_cast<std::int64_t>(r->saved->cpu.probs.size() * sizeof(float));  // host bytes only
    auto ext = Napi::External<SavedRef>::New(env, new SavedRef(std::move(r->saved)), [bytes](Napi::Env e, SavedRef* p) {
      Napi::MemoryManagement::AdjustExternalMemory(e, -bytes);
      delete p;
    });
    Napi::MemoryManagement::AdjustExternalMemory(env, bytes);
    ext.TypeTag(&kSavedTag);
    o.Set("saved", ext);
  }
  return o;
}

void RunBackward(const Call& c, BackwardResult* r) {
  if (c.tensors || c.device != kCpuDevice) {
    RunDeviceBackward(c, r);
    return;
  }
  r->dq = HostBuffer<float>(static_cast<std::size_t>(c.shape.qElems()), "attention dq");
  r->dk = HostBuffer<float>(static_cast<std::size_t>(c.shape.kvElems()), "attention dk");
  r->dv = HostBuffer<float>(static_cast<std::size_t>(c.shape.kvElems()), "attention dv");
  if (c.sinks.given()) r->dSinks = HostBuffer<float>(static_cast<std::size_t>(c.shape.qHeads), "attention dSinks");
  const attention::BackwardArgs a{c.q.host,    c.k.host,    c.v.host,     c.sinks.host, c.out.host,   c.lse.host,
                                  c.dOut.host, c.dLse.host, r->dq.data(), r->dk.data(), r->dv.data(), r->dSinks.data()};
  if (c.impl == Impl::kEager) {
    attention::EagerBackward(c.shape, c.opts, a, c.saved ? &c.saved->cpu : nullptr);
  } else {
    attention::FusedBackward(c.shape, c.opts, a);
  }
}

Napi::Value BackwardValue(Napi::Env env, BackwardResult* r) {
  Napi::Object o = Napi::Object::New(env);
  if (r->dqT) {
    o.Set("dq", WrapTensor(env, std::move(r->dqT)));
    o.Set("dk", WrapTensor(env, std::move(r->dkT)));
    o.Set("dv", WrapTensor(env, std::move(r->dvT)));
    o.Set("dSinks", r->dSinksT ? Napi::Value(WrapTensor(env, std::move(r->dSinksT))) : env.Null());
    return o;
  }
  o.Set("dq", AdoptF32(env, std::move(r->dq)));
  o.Set("dk", AdoptF32(env, std::move(r->dk)));
  o.Set("dv", AdoptF32(env, std::move(r->dv)));
  o.Set("dSinks", r->dSinks.data() ? Napi::Value(AdoptF32(env, std::move(r->dSinks))) : env.Null());
  return o;
}

Napi::Value Forward(const Napi::CallbackInfo& info) {
  const Call c = ParseCall(info, false);
  ForwardResult r;
  RunForward(c, &r);
  return ForwardValue(info.Env(), &r);
}

Napi::Value Backward(const Napi::CallbackInfo& info) {
  const Call c = ParseCall(info, true);
  BackwardResult r;
  RunBackward(c, &r);
  return BackwardValue(info.Env(), &r);
}

Napi::Value ForwardAsync(const Napi::CallbackInfo& info) {
  auto c = std::make_shared<Call>(ParseCall(info, false));
  auto r = std::make_shared<ForwardResult>();
  return AsyncTask::Run(
      info.Env(), [c, r] { RunForward(*c, r.get()); }, [r](Napi::Env env) { return ForwardValue(env, r.get()); },
      c->keep);
}

Napi::Value BackwardAsync(const Napi::CallbackInfo& info) {
  auto c = std::make_shared<Call>(ParseCall(info, true));
  auto r = std::make_shared<BackwardResult>();
  return AsyncTask::Run(
      info.Env(), [c, r] { RunBackward(*c, r.get()); }, [r](Napi::Env env) { return BackwardValue(env, r.get()); },
      c->keep);
}

Napi::Value ReleaseSaved(const Napi::CallbackInfo& info) {
  RequireHandle<SavedRef>(info[0], kSavedTag, "saved", "saved state from an eager forward")
      ->reset();  // frees host or device probabilities
  return info.Env().Undefined();
}

Napi::Value CreateBlockMask(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Shape s = ParseShape(info[1]);
  auto holder = std::make_shared<BlockMaskHolder>();
  holder->mask = ParseMask(info[0], "mask", s);
  holder->signature = holder->mask->program.Signature();
  const std::int64_t bs = IsNullish(info[2])
                              ? attention::kDefaultBlockSize
                              : RequireInt(info[2], "blockSize", BlockMask::kMinBlock, BlockMask::kMaxBlock);
  if (bs % 16 != 0) ThrowRange(env, "blockSize must be a multiple of 16 in [16, 256], got " + std::to_string(bs));
  holder->blocks = BlockMask::Build(holder->mask->program, s, bs);
  const BlockMask& bm = holder->blocks;
  Napi::Object o = Napi::Object::New(env);
  o.Set("batch", static_cast<double>(bm.batch()));
  o.Set("blockSize", static_cast<double>(bm.blockSize()));
  o.Set("qBlocks", static_cast<double>(bm.qBlocks()));
  o.Set("kvBlocks", static_cast<double>(bm.kvBlocks()));
  const std::size_t n = static_cast<std::size_t>(bm.batch() * bm.qBlocks() * bm.kvBlocks());
  Napi::Uint8Array states = Napi::Uint8Array::New(env, n);
  for (std::size_t i = 0; i < n; ++i) states[i] = bm.states()[i];
  o.Set("states", states);
  Napi::Object counts = Napi::Object::New(env);
  counts.Set("empty", static_cast<double>(bm.count(attention::kBlockEmpty)));
  counts.Set("partial", static_cast<double>(bm.count(attention::kBlockPartial)));
  counts.Set("full", static_cast<double>(bm.count(attention::kBlockFull)));
  o.Set("counts", counts);
  o.Set("signature", holder->signature);
  auto ext = Napi::External<BlockMaskRef>::New(env, new BlockMaskRef(std::move(holder)),
                                               [](Napi::Env, BlockMaskRef* p) { delete p; });
  ext.TypeTag(&kBlockMaskTag);
  o.Set("handle", ext);
  return o;
}

Napi::Value CreateDenseMask(const Napi::CallbackInfo& info) {
  const Shape s = ParseShape(info[1]);
  const std::shared_ptr<MaskHolder> h = ParseMask(info[0], "mask", s);
  const std::int64_t n = attention::DenseMaskSize(h->program, s);
  if (n > (std::int64_t{1} << 32))
    ThrowRange(info.Env(), "the dense mask would have " + std::to_string(n) + " entries");
  Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), static_cast<std::size_t>(n));
  attention::DenseMask(h->program, s, out.Data());
  return out;
}

Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("isa", attention::IsaName(attention::BestIsa()));
  Napi::Array isas = Napi::Array::New(env);
  for (attention::CpuIsa i : {attention::CpuIsa::kAvx512, attention::CpuIsa::kAvx2, attention::CpuIsa::kGeneric}) {
    if (attention::IsaSupported(i)) isas.Set(isas.Length(), attention::IsaName(i));
  }
  o.Set("isas", isas);
  const attention::CudaBackend* cb = attention::GetCudaBackend();
  o.Set("cudaKernels", cb != nullptr);
  o.Set("cudaMaxFusedHeadDim",
        cb != nullptr ? Napi::Value(Napi::Number::New(env, static_cast<double>(cb->maxFusedHeadDim))) : env.Null());
  o.Set("defaultBlockSize", static_cast<double>(attention::kDefaultBlockSize));
  o.Set("maxHeadDim", static_cast<double>(attention::kMaxHeadDim));
  return o;
}

}  // namespace

void RegisterAttention(Napi::Env env, Napi::Object exports) {
  Export(env, exports, "attentionForward", Forward);
  Export(env, exports, "attentionBackward", Backward);
  Export(env, exports, "attentionForwardAsync", ForwardAsync);
  Export(env, exports, "attentionBackwardAsync", BackwardAsync);
  Export(env, exports, "attentionReleaseSaved", ReleaseSaved);
  Export(env, exports, "attentionBlockMask", CreateBlockMask);
  Export(env, exports, "attentionDenseMask", CreateDenseMask);
  Export(env, exports, "attentionInfo", Info);
}

}  // namespace sinkflex::addon
