// Reference: docs/design.md, "Sink attention — semantics"; float64 reference:
//   test/attention/fixtures/reference.ts.
// Tests: test/attention/kernels.test.ts, gradcheck.test.ts, fuzz.test.ts, validation.test.ts,
//   api.test.ts.
// Sink-aware attention (gpt-oss style: one learned sink logit per query head) on the CPU —
// the C++ API used by the N-API binding and by native callers such as the built-in
// transformer (native/model/).
//
// Semantics (docs/design.md, "Sink attention — semantics"). For batch b, query head h (kv head
// h / (qHeads / kvHeads)), query row i and allowed keys A(i) (see mask.h):
//   z_ij = c q_i.k_j            (softcap C > 0: z_ij = C tanh(c q_i.k_j / C); the sink is not capped)
//   L_i  = log(exp(s_h) + sum_j exp(z_ij))      (no sink: drop exp(s_h))
//   P_ij = exp(z_ij - L_i),  o_i = sum_j P_ij v_j
// Backward with dO (and optionally dL, a gradient for the LSE output):
//   D_i = dO_i.o_i - dL_i,  dZ_ij = P_ij (dO_i.v_j - D_i)
//   dq_i = c sum_j dZ'_ij k_j, dk_j = c sum_i dZ'_ij q_i, dv_j = sum_i P_ij dO_i
//   (dZ' = dZ (1 - tanh^2) under softcap; dk/dv summed over the query heads of a kv group)
//   dsink_h = -sum_{b,i} exp(s_h - L_i) D_i.
// A row with no allowed key gives o = 0 and L = s_h (no sink: L = -inf), never NaN.
// A sink of -inf is the same as no sink for that head.
//
// Layout (row-major, fp32):
//   q, out, dOut, dq   [batch, qLen,  qHeads,  headDim]
//   k, v, dk, dv       [batch, kvLen, kvHeads, headDim]
//   lse, dLse          [batch, qHeads, qLen]       (natural log, includes the sink)
//   sinks, dSinks      [qHeads]                    (nullable)
// Self-attention is qLen == kvLen, qOffset == 0. Query row r sits at absolute position
// qOffset + r (e.g. qOffset = kvLen - qLen for new tokens attending to a cache); masks are
// evaluated on absolute positions.
//
// Two implementations with the same results (to fp32 rounding):
//   Fused*: FlashAttention-2 style tiles (tile = block size of the block mask) with an online
//     softmax seeded by the sink (m = s_h, l = 1); empty tiles skipped, no per-element mask on
//     full tiles; the backward recomputes P from lse (see BackwardSplit for how it splits the
//     work; no races, deterministic, independent of the thread count). Keys and values are
//     read in place (never copied). Extra memory: one float per query row, per-thread tiles
//     and, for the kGroups backward with several slots, the dk/dv partials — never seqLen^2.
//   Eager*: materialises [batch, qHeads, qLen, kvLen + 1] scores and probabilities (the sink
//     is the last column) as a framework would; the backward materialises dP and dS too.
// All allocations go through the tracked allocator; every function may throw ArgumentError
// (bad sizes) or OutOfMemoryError (tracked limit). Work runs on ThreadPool::Global().
//
// Example (a packed micro-batch, sliding window on even layers, GQA, sinks):
//   using namespace sinkflex::attention;
//   Shape shape = Shape::Self(batch, seqLen, qHeads, kvHeads, headDim);
//   MaskProgram::Standard spec;                 // causal by default
//   spec.window = layer % 2 == 0 ? 128 : 0;     // W keys including the current one
//   spec.documentIds = docIds;                  // int32 [batch * seqLen], or nullptr
//   MaskProgram mask = MaskProgram::FromStandard(spec, shape.kvLen, shape.batch);
//   BlockMask blocks = BlockMask::Build(mask, shape, kDefaultBlockSize);  // reuse fwd + bwd
//   Options opts;
//   opts.mask = &mask;
//   opts.blockMask = &blocks;
//   FusedForward(shape, opts, ForwardArgs{q, k, v, sinks, out, lse});
//   FusedBackward(shape, opts, BackwardArgs{q, k, v, sinks, out, lse, dOut, nullptr, dq, dk, dv, dSinks});
// Trees: int c = mask.AddCausal(); int w = mask.AddWindow(128); mask.SetRoot(mask.AddAnd({c, w}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "../core/allocator.h"
#include "../core/dtype.h"
#include "mask.h"

namespace sinkflex::attention {

/** Sizes of one attention call (see the layout above). */
struct Shape {
  std::int64_t batch = 1;
  std::int64_t qLen = 1;
  std::int64_t kvLen = 1;
  std::int64_t qHeads = 1;
  std::int64_t kvHeads = 1;
  std::int64_t headDim = 1;
  std::int64_t qOffset = 0;

  /** Self-attention sizes: qLen = kvLen = seqLen, qOffset = 0. */
  static Shape Self(std::int64_t batch, std::int64_t seqLen, std::int64_t qHeads, std::int64_t kvHeads,
                    std::int64_t headDim) {
    return Shape{batch, seqLen, seqLen, qHeads, kvHeads, headDim, 0};
  }
  std::int64_t group() const { return qHeads / kvHeads; }
  std::int64_t qElems() const { return batch * qLen * qHeads * headDim; }
  std::int64_t kvElems() const { return batch * kvLen * kvHeads * headDim; }
  std::int64_t lseElems() const { return batch * qHeads * qLen; }
};

/** Largest accepted head dimension. */
constexpr std::int64_t kMaxHeadDim = 1024;
/** Default tile / block size. */
constexpr std::int64_t kDefaultBlockSize = 64;

/** Throws ArgumentError naming the field unless every size is valid (positive, qHeads % kvHeads == 0, ...). */
void ValidateShape(const Shape& shape);

/** Which vector code to run: kAuto picks the best the CPU supports (AVX-512, AVX2+FMA, generic). */
enum class CpuIsa { kAuto, kGeneric, kAvx2, kAvx512 };
/** Name of an ISA ("generic", "avx2", "avx512"); kAuto resolves first. */
const char* IsaName(CpuIsa isa);
/** The ISA kAuto resolves to on this CPU. */
CpuIsa BestIsa();
/** True when this CPU (and build) can run `isa`. */
bool IsaSupported(CpuIsa isa);

/**
 * How the fused backward splits its work (results are the same to fp32 rounding):
 * kBlocks — one pass over (key block, batch, kv head) for dk/dv and one over (query block,
 * batch, head) for dq (most parallelism, recomputes P twice, no extra memory);
 * kGroups — one pass per (batch, kv head, slot), the group's query heads dealt round-robin
 * to S = min(group, ceil(kSplitTasks / (batch x kvHeads))) slots; slots after the first keep
 * kv-sized dk/dv partials that are added in slot order (less work; extra memory
 * (S - 1) x 2 x kv size); kAuto — kGroups when it yields at least kSplitTasks tasks, else
 * kBlocks. The split depends on the shape only, never on the thread count, so the bits of
 * dk/dv are the same on every machine.
 */
enum class BackwardSplit { kAuto, kBlocks, kGroups };
/** Tasks the kGroups split aims for (a constant: the split must not depend on the thread count). */
constexpr std::int64_t kSplitTasks = 4;

/** Options shared by the four entry points. */
struct Options {
  /** Logit scale c; NaN (the default) means 1 / sqrt(headDim). */
  float scale = std::numeric_limits<float>::quiet_NaN();
  /** Softcap C > 0, or 0 for none. */
  float softcap = 0.0f;
  /** The mask; nullptr means causal. Must fit the shape (MaskProgram::Check). */
  const MaskProgram* mask = nullptr;
  /** Fused only: a block mask built from `mask` for this shape (reused across calls); nullptr builds one. */
  const BlockMask* blockMask = nullptr;
  /** Fused tile size when blockMask is nullptr (multiple of 16 in [16, 256]). */
  std::int64_t blockSize = kDefaultBlockSize;
  CpuIsa isa = CpuIsa::kAuto;
  /** Fused backward only. */
  BackwardSplit backwardSplit = BackwardSplit::kAuto;
};

/** Inputs and outputs of a forward call (host pointers; sinks may be nullptr). */
struct ForwardArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* sinks = nullptr;
  float* out = nullptr;
  float* lse = nullptr;
};

/**
 * Inputs and outputs of a backward call. out and lse are the forward's results; dLse
 * (nullable) is a gradient for lse. dSinks is written only when sinks is not nullptr (it may
 * be nullptr when the sink gradient is not wanted). The eager backward does not read out.
 */
struct BackwardArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* sinks = nullptr;
  const float* out = nullptr;
  const float* lse = nullptr;
  const float* dOut = nullptr;
  const float* dLse = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  float* dSinks = nullptr;
};

/** What the eager forward keeps for its backward: the probabilities, sink column last. */
struct EagerSaved {
  Shape shape;
  /** [batch, qHeads, qLen, kvLen + 1], tracked. */
  HostBuffer<float> probs;
};

/** Fused forward: writes out and lse. */
void FusedForward(const Shape& shape, const Options& opts, const ForwardArgs& args);
/** Fused backward: writes dq, dk, dv (and dSinks). */
void FusedBackward(const Shape& shape, const Options& opts, const BackwardArgs& args);
/** Eager forward: writes out and lse; with `save`, moves the probabilities into it. */
void EagerForward(const Shape& shape, const Options& opts, const ForwardArgs& args, EagerSaved* save);
/**
 * Eager backward. With `saved` (from EagerForward with the same inputs) it uses the saved
 * probabilities; without, it materialises them again from q, k, sinks.
 */
void EagerBackward(const Shape& shape, const Options& opts, const BackwardArgs& args, const EagerSaved* saved);

/** Bytes of one eager [batch, qHeads, qLen, kvLen + 1] fp32 tensor (saturating). */
double EagerTensorBytes(const Shape& shape);

// ---- device backends ----------------------------------------------------------------------

/**
 * Inputs and outputs of a forward on a device: pointers into memory of the backend's device.
 * q, k, v and out hold `dtype` elements (fp32 or bf16); sinks (nullable) and lse are fp32.
 */
struct DeviceForwardArgs {
  DType dtype = DType::kF32;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* sinks = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
};

/**
 * Inputs and outputs of a backward on a device (device pointers). q, k, v, out, dOut and the
 * gradients dq, dk, dv hold `dtype` elements; sinks, lse, dLse (nullable) and dSinks (written
 * when sinks and dSinks are both given) are fp32.
 */
struct DeviceBackwardArgs {
  DType dtype = DType::kF32;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* sinks = nullptr;
  const void* out = nullptr;
  const float* lse = nullptr;
  const void* dOut = nullptr;
  const float* dLse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dSinks = nullptr;
};

/** What an eager forward on a device keeps for its backward (its probabilities, in device memory). */
class DeviceSaved {
 public:
  virtual ~DeviceSaved() = default;
  /** The shape of the forward that made it. */
  virtual const Shape& shape() const = 0;
  /** Device bytes held. */
  virtual std::size_t bytes() const = 0;
};

/**
 * Entry points of the CUDA backend (registered from its .cu sources with RegisterCudaBackend;
 * the N-API binding dispatches device 'cuda:k' calls to it). `device` is the CUDA device index;
 * every pointer is device memory of that device. The functions validate (ArgumentError), run
 * on a stream of their own and return when the results are written (DeviceError on CUDA
 * failures, OutOfMemoryError past the tracked limit). Masks and block masks are the host
 * objects of Options; the backend uploads what its kernels need.
 */
struct CudaBackend {
  void (*fusedForward)(int device, const Shape&, const Options&, const DeviceForwardArgs&);
  void (*fusedBackward)(int device, const Shape&, const Options&, const DeviceBackwardArgs&);
  /** With `save`, moves the probabilities into *save for eagerBackward. */
  void (*eagerForward)(int device, const Shape&, const Options&, const DeviceForwardArgs&,
                       std::unique_ptr<DeviceSaved>* save);
  /** With `saved` (from eagerForward with the same inputs) it reuses the probabilities. */
  void (*eagerBackward)(int device, const Shape&, const Options&, const DeviceBackwardArgs&, const DeviceSaved* saved);
  /** Largest headDim the fused kernels take (the eager ones take up to kMaxHeadDim). */
  std::int64_t maxFusedHeadDim;
};
/** Installs the CUDA backend (call once, e.g. from a static initializer in a .cu file). */
void RegisterCudaBackend(const CudaBackend* backend);
/** The registered CUDA backend, or nullptr when this build has no CUDA attention kernels. */
const CudaBackend* GetCudaBackend();

}  // namespace sinkflex::attention
