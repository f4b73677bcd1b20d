// The parameter store (param_store.h): allocation, seeded initialisation, AdamW on host or device.
// Reference: docs/design.md, "The built-in model — semantics" (AdamW, initialisation); float64
//   reference: refAdamW in test/model/fixtures/reference.ts.
// Tests: test/model/adamw-param-store.test.ts, checkpoint.test.ts, determinism.test.ts; on a GPU
//   test/model/transformer-cuda.test.ts.
#include "param_store.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../core/cuda_device.h"
#include "../core/errors.h"
#include "../core/thread_pool.h"
#include "bf16.h"
#include "device_kernels.h"
#include "mxfp4.h"
#include "ops_table.h"

namespace sinkflex::model {
namespace {

constexpr std::int64_t kInitChunk = 1 << 16;  // elements per independent init stream

/** Normal(0, std) values, as float32 or rounded to bfloat16 (the same float32 values a float32 store gets). */
template <typename T>
void FillNormal(T* dst, std::int64_t n, double std, std::uint64_t seed, std::uint64_t index) {
  const std::int64_t chunks = (n + kInitChunk - 1) / kInitChunk;
  auto store = [](T* d, float v) {
    if constexpr (std::is_same_v<T, float>)
      *d = v;
    else
      *d = FloatToBf16(v);
  };
  auto body = [&](std::int64_t c) {
    Rng rng(Rng::Derive(seed, index, static_cast<std::uint64_t>(c)));
    const std::int64_t i0 = c * kInitChunk, i1 = std::min(n, i0 + kInitChunk);
    for (std::int64_t i = i0; i < i1; i += 2) {
      double a, b;
      rng.NormalPair(&a, &b);
      store(dst + i, static_cast<float>(a * std));
      if (i + 1 < i1) store(dst + i + 1, static_cast<float>(b * std));
    }
  };
  if (chunks > 1)
    ThreadPool::Global().ParallelFor(chunks, [&](std::int64_t c, int) { body(c); });
  else if (chunks == 1)
    body(0);
}

/** Uniform values in (-b, b), b = std sqrt 3, as float32 or rounded to bfloat16 (same streams as FillNormal). */
template <typename T>
void FillUniform(T* dst, std::int64_t n, double std, std::uint64_t seed, std::uint64_t index) {
  const double bound = std * std::sqrt(3.0);
  const std::int64_t chunks = (n + kInitChunk - 1) / kInitChunk;
  auto body = [&](std::int64_t c) {
    Rng rng(Rng::Derive(seed, index, static_cast<std::uint64_t>(c)));
    const std::int64_t i0 = c * kInitChunk, i1 = std::min(n, i0 + kInitChunk);
    for (std::int64_t i = i0; i < i1; ++i) {
      const float v = static_cast<float>((2.0 * rng.Uniform() - 1.0) * bound);
      if constexpr (std::is_same_v<T, float>)
        dst[i] = v;
      else
        dst[i] = FloatToBf16(v);
    }
  };
  if (chunks > 1)
    ThreadPool::Global().ParallelFor(chunks, [&](std::int64_t c, int) { body(c); });
  else if (chunks == 1)
    body(0);
}

/** Blocks and scales of an MXFP4 tensor of numel elements all equal to 0 (ones: 1.0 = code 2, scale 127). */
void FillMxfp4(std::uint8_t* blocks, std::uint8_t* scales, std::int64_t n, bool ones) {
  std::fill(blocks, blocks + n / 2, ones ? std::uint8_t{0x22} : std::uint8_t{0});
  std::fill(scales, scales + n / kMxfp4Block, ones ? std::uint8_t{127} : std::uint8_t{0});
}

}  // namespace

std::size_t Parameter::ValueBytes() const {
  const std::size_t n = static_cast<std::size_t>(numel);
  if (mxfp4()) return n / 2 + n / kMxfp4Block;
  return bf16() ? n * sizeof(std::uint16_t) : n * sizeof(float);
}

ParamStore::ParamStore(std::vector<ParamSpec> specs, std::uint64_t seed, int device)
    : device_(device < 0 ? -1 : device), seed_(seed), rng_(seed) {
  if (specs.empty()) throw ArgumentError("a parameter store needs at least one parameter");
  if (device_ >= 0) UseDevice();
  Add(std::move(specs));
  // The store's own stream starts after initialisation, derived from the seed alone.
  rng_ = Rng(Rng::Derive(seed, ~std::uint64_t{0}, 0));
}

void ParamStore::CheckSpecs(const std::vector<ParamSpec>& specs) const {
  std::unordered_map<std::string, std::size_t> names;
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const ParamSpec& s = specs[k];
    const std::size_t i = params_.size() + k;
    if (s.name.empty()) throw ArgumentError("parameter " + std::to_string(i) + " has an empty name");
    if (index_.count(s.name) || !names.emplace(s.name, i).second)
      throw ArgumentError("duplicate parameter name '" + s.name + "'");
    if (s.shape.empty() || s.shape.size() > 4) {
      throw ArgumentError("parameter '" + s.name + "' must have 1 to 4 dimensions, got " +
                          std::to_string(s.shape.size()));
    }
    std::int64_t n = 1;
    for (std::int64_t d : s.shape) {
      if (d < 1 || d > (std::int64_t{1} << 31)) {
        throw ArgumentError("parameter '" + s.name + "' has an invalid dimension " + std::to_string(d));
      }
      n *= d;
      if (n > (std::int64_t{1} << 34)) throw ArgumentError("parameter '" + s.name + "' is too large");
    }
    if ((s.init == ParamInit::kNormal || s.init == ParamInit::kUniform) && !(std::isfinite(s.std) && s.std >= 0.0)) {
      throw ArgumentError("parameter '" + s.name + "' has an invalid init std");
    }
    const bool bf16 = s.dtype == ParamDtype::kBFloat16;
    if (bf16 && s.trainable) {
      throw ArgumentError("parameter '" + s.name +
                          "': a bfloat16 parameter must be non-trainable (trainable parameters are float32)");
    }
    if (s.dtype == ParamDtype::kMxfp4) {
      if (s.trainable) {
        throw ArgumentError("parameter '" + s.name +
                            "': an MXFP4 parameter must be non-trainable (trainable parameters are float32)");
      }
      if (s.shape.back() % kMxfp4Block != 0) {
        throw ArgumentError("parameter '" + s.name +
                            "': an MXFP4 parameter's last dimension must be a multiple of 32, got " +
                            std::to_string(s.shape.back()));
      }
      if (s.init != ParamInit::kZeros && s.init != ParamInit::kOnes) {
        throw ArgumentError("parameter '" + s.name +
                            "': an MXFP4 parameter starts as zeros or ones (then write its blocks and scales)");
      }
    }
  }
}

void ParamStore::Add(std::vector<ParamSpec> specs) {
  CheckSpecs(specs);
  const std::size_t first = params_.size();
  try {
    for (std::size_t k = 0; k < specs.size(); ++k) {
      ParamSpec& s = specs[k];
      const std::size_t i = first + k;
      std::int64_t n = 1;
      for (std::int64_t d : s.shape) n *= d;
      const bool bf16 = s.dtype == ParamDtype::kBFloat16;
      Parameter p;
      p.numel = n;
      const std::size_t count = static_cast<std::size_t>(n);
      auto init = [&](auto* dst) {
        using T = std::remove_pointer_t<decltype(dst)>;
        auto constant = [](float v) {
          if constexpr (std::is_same_v<T, float>)
            return v;
          else
            return FloatToBf16(v);
        };
        switch (s.init) {
          case ParamInit::kNormal:
            FillNormal(dst, n, s.std, seed_, i);
            break;
          case ParamInit::kUniform:
            FillUniform(dst, n, s.std, seed_, i);
            break;
          case ParamInit::kOnes:
            std::fill(dst, dst + n, constant(1.0f));
            break;
          case ParamInit::kZeros:
            std::fill(dst, dst + n, constant(0.0f));
            break;
        }
      };
      std::size_t bytes = 0;
      const bool mxfp4 = s.dtype == ParamDtype::kMxfp4;
      if (mxfp4) {
        const std::size_t nb = count / 2, ns = count / kMxfp4Block;
        HostBuffer<std::uint8_t> hb(nb, "parameter values (MXFP4 blocks)"), hs(ns, "parameter values (MXFP4 scales)");
        FillMxfp4(hb.data(), hs.data(), n, s.init == ParamInit::kOnes);
        if (device_ < 0) {
          p.blocks = std::move(hb);
          p.scales = std::move(hs);
        } else {
          p.dBlocks = DeviceBuffer<std::uint8_t>(device_, nb, "parameter values (MXFP4 blocks, cuda)");
          p.dScales = DeviceBuffer<std::uint8_t>(device_, ns, "parameter values (MXFP4 scales, cuda)");
          p.dBlocks.Upload(hb.data());
          p.dScales.Upload(hs.data());
        }
        bytes += nb + ns;
      } else if (device_ < 0) {
        if (bf16) {
          p.value16 = HostBuffer<std::uint16_t>(count, "parameter values (bfloat16)");
          init(p.value16.data());
          bytes += count * sizeof(std::uint16_t);
        } else {
          p.value = HostBuffer<float>(count, "parameter values");
          init(p.value.data());
          bytes += count * sizeof(float);
        }
        if (s.trainable) {
          p.grad = HostBuffer<float>(count, "parameter gradients");
          p.m = HostBuffer<float>(count, "AdamW first moments");
          p.v = HostBuffer<float>(count, "AdamW second moments");
          p.grad.zero();
          p.m.zero();
          p.v.zero();
          bytes += 3 * count * sizeof(float);
        }
      } else {
        // The same values as a CPU store: initialised on the host, then copied.
        if (bf16) {
          HostBuffer<std::uint16_t> staged(count, "parameter values (bfloat16, staged for the device)");
          init(staged.data());
          p.dValue16 = DeviceBuffer<std::uint16_t>(device_, count, "parameter values (bfloat16, cuda)");
          p.dValue16.Upload(staged.data());
          bytes += count * sizeof(std::uint16_t);
        } else {
          HostBuffer<float> staged(count, "parameter values (staged for the device)");
          init(staged.data());
          p.dValue = DeviceBuffer<float>(device_, count, "parameter values (cuda)");
          p.dValue.Upload(staged.data());
          bytes += count * sizeof(float);
        }
        if (s.trainable) {
          p.dGrad = DeviceBuffer<float>(device_, count, "parameter gradients (cuda)");
          p.dM = DeviceBuffer<float>(device_, count, "AdamW first moments (cuda)");
          p.dV = DeviceBuffer<float>(device_, count, "AdamW second moments (cuda)");
          const DeviceKernels& k = *GetCudaDeviceKernels();
          k.fill(p.dGrad.data(), n, 0.0f);
          k.fill(p.dM.data(), n, 0.0f);
          k.fill(p.dV.data(), n, 0.0f);
          bytes += 3 * count * sizeof(float);
        }
      }
      p.spec = std::move(s);
      index_[p.spec.name] = i;
      bytes_ += bytes;
      numel_ += n;
      if (p.spec.trainable) trainableNumel_ += n;
      params_.push_back(std::move(p));
    }
  } catch (...) {
    Drop(first);  // nothing of a failed addition stays
    throw;
  }
}

void ParamStore::Drop(std::size_t count) {
  while (params_.size() > count) {
    Parameter& p = params_.back();
    const std::size_t n = static_cast<std::size_t>(p.numel);
    bytes_ -= p.ValueBytes();
    if (p.trainable()) bytes_ -= 3 * n * sizeof(float);
    numel_ -= p.numel;
    if (p.trainable()) trainableNumel_ -= p.numel;
    index_.erase(p.spec.name);
    params_.pop_back();
  }
}

void ParamStore::Append(std::vector<ParamSpec> specs) {
  if (specs.empty()) throw ArgumentError("append needs at least one parameter");
  std::unique_lock<std::shared_mutex> lock(layoutMutex_, std::try_to_lock);
  if (!lock.owns_lock())
    throw ArgumentError(
        "the store is in use by a running forward, backward or generation; wait for it before adding parameters");
  Add(std::move(specs));
  ++layoutVersion_;
}

void ParamStore::Freeze(const std::vector<std::string>& names) {
  std::vector<Parameter*> ps;
  for (const std::string& n : names) ps.push_back(&Get(n));
  std::unique_lock<std::shared_mutex> lock(layoutMutex_, std::try_to_lock);
  if (!lock.owns_lock())
    throw ArgumentError(
        "the store is in use by a running forward, backward or generation; wait for it before freezing parameters");
  for (Parameter* p : ps) {
    if (!p->trainable()) continue;
    bytes_ -= 3 * static_cast<std::size_t>(p->numel) * sizeof(float);
    trainableNumel_ -= p->numel;
    p->grad.reset();
    p->m.reset();
    p->v.reset();
    p->dGrad.reset();
    p->dM.reset();
    p->dV.reset();
    p->spec.trainable = false;
  }
}

void ParamStore::Truncate(std::size_t count) {
  if (count < 1 || count > params_.size()) {
    throw ArgumentError("truncate keeps 1 to " + std::to_string(params_.size()) + " parameters, got " +
                        std::to_string(count));
  }
  if (count == params_.size()) return;
  std::unique_lock<std::shared_mutex> lock(layoutMutex_, std::try_to_lock);
  if (!lock.owns_lock())
    throw ArgumentError(
        "the store is in use by a running forward, backward or generation; wait for it before removing parameters");
  Drop(count);
  ++layoutVersion_;
}

Parameter* ParamStore::Find(const std::string& name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

Parameter& ParamStore::Get(const std::string& name) {
  Parameter* p = Find(name);
  if (!p) throw ArgumentError("unknown parameter '" + name + "'");
  return *p;
}

float* ParamStore::Buffer(Parameter& p, ParamBuffer which) {
  switch (which) {
    case ParamBuffer::kValue:
      return p.value.data() ? p.value.data() : p.dValue.data();
    case ParamBuffer::kGrad:
      return p.grad.data() ? p.grad.data() : p.dGrad.data();
    case ParamBuffer::kM:
      return p.m.data() ? p.m.data() : p.dM.data();
    case ParamBuffer::kV:
      return p.v.data() ? p.v.data() : p.dV.data();
  }
  return nullptr;
}

void ParamStore::UseDevice() const {
  if (GetCudaOps() == nullptr || GetCudaDeviceKernels() == nullptr) {
    throw DeviceError("a CUDA parameter store needs the CUDA model kernels, which this build does not have (" +
                      CudaUnavailableReason() + ")");
  }
  if (device_ >= static_cast<int>(CudaDevices().size())) {
    throw DeviceError("cuda:" + std::to_string(device_) + " is not available: " +
                      (CudaDevices().empty() ? CudaUnavailableReason()
                                             : std::to_string(CudaDevices().size()) + " CUDA device(s) present"));
  }
  GetCudaOps()->useDevice(device_);
}

namespace {
void RequireBuffer(const Parameter& p, ParamBuffer which) {
  if (which != ParamBuffer::kValue && !p.trainable()) {
    const char* name = which == ParamBuffer::kGrad ? "gradient" : "AdamW moments";
    throw ArgumentError("parameter '" + p.spec.name + "' is not trainable: it has no " + name);
  }
}
}  // namespace

void ParamStore::Read(Parameter& p, ParamBuffer which, float* host) const {
  RequireBuffer(p, which);
  const std::size_t n = static_cast<std::size_t>(p.numel);
  if (which == ParamBuffer::kValue && p.mxfp4()) {
    HostBuffer<std::uint16_t> bits(n, "parameter values (MXFP4 decoded)");
    ReadBf16(p, bits.data());
    for (std::size_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(bits[i]);
    return;
  }
  if (which == ParamBuffer::kValue && p.bf16()) {
    if (device_ >= 0) {
      HostBuffer<std::uint16_t> bits(n, "parameter values (bfloat16, from the device)");
      p.dValue16.Download(bits.data());
      for (std::size_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(bits[i]);
      return;
    }
    const std::uint16_t* src = p.value16.data();
    for (std::size_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(src[i]);
    return;
  }
  const float* src = Buffer(p, which);
  if (device_ < 0) {
    std::copy(src, src + n, host);
  } else {
    CopyToHost(device_, host, src, n * sizeof(float));
  }
}

void ParamStore::Write(Parameter& p, ParamBuffer which, const float* host) {
  RequireBuffer(p, which);
  const std::size_t n = static_cast<std::size_t>(p.numel);
  if (p.mxfp4()) {
    throw ArgumentError("parameter '" + p.spec.name +
                        "' is MXFP4: write its blocks and scales (float values are not re-quantized)");
  }
  if (which == ParamBuffer::kValue && p.bf16()) {
    if (device_ >= 0) {
      HostBuffer<std::uint16_t> bits(n, "parameter values (bfloat16, for the device)");
      for (std::size_t i = 0; i < n; ++i) bits[i] = FloatToBf16(host[i]);
      p.dValue16.Upload(bits.data());
      return;
    }
    std::uint16_t* dst = p.value16.data();
    for (std::size_t i = 0; i < n; ++i) dst[i] = FloatToBf16(host[i]);
    return;
  }
  float* dst = Buffer(p, which);
  if (device_ < 0) {
    std::copy(host, host + n, dst);
  } else {
    CopyToDevice(device_, dst, host, n * sizeof(float));
  }
}

void ParamStore::ReadBf16(const Parameter& p, std::uint16_t* host) const {
  if (p.mxfp4()) {
    const std::size_t n = static_cast<std::size_t>(p.numel);
    HostBuffer<std::uint8_t> hb, hs;
    const std::uint8_t* b = p.blocks.data();
    const std::uint8_t* sc = p.scales.data();
    if (device_ >= 0) {
      hb = HostBuffer<std::uint8_t>(n / 2, "parameter values (MXFP4 blocks, from the device)");
      hs = HostBuffer<std::uint8_t>(n / kMxfp4Block, "parameter values (MXFP4 scales, from the device)");
      p.dBlocks.Download(hb.data());
      p.dScales.Download(hs.data());
      b = hb.data();
      sc = hs.data();
    }
    Mxfp4DecodeBf16(Mxfp4Ptr{b, sc, 0}, p.numel, host);
    return;
  }
  if (!p.bf16()) throw ArgumentError("parameter '" + p.spec.name + "' is float32, not bfloat16");
  if (device_ >= 0) {
    p.dValue16.Download(host);
    return;
  }
  std::copy(p.value16.data(), p.value16.data() + p.numel, host);
}

void ParamStore::ReadMxfp4(const Parameter& p, std::uint8_t* blocks, std::uint8_t* scales) const {
  if (!p.mxfp4()) throw ArgumentError("parameter '" + p.spec.name + "' is not MXFP4");
  const std::size_t n = static_cast<std::size_t>(p.numel);
  if (device_ >= 0) {
    p.dBlocks.Download(blocks);
    p.dScales.Download(scales);
    return;
  }
  std::copy(p.blocks.data(), p.blocks.data() + n / 2, blocks);
  std::copy(p.scales.data(), p.scales.data() + n / kMxfp4Block, scales);
}

void ParamStore::WriteMxfp4(Parameter& p, const std::uint8_t* blocks, const std::uint8_t* scales) {
  if (!p.mxfp4()) throw ArgumentError("parameter '" + p.spec.name + "' is not MXFP4");
  const std::size_t n = static_cast<std::size_t>(p.numel);
  if (device_ >= 0) {
    p.dBlocks.Upload(blocks);
    p.dScales.Upload(scales);
    return;
  }
  std::copy(blocks, blocks + n / 2, p.blocks.data());
  std::copy(scales, scales + n / kMxfp4Block, p.scales.data());
}

void ParamStore::WriteBf16(Parameter& p, const std::uint16_t* host) {
  if (!p.bf16()) throw ArgumentError("parameter '" + p.spec.name + "' is float32, not bfloat16 (write float32 values)");
  if (device_ >= 0) {
    p.dValue16.Upload(host);
    return;
  }
  std::copy(host, host + p.numel, p.value16.data());
}

void ParamStore::ZeroGrad() {
  if (device_ >= 0) {
    UseDevice();
    for (Parameter& p : params_)
      if (p.trainable()) GetCudaDeviceKernels()->fill(p.dGrad.data(), p.numel, 0.0f);
    return;
  }
  for (Parameter& p : params_)
    if (p.trainable()) p.grad.zero();
}

double ParamStore::GradNorm() const {
  double ss = 0.0;
  if (device_ >= 0) {
    UseDevice();
    for (const Parameter& p : params_)
      if (p.trainable()) ss += GetCudaOps()->sumSquares(p.dGrad.data(), p.numel);
    return std::sqrt(ss);
  }
  for (const Parameter& p : params_)
    if (p.trainable()) ss += SumSquares(p.grad.data(), p.numel);
  return std::sqrt(ss);
}

void ParamStore::set_step(std::int64_t s) {
  if (s < 0) throw ArgumentError("step must be >= 0, got " + std::to_string(s));
  step_ = s;
}

AdamWStepResult ParamStore::AdamWStep(const AdamWStepOptions& o) {
  CheckAdamWOptions(o);
  if (!(std::isfinite(o.maxGradNorm) && o.maxGradNorm >= 0.0)) {
    throw ArgumentError("maxGradNorm must be a finite number >= 0 (0 = no clipping)");
  }
  AdamWStepResult r{};
  r.gradNorm = GradNorm();
  r.finite = std::isfinite(r.gradNorm);
  r.clipScale = 1.0;
  if (!r.finite && o.skipNonFinite) {
    r.applied = false;
    r.step = step_;
    return r;
  }
  if (o.maxGradNorm > 0.0 && r.finite) r.clipScale = std::min(1.0, o.maxGradNorm / (r.gradNorm + 1e-6));
  ++step_;
  if (device_ >= 0) {
    const ModelOps& ops = *GetCudaOps();
    for (Parameter& p : params_) {
      if (!p.trainable()) continue;
      ops.adamwUpdate(p.dValue.data(), p.dGrad.data(), p.dM.data(), p.dV.data(), p.numel, o, step_,
                      static_cast<float>(r.clipScale), p.spec.decay);
    }
    r.applied = true;
    r.step = step_;
    return r;
  }
  for (Parameter& p : params_) {
    if (!p.trainable()) continue;
    AdamWUpdate(p.value.data(), p.grad.data(), p.m.data(), p.v.data(), p.numel, o, step_,
                static_cast<float>(r.clipScale), p.spec.decay);
  }
  r.applied = true;
  r.step = step_;
  return r;
}

}  // namespace sinkflex::model
