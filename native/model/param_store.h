// Reference: docs/design.md, "The built-in model — semantics" (AdamW, initialisation); float64
//   reference: refAdamW in test/model/fixtures/reference.ts.
// Tests: test/model/adamw-param-store.test.ts, checkpoint.test.ts, determinism.test.ts; on a GPU
//   test/model/transformer-cuda.test.ts.
// Named parameters with their gradients and AdamW moments, owned natively (every buffer through
// the tracked allocator), initialised from a seed, updated by AdamW with global gradient-norm
// clipping. A parameter is stored as float32 or, when frozen, as bfloat16 (a pretrained model's
// weights in their checkpoint dtype: its resident size is about its file size); a frozen
// (non-trainable) parameter has no gradient and no AdamW moments, and zeroGrad, the gradient norm
// and AdamW skip it. A store lives on the CPU (host buffers) or on one CUDA device
// (device buffers: the values are initialised on the host from the same seed, so bit for bit
// like a CPU store's, then copied; zeroing, the gradient norm and AdamW run on the device; a
// bfloat16 parameter keeps its bits in device memory, a frozen one has no device gradient or
// moments).
#pragma once

#include <cstdint>
#include <deque>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../core/allocator.h"
#include "../core/device_buffer.h"
#include "ops.h"
#include "rng.h"

namespace sinkflex::model {

/** How a parameter is initialised: normal(0, std), uniform with standard deviation std (U(-b, b), b = std sqrt 3), ones
 * or zeros. */
enum class ParamInit { kNormal, kOnes, kZeros, kUniform };

/**
 * How a parameter's values are stored: float32, bfloat16 bits, or MXFP4 (mxfp4.h: 4-bit blocks
 * and E8M0 scales, the last dimension a multiple of 32; gpt-oss's expert matrices kept packed).
 */
enum class ParamDtype { kFloat32, kBFloat16, kMxfp4 };

/** Description of one parameter. */
struct ParamSpec {
  std::string name;
  std::vector<std::int64_t> shape;  // 1 to 4 dimensions, each >= 1
  ParamInit init = ParamInit::kNormal;
  double std = 0.02;                        // for kNormal and kUniform: the standard deviation
  bool decay = true;                        // AdamW weight decay applies
  ParamDtype dtype = ParamDtype::kFloat32;  // bfloat16 and MXFP4 require trainable = false (MXFP4: init zeros or ones)
  bool trainable = true;                    // false: no gradient, no AdamW moments
};

/**
 * One parameter and its optimiser state (numel elements each; host buffers or device buffers,
 * per the store). A bfloat16 parameter keeps its values in value16 (value is empty); a frozen
 * one has no grad, m, v.
 */
struct Parameter {
  ParamSpec spec;
  std::int64_t numel = 0;
  HostBuffer<float> value, grad, m, v;          // a CPU store
  HostBuffer<std::uint16_t> value16;            // a CPU store's bfloat16 values (bits)
  DeviceBuffer<float> dValue, dGrad, dM, dV;    // a CUDA store
  DeviceBuffer<std::uint16_t> dValue16;         // a CUDA store's bfloat16 values (bits)
  HostBuffer<std::uint8_t> blocks, scales;      // a CPU store's MXFP4 values (numel / 2, numel / 32 bytes)
  DeviceBuffer<std::uint8_t> dBlocks, dScales;  // a CUDA store's MXFP4 values

  bool bf16() const { return spec.dtype == ParamDtype::kBFloat16; }
  bool mxfp4() const { return spec.dtype == ParamDtype::kMxfp4; }
  /** Bytes of the values as stored. */
  std::size_t ValueBytes() const;
  bool trainable() const { return spec.trainable; }
};

/** Which buffer of a parameter. */
enum class ParamBuffer { kValue, kGrad, kM, kV };

/** AdamW options of a store step. */
struct AdamWStepOptions : AdamWOptions {
  double maxGradNorm = 0.0;   // > 0: clip the global gradient norm to it (PyTorch clip_grad_norm_)
  bool skipNonFinite = true;  // a NaN/Inf gradient norm skips the update
};

/** What an AdamW step did. */
struct AdamWStepResult {
  double gradNorm;    // global L2 norm of the gradients before clipping (NaN/Inf when not finite)
  double clipScale;   // factor applied to the gradients (1 when not clipped)
  bool finite;        // gradNorm is finite
  bool applied;       // the update ran (false when skipped for a non-finite norm)
  std::int64_t step;  // optimiser steps taken so far
};

class ParamStore {
 public:
  /**
   * Validates the specs (unique non-empty names, valid shapes) and initialises from `seed`, on
   * the CPU (device < 0) or on CUDA device `device` (DeviceError when this build or machine has
   * no such device or no CUDA model kernels; OutOfMemoryError past the tracked limit). Frozen and
   * bfloat16 parameters are stored alike on both (no gradient or moments; bfloat16 bits).
   */
  ParamStore(std::vector<ParamSpec> specs, std::uint64_t seed, int device = -1);
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  std::size_t size() const { return params_.size(); }
  Parameter& at(std::size_t i) { return params_[i]; }
  const Parameter& at(std::size_t i) const { return params_[i]; }
  /** nullptr when absent. */
  Parameter* Find(const std::string& name);
  /** Throws ArgumentError naming the unknown parameter. */
  Parameter& Get(const std::string& name);
  /**
   * Pointer to one float32 buffer of a parameter (device memory for a CUDA store); null for the
   * value of a bfloat16 parameter and the grad/m/v of a frozen one.
   */
  static float* Buffer(Parameter& p, ParamBuffer which);
  /**
   * Copies numel floats of one buffer to host memory (a bfloat16 value widened exactly).
   * ArgumentError for grad/m/v of a frozen parameter.
   */
  void Read(Parameter& p, ParamBuffer which, float* host) const;
  /**
   * Copies numel floats from host memory into one buffer (rounded to nearest even for a
   * bfloat16 value). ArgumentError for grad/m/v of a frozen parameter.
   */
  void Write(Parameter& p, ParamBuffer which, const float* host);
  /**
   * Copies the raw bits of a bfloat16 parameter's values, or an MXFP4 parameter's exact bfloat16
   * dequantization (ArgumentError for a float32 one).
   */
  void ReadBf16(const Parameter& p, std::uint16_t* host) const;
  /** Copies an MXFP4 parameter's blocks (numel / 2 bytes) and scales (numel / 32 bytes) (ArgumentError for another
   * dtype). */
  void ReadMxfp4(const Parameter& p, std::uint8_t* blocks, std::uint8_t* scales) const;
  /** Sets an MXFP4 parameter's blocks and scales (ArgumentError for another dtype). */
  void WriteMxfp4(Parameter& p, const std::uint8_t* blocks, const std::uint8_t* scales);
  /** Sets a bfloat16 parameter's values from raw bits, without rounding (ArgumentError for a float32 one). */
  void WriteBf16(Parameter& p, const std::uint16_t* host);

  /**
   * Adds parameters after the existing ones, initialised from the store's seed exactly as a
   * store made with all the specs at once (parameter i's streams derive from the seed and i).
   * References to the existing parameters stay valid. Increments layoutVersion(). Throws
   * ArgumentError (nothing added) on a bad or duplicate spec, or while a model operation holds
   * layoutMutex() (a forward, backward or generation step in progress).
   */
  void Append(std::vector<ParamSpec> specs);
  /**
   * Removes every parameter from index `count` on (1 <= count <= size()), with its gradient and
   * moments. Increments layoutVersion(). Throws ArgumentError while a model operation holds
   * layoutMutex().
   */
  void Truncate(std::size_t count);
  /**
   * Makes the named parameters non-trainable, freeing their gradients and AdamW moments (already
   * frozen ones are left as they are), on the host or the device. Throws ArgumentError (nothing changed)
   * for an unknown name or while a model operation holds layoutMutex().
   */
  void Freeze(const std::vector<std::string>& names);
  /** Changes each time Append or Truncate changes the parameter list (models check it). */
  std::uint64_t layoutVersion() const { return layoutVersion_; }
  /** Held shared by model operations that read parameters through pointers (Append/Truncate take it exclusively). */
  std::shared_mutex& layoutMutex() const { return layoutMutex_; }

  /** The CUDA device index, or -1 for a CPU store. */
  int device() const { return device_; }

  std::int64_t numel() const { return numel_; }
  /** Elements of the trainable parameters. */
  std::int64_t trainableNumel() const { return trainableNumel_; }
  /** Bytes of every buffer the store holds (values, gradients, moments). */
  std::size_t bytes() const { return bytes_; }
  std::uint64_t seed() const { return seed_; }

  /** Zeroes the gradients (of the trainable parameters). */
  void ZeroGrad();
  /** Global L2 norm of the gradients of the trainable parameters (double, deterministic). */
  double GradNorm() const;
  AdamWStepResult AdamWStep(const AdamWStepOptions& o);

  std::int64_t step() const { return step_; }
  void set_step(std::int64_t s);
  Rng& rng() { return rng_; }

 private:
  std::deque<Parameter> params_;  // a deque: Append keeps references to earlier parameters valid
  std::unordered_map<std::string, std::size_t> index_;
  void UseDevice() const;
  void CheckSpecs(const std::vector<ParamSpec>& specs) const;
  void Add(std::vector<ParamSpec> specs);
  void Drop(std::size_t count);
  std::uint64_t layoutVersion_ = 0;
  mutable std::shared_mutex layoutMutex_;

  std::int64_t numel_ = 0;
  std::int64_t trainableNumel_ = 0;
  std::size_t bytes_ = 0;
  int device_ = -1;
  std::uint64_t seed_;
  std::int64_t step_ = 0;
  Rng rng_;
};

}  // namespace sinkflex::model
