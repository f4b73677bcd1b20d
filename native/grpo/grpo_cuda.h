// Reference: docs/design.md, "GRPO — semantics"; checked against the CPU kernels and the float64
//   reference test/grpo/fixtures/reference.ts.
// Tests: test/grpo/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// The CUDA backend of the GRPO kernels: entry points over device memory, registered by
// native/grpo/grpo_cuda.cu when the addon loads (CUDA builds only). Plain C++: the bindings
// include it in every build and find no backend (GetCudaGrpoBackend() == nullptr) without CUDA.
//
// Inputs are validated like the CPU kernels do; when a value check fails on the device the
// binding reruns the CPU kernel on a host copy of the inputs so the error (ArgumentError naming
// the argument and the first offending index) is the CPU's, word for word.
#pragma once

#include <cstdint>
#include <vector>

#include "grpo.h"

namespace sinkflex::grpo {

/** Responses grouped by id: `order` lists each group's members in index order, group g is order[starts[g] ..
 * starts[g+1]). */
struct GroupPlan {
  std::vector<std::uint32_t> order;
  std::vector<std::int64_t> starts;  // groups + 1 entries
  /** Lowest response index alone in its group (-1 when none). */
  std::int64_t singleton = -1;
};

/** Groups `n` responses by id (stable LSD radix sort; O(n) for any int32 ids). */
GroupPlan PlanGroups(const std::int32_t* groupIds, std::int64_t n);

/** Throws the ArgumentError of a group of one under grpo_passk (response `singleton`). */
[[noreturn]] void ThrowPassKSingleton(const std::int32_t* groupIds, std::int64_t singleton);

/** What a device check found: the first offending element, or -1. */
struct DeviceCheck {
  std::int64_t bad = -1;
};

struct CudaGrpoBackend {
  /**
   * Advantages of `n` rewards (device memory of CUDA device `device`) grouped by `plan`, into
   * `out` (device). Returns the first non-finite reward's index (or -1); out is then unspecified.
   */
  DeviceCheck (*advantages)(int device, const float* rewards, std::int64_t n, const GroupPlan& plan,
                            const AdvantageOptions& opts, float* out);
  /** out[i, t] = adv[i] * mask[i, t] on the device; returns the first bad element (adv or mask), or -1. */
  DeviceCheck (*broadcast)(int device, const float* adv, const float* mask, std::int64_t batch, std::int64_t len,
                           float* out);
  /**
   * The policy loss over device inputs (pointers in `in` are device memory), the gradient into
   * `dLogProbs` (device). `ok` is false when a mask value or an unmasked input is invalid (the
   * result is then unspecified).
   */
  PolicyLossResult (*policyLoss)(int device, const PolicyLossInputs& in, const PolicyLossOptions& opts,
                                 float* dLogProbs, bool* ok);
};

/** Registers the CUDA backend (called once by grpo_cuda.cu at load). */
void RegisterCudaGrpoBackend(const CudaGrpoBackend* backend);
/** The registered backend, or null in builds without CUDA GRPO kernels. */
const CudaGrpoBackend* GetCudaGrpoBackend();

/** The aggregation divisor (docs/design.md, "GRPO — semantics", "Aggregation") of a batch with `tokens` unmasked tokens
 * in `sequences` non-empty rows. */
double AggregationDenominator(const PolicyLossOptions& o, std::int64_t tokens, std::int64_t sequences,
                              std::int64_t responseLen);

}  // namespace sinkflex::grpo
