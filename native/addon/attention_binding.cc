// Bindings of native/attention: argument checks (TypeError / RangeError naming the argument),
// mask trees and block masks as tagged externals, synchronous and Promise-returning forward
// and backward, and device dispatch (CPU kernels here; a registered CUDA backend otherwise).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../attention/sink_attention.h"
#include "../core/errors.h"
#include "bindings.h"
#include "napi_util.h"

namespace sinkflex::addon {
namespace {

using attention::BlockMask;
using attention::MaskProgram;
using attention::Shape;

constexpr std::int64_t kMaxInt = std::int64_t{1} << 53;
constexpr napi_type_tag kBlockMaskTag = {0x5f1c0e4a9b7d4c21ull, 0x8e2f6a3d1b0c9e74ull};
constexpr napi_type_tag kSavedTag = {0x2d7b9f0e3c5a4e18ull, 0xa4c1e8f26d3b5097ull};

[[noreturn]] void ThrowRange(Napi::Env env, const std::string& msg) { throw Napi::RangeError::New(env, msg); }
[[noreturn]] void ThrowType(Napi::Env env, const std::string& msg) { throw Napi::TypeError::New(env, msg); }

// Rejects fields of `o` outside `allowed`, so a misspelt option is not silently ignored.
void OnlyFields(const Napi::Object& o, const std::string& name, std::initializer_list<const char*> allowed) {
  Napi::Array keys = o.GetPropertyNames();
  for (std::uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).ToString().Utf8Value();
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok = ok || key == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) ThrowRange(o.Env(), name + " has an unknown field '" + key + "' (allowed: " + list + ")");
  }
}

// ---- masks --------------------------------------------------------------------------------

/** A parsed mask with its own copies of document ids. */
struct MaskHolder {
  MaskProgram program;
  std::vector<HostBuffer<std::int32_t>> ids;
};

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
  const std::string kind =
      RequireEnum(o.Get("kind"), name + ".kind", {"all", "causal", "slidingWindow", "prefix", "documents", "and", "or", "not"});
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

struct BlockMaskHolder {
  std::shared_ptr<MaskHolder> mask;
  std::string signature;
  BlockMask blocks;
};
using BlockMaskRef = std::shared_ptr<BlockMaskHolder>;
using SavedRef = std::shared_ptr<attention::EagerSaved>;

template <typename T>
T* RequireHandle(const Napi::Value& v, const napi_type_tag& tag, const std::string& name, const char* what) {
  if (!v.IsExternal() || !v.As<Napi::External<T>>().CheckTypeTag(&tag)) ThrowType(v.Env(), name + " must be " + what);
  return v.As<Napi::External<T>>().Data();
}

// ---- calls ------------------------------------------------------------------------------------

enum class Impl { kFused, kEager };

/** Everything a forward or backward call needs, owned so it can run off the main thread. */
struct Call {
  Shape shape;
  attention::Options opts;
  Impl impl = Impl::kFused;
  int device = kCpuDevice;
  bool save = false;
  std::shared_ptr<MaskHolder> mask;
  BlockMaskRef blockMask;
  SavedRef saved;
  const float *q = nullptr, *k = nullptr, *v = nullptr, *sinks = nullptr;
  const float *out = nullptr, *lse = nullptr, *dOut = nullptr, *dLse = nullptr;
  std::vector<Napi::Value> keep;
};

const float* Input(Call* c, const Napi::Value& v, const std::string& name, std::int64_t n) {
  Napi::Float32Array a = RequireF32(v, name, static_cast<std::size_t>(n));
  c->keep.push_back(v);
  return a.Data();
}

void ParseOptions(const Napi::Value& v, bool backward, Call* c) {
  Napi::Env env = v.Env();
  Napi::Object o = IsNullish(v) ? Napi::Object::New(env) : RequireObject(v, "opts");
  if (backward) {
    OnlyFields(o, "opts",
               {"mask", "blockMask", "scale", "softcap", "impl", "device", "isa", "blockSize", "saved", "dLse", "backwardSplit"});
  } else {
    OnlyFields(o, "opts", {"mask", "blockMask", "scale", "softcap", "impl", "device", "isa", "blockSize", "save"});
  }
  const Napi::Value bmv = Field(o, "blockMask");
  if (!IsNullish(bmv)) {
    c->blockMask = *RequireHandle<BlockMaskRef>(bmv, kBlockMaskTag, "opts.blockMask", "a block mask from createBlockMask");
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
  if (!IsNullish(impl)) c->impl = RequireEnum(impl, "opts.impl", {"fused", "eager"}) == "eager" ? Impl::kEager : Impl::kFused;
  const Napi::Value dev = Field(o, "device");
  if (!IsNullish(dev)) c->device = RequireDevice(dev, "opts.device");
  const Napi::Value isa = Field(o, "isa");
  if (!IsNullish(isa)) {
    const std::string s = RequireEnum(isa, "opts.isa", {"auto", "avx512", "avx2", "generic"});
    c->opts.isa = s == "avx512" ? attention::CpuIsa::kAvx512
                  : s == "avx2" ? attention::CpuIsa::kAvx2
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
    return;
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
  const Napi::Value dLse = Field(o, "dLse");
  if (!IsNullish(dLse)) c->dLse = Input(c, dLse, "opts.dLse", c->shape.lseElems());
}

void CheckDevice(const Call& c) {
  if (c.device != kCpuDevice && attention::GetCudaBackend() == nullptr) {
    throw DeviceError("device '" + DeviceName(c.device) + "' has no sink-attention kernels in this build; use 'cpu'");
  }
}

/** Parses (q, k, v, sinks, [out, lse, dOut,] shape, opts). */
Call ParseCall(const Napi::CallbackInfo& info, bool backward) {
  Call c;
  const std::size_t shapeArg = backward ? 7 : 4;
  c.shape = ParseShape(info[shapeArg]);
  const Shape& s = c.shape;
  c.q = Input(&c, info[0], "q", s.qElems());
  c.k = Input(&c, info[1], "k", s.kvElems());
  c.v = Input(&c, info[2], "v", s.kvElems());
  if (!IsNullish(info[3])) c.sinks = Input(&c, info[3], "sinks", s.qHeads);
  if (backward) {
    c.out = Input(&c, info[4], "out", s.qElems());
    c.lse = Input(&c, info[5], "lse", s.lseElems());
    c.dOut = Input(&c, info[6], "dOut", s.qElems());
  }
  ParseOptions(info[shapeArg + 1], backward, &c);
  if (c.sinks) {
    for (std::int64_t h = 0; h < s.qHeads; ++h) {
      if (std::isnan(c.sinks[h]) || c.sinks[h] == INFINITY) {
        ThrowRange(info.Env(), "sinks[" + std::to_string(h) + "] must be finite or -Infinity");
      }
    }
  }
  if (c.saved && c.impl != Impl::kEager) ThrowRange(info.Env(), "opts.saved needs opts.impl 'eager'");
  if (c.save && c.impl != Impl::kEager) ThrowRange(info.Env(), "opts.save needs opts.impl 'eager'");
  CheckDevice(c);
  return c;
}

struct ForwardResult {
  HostBuffer<float> out, lse;
  SavedRef saved;
};

void RunForward(const Call& c, ForwardResult* r) {
  r->out = HostBuffer<float>(static_cast<std::size_t>(c.shape.qElems()), "attention out");
  r->lse = HostBuffer<float>(static_cast<std::size_t>(c.shape.lseElems()), "attention lse");
  const attention::ForwardArgs a{c.q, c.k, c.v, c.sinks, r->out.data(), r->lse.data()};
  if (c.device != kCpuDevice) {
    const attention::CudaBackend* cb = attention::GetCudaBackend();
    (c.impl == Impl::kEager ? cb->eagerForward : cb->fusedForward)(c.device - 1, c.shape, c.opts, a);
  } else if (c.impl == Impl::kEager) {
    if (c.save) r->saved = std::make_shared<attention::EagerSaved>();
    attention::EagerForward(c.shape, c.opts, a, r->saved.get());
  } else {
    attention::FusedForward(c.shape, c.opts, a);
  }
}

Napi::Value ForwardValue(Napi::Env env, ForwardResult* r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("out", AdoptF32(env, std::move(r->out)));
  o.Set("lse", AdoptF32(env, std::move(r->lse)));
  if (r->saved) {
    const auto bytes = static_cast<std::int64_t>(r->saved->probs.size() * sizeof(float));
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

struct BackwardResult {
  HostBuffer<float> dq, dk, dv, dSinks;
};

void RunBackward(const Call& c, BackwardResult* r) {
  r->dq = HostBuffer<float>(static_cast<std::size_t>(c.shape.qElems()), "attention dq");
  r->dk = HostBuffer<float>(static_cast<std::size_t>(c.shape.kvElems()), "attention dk");
  r->dv = HostBuffer<float>(static_cast<std::size_t>(c.shape.kvElems()), "attention dv");
  if (c.sinks) r->dSinks = HostBuffer<float>(static_cast<std::size_t>(c.shape.qHeads), "attention dSinks");
  const attention::BackwardArgs a{c.q,  c.k,  c.v,           c.sinks,       c.out,         c.lse,
                                  c.dOut, c.dLse, r->dq.data(), r->dk.data(), r->dv.data(), r->dSinks.data()};
  if (c.device != kCpuDevice) {
    const attention::CudaBackend* cb = attention::GetCudaBackend();
    (c.impl == Impl::kEager ? cb->eagerBackward : cb->fusedBackward)(c.device - 1, c.shape, c.opts, a);
  } else if (c.impl == Impl::kEager) {
    attention::EagerBackward(c.shape, c.opts, a, c.saved.get());
  } else {
    attention::FusedBackward(c.shape, c.opts, a);
  }
}

Napi::Value BackwardValue(Napi::Env env, BackwardResult* r) {
  Napi::Object o = Napi::Object::New(env);
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
      info.Env(), [c, r] { RunForward(*c, r.get()); }, [r](Napi::Env env) { return ForwardValue(env, r.get()); }, c->keep);
}

Napi::Value BackwardAsync(const Napi::CallbackInfo& info) {
  auto c = std::make_shared<Call>(ParseCall(info, true));
  auto r = std::make_shared<BackwardResult>();
  return AsyncTask::Run(
      info.Env(), [c, r] { RunBackward(*c, r.get()); }, [r](Napi::Env env) { return BackwardValue(env, r.get()); }, c->keep);
}

Napi::Value ReleaseSaved(const Napi::CallbackInfo& info) {
  RequireHandle<SavedRef>(info[0], kSavedTag, "saved", "saved state from an eager forward")->reset();
  return info.Env().Undefined();
}

Napi::Value CreateBlockMask(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Shape s = ParseShape(info[1]);
  auto holder = std::make_shared<BlockMaskHolder>();
  holder->mask = ParseMask(info[0], "mask", s);
  holder->signature = holder->mask->program.Signature();
  const std::int64_t bs = IsNullish(info[2]) ? attention::kDefaultBlockSize
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
  if (n > (std::int64_t{1} << 32)) ThrowRange(info.Env(), "the dense mask would have " + std::to_string(n) + " entries");
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
  o.Set("cudaKernels", attention::GetCudaBackend() != nullptr);
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
