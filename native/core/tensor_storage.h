// The memory behind a device tensor (the JS DeviceTensor handle, native/addon/device_tensor.h):
// a shape, an element type and tracked bytes on one device slot — host memory for 'cpu'
// (HostAlloc), device memory for 'cuda:k' (DeviceAlloc). Shared by reference (shared_ptr) so
// that a call in flight keeps the bytes alive even when the handle is disposed meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "allocator.h"
#include "device_buffer.h"
#include "dtype.h"

namespace sinkflex {

class TensorStorage {
 public:
  /** Uninitialised storage of prod(shape) elements on `slot` (0 = cpu, 1 + k = cuda:k). */
  TensorStorage(int slot, DType dtype, std::vector<std::int64_t> shape, const char* what);
  /** Adopts a tracked host fp32 buffer (slot cpu). */
  TensorStorage(HostBuffer<float>&& buf, std::vector<std::int64_t> shape);
  /** Adopts a device buffer of fp32 (kF32) or 16-bit bits (kBF16 unless `dtype` says kF16). */
  TensorStorage(DeviceBuffer<float>&& buf, std::vector<std::int64_t> shape);
  TensorStorage(DeviceBuffer<std::uint16_t>&& buf, std::vector<std::int64_t> shape, DType dtype = DType::kBF16);
  ~TensorStorage();
  TensorStorage(const TensorStorage&) = delete;
  TensorStorage& operator=(const TensorStorage&) = delete;

  /** Allocator slot: 0 = cpu, 1 + k = cuda:k. */
  int slot() const { return slot_; }
  bool onCpu() const { return slot_ == kCpuDevice; }
  /** CUDA device index (slot - 1); only meaningful when !onCpu(). */
  int cudaIndex() const { return slot_ - 1; }
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t count() const { return count_; }
  std::size_t bytes() const { return count_ * DTypeSize(dtype_); }
  void* data() const { return data_; }

  /** Fills the storage from count() host floats, converting to dtype(). */
  void CopyFromFloats(const float* src);
  /** Writes count() floats to host memory, converting from dtype(). */
  void CopyToFloats(float* dst) const;

  /** "[2, 3, 4]". */
  std::string ShapeString() const;
  /** Product of the dims (0 for an empty dim); throws ArgumentError past 2^53 elements. */
  static std::size_t Count(const std::vector<std::int64_t>& shape);

 private:
  int slot_ = kCpuDevice;
  DType dtype_ = DType::kF32;
  std::vector<std::int64_t> shape_;
  std::size_t count_ = 0;
  void* data_ = nullptr;
};

using TensorRef = std::shared_ptr<TensorStorage>;

}  // namespace sinkflex
