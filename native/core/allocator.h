// Tracked allocator: every native allocation of a kernel goes through here, so current and
// peak bytes per device are measurable and an optional per-device limit can be enforced.
// Devices are numbered: 0 = cpu, 1 + k = cuda device k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "errors.h"

namespace sinkflex {

constexpr int kCpuDevice = 0;
constexpr int kMaxDevices = 9;  // cpu + up to 8 GPUs

/** Name of a device slot: "cpu" or "cuda:<k>". */
std::string DeviceName(int device);

/** Current / peak / limit counters of one device. */
struct MemoryStats {
  std::size_t current = 0;
  std::size_t peak = 0;
  std::size_t limit = 0;  // 0 = unlimited
};

MemoryStats GetMemoryStats(int device);
/** Sets peak to the current value. */
void ResetPeak(int device);
/** 0 removes the limit. */
void SetLimit(int device, std::size_t bytes);

/**
 * Reserves `bytes` in the device's counters, throwing OutOfMemoryError (naming `what`, the
 * request and the limit) when the limit would be exceeded. Thread-safe.
 */
void Reserve(int device, std::size_t bytes, const char* what);
/** Returns a reservation made by Reserve. */
void Release(int device, std::size_t bytes);

/**
 * 64-byte aligned, tracked host allocation. Throws OutOfMemoryError. Blocks of 1 MiB or more
 * freed by HostFree are kept in a bounded cache for reuse (allocator.cc; SINKFLEX_HOST_CACHE_MIB,
 * default 256, 0 = off); the counters count live blocks only.
 */
void* HostAlloc(std::size_t bytes, const char* what);
void HostFree(void* ptr, std::size_t bytes);

/** RAII owner of a tracked host array of T (uninitialised unless zero() is called). */
template <typename T>
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::size_t count, const char* what)
      : ptr_(static_cast<T*>(HostAlloc(count * sizeof(T), what))), count_(count) {}
  ~HostBuffer() { reset(); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  void reset() {
    if (ptr_) HostFree(ptr_, count_ * sizeof(T));
    ptr_ = nullptr;
    count_ = 0;
  }
  void zero() {
    for (std::size_t i = 0; i < count_; ++i) ptr_[i] = T(0);
  }
  /** Gives up ownership; the caller must HostFree(ptr, size()*sizeof(T)). */
  T* release() {
    count_ = 0;
    return std::exchange(ptr_, nullptr);
  }
  T* data() const { return ptr_; }
  std::size_t size() const { return count_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace sinkflex
