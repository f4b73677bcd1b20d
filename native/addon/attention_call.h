// The parsed form of one attention forward/backward call of the binding (attention_binding.cc
// parses and dispatches; attention_device.cc runs calls whose tensors are DeviceTensors or
// whose device is CUDA). Everything a call needs is owned here so it can run off the main thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <napi.h>

#include "../attention/sink_attention.h"
#include "../core/tensor_storage.h"

namespace sinkflex::addon {

/** A parsed mask with its own copies of document ids. */
struct MaskHolder {
  attention::MaskProgram program;
  std::vector<HostBuffer<std::int32_t>> ids;
};

/** A block mask handle: the mask it was built from, its signature and the classification. */
struct BlockMaskHolder {
  std::shared_ptr<MaskHolder> mask;
  std::string signature;
  attention::BlockMask blocks;
};
using BlockMaskRef = std::shared_ptr<BlockMaskHolder>;

/** What an eager forward kept for its backward: CPU probabilities or device ones. */
struct SavedState {
  int slot = kCpuDevice;
  attention::EagerSaved cpu;
  std::unique_ptr<attention::DeviceSaved> device;
};
using SavedRef = std::shared_ptr<SavedState>;

enum class Impl { kFused, kEager };

/** One tensor argument: a Float32Array (`host`) or a DeviceTensor (`tensor`), or neither. */
struct TensorIn {
  const float* host = nullptr;
  TensorRef tensor;
  bool given() const { return host != nullptr || tensor != nullptr; }
};

struct Call {
  attention::Shape shape;
  attention::Options opts;
  Impl impl = Impl::kFused;
  /** Allocator slot of the device the call runs on (0 = cpu, 1 + k = cuda:k). */
  int device = kCpuDevice;
  /** q (and k, v, out, dOut) are DeviceTensors; the results are DeviceTensors too. */
  bool tensors = false;
  /** Element type of q, k, v, out, dOut and of out, dq, dk, dv (fp32 for Float32Array calls). */
  DType dtype = DType::kF32;
  bool save = false;
  std::shared_ptr<MaskHolder> mask;
  BlockMaskRef blockMask;
  SavedRef saved;
  TensorIn q, k, v, sinks, out, lse, dOut, dLse;
  /** Input shapes of q, k, v (the DeviceTensor results keep them). */
  std::vector<std::int64_t> qShape, kShape, vShape;
  std::vector<Napi::Value> keep;
};

struct ForwardResult {
  HostBuffer<float> out, lse;  // Float32Array results
  TensorRef outT, lseT;        // DeviceTensor results
  SavedRef saved;
};

struct BackwardResult {
  HostBuffer<float> dq, dk, dv, dSinks;
  TensorRef dqT, dkT, dvT, dSinksT;
};

/** Runs a forward whose inputs are DeviceTensors or whose device is CUDA. */
void RunDeviceForward(const Call& c, ForwardResult* r);
/** Runs a backward whose inputs are DeviceTensors or whose device is CUDA. */
void RunDeviceBackward(const Call& c, BackwardResult* r);

}  // namespace sinkflex::addon
