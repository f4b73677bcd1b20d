// RAII owner of tracked device memory (DeviceAlloc / DeviceFree of cuda_device.h): the bytes
// are counted per device by the tracked allocator (memory.peakBytes('cuda')) and an
// allocation past the device's limit throws OutOfMemoryError. Plain C++: host code of every
// build may hold one (in a build without CUDA, constructing a non-empty one throws DeviceError).
#pragma once

#include <cstddef>
#include <utility>

#include "cuda_device.h"

namespace sinkflex {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /** `count` uninitialised elements on CUDA device `device` (0-based); `what` names it in errors. */
  DeviceBuffer(int device, std::size_t count, const char* what)
      : ptr_(count ? static_cast<T*>(DeviceAlloc(device, count * sizeof(T), what)) : nullptr),
        count_(count),
        device_(device) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)), device_(o.device_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
      device_ = o.device_;
    }
    return *this;
  }
  void reset() {
    if (ptr_) DeviceFree(device_, ptr_, count_ * sizeof(T));
    ptr_ = nullptr;
    count_ = 0;
  }
  /** Gives up ownership; the caller must DeviceFree(device(), ptr, count * sizeof(T)). */
  T* release() {
    count_ = 0;
    return std::exchange(ptr_, nullptr);
  }
  /** Copies count() elements from host memory. */
  void Upload(const T* host) { CopyToDevice(device_, ptr_, host, count_ * sizeof(T)); }
  /** Copies count() elements to host memory. */
  void Download(T* host) const { CopyToHost(device_, host, ptr_, count_ * sizeof(T)); }
  T* data() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  int device() const { return device_; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
  int device_ = 0;
};

}  // namespace sinkflex
