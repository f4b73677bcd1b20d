// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Shared pieces of sink attention: shape validation, instruction-set selection and the
// CUDA backend registry.
#include "sink_attention.h"

#include <atomic>
#include <cmath>
#include <string>

#include "../core/cpu_features.h"
#include "../core/errors.h"
#include "kernels.h"

namespace sinkflex::attention {
namespace {

void RequireAtLeast(std::int64_t v, std::int64_t min, const char* name) {
  if (v < min)
    throw ArgumentError(std::string(name) + " must be >= " + std::to_string(min) + ", got " + std::to_string(v));
}

std::atomic<const CudaBackend*> g_cuda{nullptr};

}  // namespace

void ValidateShape(const Shape& s) {
  RequireAtLeast(s.batch, 1, "shape.batch");
  RequireAtLeast(s.qLen, 1, "shape.seqLen");
  RequireAtLeast(s.kvLen, 1, "shape.kvLen");
  RequireAtLeast(s.qHeads, 1, "shape.qHeads");
  RequireAtLeast(s.kvHeads, 1, "shape.kvHeads");
  RequireAtLeast(s.headDim, 1, "shape.headDim");
  RequireAtLeast(s.qOffset, 0, "shape.queryOffset");
  if (s.headDim > kMaxHeadDim) {
    throw ArgumentError("shape.headDim must be <= " + std::to_string(kMaxHeadDim) + ", got " +
                        std::to_string(s.headDim));
  }
  if (s.qHeads % s.kvHeads != 0) {
    throw ArgumentError("shape.qHeads (" + std::to_string(s.qHeads) + ") must be a multiple of shape.kvHeads (" +
                        std::to_string(s.kvHeads) + ")");
  }
  const double limit = 9007199254740992.0;  // 2^53
  const double q = static_cast<double>(s.batch) * static_cast<double>(s.qLen) * static_cast<double>(s.qHeads) *
                   static_cast<double>(s.headDim);
  const double kv = static_cast<double>(s.batch) * static_cast<double>(s.kvLen) * static_cast<double>(s.kvHeads) *
                    static_cast<double>(s.headDim);
  if (q > limit / 8 || kv > limit / 8 || static_cast<double>(s.qOffset) > limit / 8) {
    throw ArgumentError("shape is too large");
  }
}

Resolved Resolve(const Shape& shape, const Options& opts) {
  ValidateShape(shape);
  Resolved r{};
  r.scale =
      std::isnan(opts.scale) ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.headDim))) : opts.scale;
  if (!std::isfinite(r.scale)) throw ArgumentError("scale must be a finite number");
  if (!std::isfinite(opts.softcap) || opts.softcap < 0.0f) {
    throw ArgumentError("softcap must be a finite number >= 0 (0 = none), got " + std::to_string(opts.softcap));
  }
  r.softcap = opts.softcap;
  r.mask = opts.mask != nullptr ? opts.mask : &MaskProgram::Causal();
  r.mask->Check(shape);
  return r;
}

void RequirePtr(const void* p, const char* name) {
  if (p == nullptr) throw ArgumentError(std::string(name) + " is required");
}

double EagerTensorBytes(const Shape& s) {
  return 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.qHeads) * static_cast<double>(s.qLen) *
         (static_cast<double>(s.kvLen) + 1.0);
}

const char* IsaName(CpuIsa isa) {
  switch (isa == CpuIsa::kAuto ? BestIsa() : isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    default:
      return "generic";
  }
}

bool IsaSupported(CpuIsa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (isa) {
    case CpuIsa::kAuto:
    case CpuIsa::kGeneric:
      return true;
    case CpuIsa::kAvx2:
      return Avx2Compiled() && f.avx2 && f.fma;
    case CpuIsa::kAvx512:
      return Avx512Compiled() && f.avx512f && f.avx2 && f.fma;
  }
  return false;
}

CpuIsa BestIsa() {
  if (IsaSupported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (IsaSupported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kGeneric;
}

const KernelTable& KernelsFor(CpuIsa isa) {
  if (isa == CpuIsa::kAuto) isa = BestIsa();
  if (!IsaSupported(isa)) throw ArgumentError(std::string("this CPU cannot run the ") + IsaName(isa) + " kernels");
  switch (isa) {
    case CpuIsa::kAvx512:
      return Avx512Kernels();
    case CpuIsa::kAvx2:
      return Avx2Kernels();
    default:
      return GenericKernels();
  }
}

void RegisterCudaBackend(const CudaBackend* backend) { g_cuda.store(backend); }
const CudaBackend* GetCudaBackend() { return g_cuda.load(); }

}  // namespace sinkflex::attention
