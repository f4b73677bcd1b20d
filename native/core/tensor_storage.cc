#include "tensor_storage.h"

#include <cstring>

#include "errors.h"

namespace sinkflex {

std::size_t TensorStorage::Count(const std::vector<std::int64_t>& shape) {
  double n = 1.0;
  std::size_t count = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw ArgumentError("tensor dims must be >= 0, got " + std::to_string(d));
    n *= static_cast<double>(d);
    count *= static_cast<std::size_t>(d);
  }
  if (n > 9007199254740992.0) throw ArgumentError("tensor has more than 2^53 elements");
  return count;
}

TensorStorage::TensorStorage(int slot, DType dtype, std::vector<std::int64_t> shape, const char* what)
    : slot_(slot), dtype_(dtype), shape_(std::move(shape)), count_(Count(shape_)) {
  if (bytes() == 0) return;
  data_ = slot_ == kCpuDevice ? HostAlloc(bytes(), what) : DeviceAlloc(cudaIndex(), bytes(), what);
}

TensorStorage::TensorStorage(HostBuffer<float>&& buf, std::vector<std::int64_t> shape)
    : slot_(kCpuDevice), dtype_(DType::kF32), shape_(std::move(shape)), count_(Count(shape_)) {
  if (buf.size() != count_) throw ArgumentError("tensor buffer does not match its shape " + ShapeString());
  data_ = buf.release();
}

TensorStorage::TensorStorage(DeviceBuffer<float>&& buf, std::vector<std::int64_t> shape)
    : slot_(buf.device() + 1), dtype_(DType::kF32), shape_(std::move(shape)), count_(Count(shape_)) {
  if (buf.size() != count_) throw ArgumentError("tensor buffer does not match its shape " + ShapeString());
  data_ = buf.release();
}

TensorStorage::TensorStorage(DeviceBuffer<std::uint16_t>&& buf, std::vector<std::int64_t> shape, DType dtype)
    : slot_(buf.device() + 1), dtype_(dtype), shape_(std::move(shape)), count_(Count(shape_)) {
  if (dtype_ == DType::kF32) throw ArgumentError("a 16-bit device buffer cannot hold a float32 tensor");
  if (buf.size() != count_) throw ArgumentError("tensor buffer does not match its shape " + ShapeString());
  data_ = buf.release();
}

TensorStorage::~TensorStorage() {
  if (data_ == nullptr) return;
  if (slot_ == kCpuDevice) {
    HostFree(data_, bytes());
  } else {
    DeviceFree(cudaIndex(), data_, bytes());
  }
}

void TensorStorage::CopyFromFloats(const float* src) {
  if (count_ == 0) return;
  if (slot_ == kCpuDevice) {
    if (dtype_ == DType::kF32) {
      std::memcpy(data_, src, bytes());
    } else {
      FloatsTo16(dtype_, src, static_cast<std::uint16_t*>(data_), count_);
    }
    return;
  }
  if (dtype_ == DType::kF32) {
    CopyToDevice(cudaIndex(), data_, src, bytes());
    return;
  }
  HostBuffer<std::uint16_t> tmp(count_, "16-bit staging");
  FloatsTo16(dtype_, src, tmp.data(), count_);
  CopyToDevice(cudaIndex(), data_, tmp.data(), bytes());
}

void TensorStorage::CopyToFloats(float* dst) const {
  if (count_ == 0) return;
  if (slot_ == kCpuDevice) {
    if (dtype_ == DType::kF32) {
      std::memcpy(dst, data_, bytes());
    } else {
      Floats16To(dtype_, static_cast<const std::uint16_t*>(data_), dst, count_);
    }
    return;
  }
  if (dtype_ == DType::kF32) {
    CopyToHost(cudaIndex(), dst, data_, bytes());
    return;
  }
  HostBuffer<std::uint16_t> tmp(count_, "16-bit staging");
  CopyToHost(cudaIndex(), tmp.data(), data_, bytes());
  Floats16To(dtype_, tmp.data(), dst, count_);
}

std::string TensorStorage::ShapeString() const {
  std::string s = "[";
  for (std::size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace sinkflex
