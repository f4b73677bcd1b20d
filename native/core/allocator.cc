#include "allocator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace sinkflex {
namespace {

struct Counters {
  std::atomic<std::size_t> current{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> limit{0};
};

Counters g_counters[kMaxDevices];

Counters& At(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw ArgumentError("device index " + std::to_string(device) + " is out of range");
  return g_counters[device];
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(const std::string& device, std::size_t requested, std::size_t current,
                                   std::size_t limit, const std::string& what)
    : std::runtime_error("out of memory on " + device + ": " + what + " requested " + FormatBytes(requested) +
                         " with " + FormatBytes(current) + " in use, " +
                         (limit ? "limit " + FormatBytes(limit) : std::string("the system refused the allocation"))),
      device_(device),
      requested_(requested),
      current_(current),
      limit_(limit) {}

std::string FormatBytes(std::size_t bytes) {
  char buf[96];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB (%zu bytes)", b / (1024.0 * 1024 * 1024), bytes);
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f MiB (%zu bytes)", b / (1024.0 * 1024), bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  }
  return buf;
}

std::string DeviceName(int device) {
  if (device == kCpuDevice) return "cpu";
  return "cuda:" + std::to_string(device - 1);
}

MemoryStats GetMemoryStats(int device) {
  Counters& c = At(device);
  return MemoryStats{c.current.load(), c.peak.load(), c.limit.load()};
}

void ResetPeak(int device) {
  Counters& c = At(device);
  c.peak.store(c.current.load());
}

void SetLimit(int device, std::size_t bytes) { At(device).limit.store(bytes); }

void Reserve(int device, std::size_t bytes, const char* what) {
  Counters& c = At(device);
  std::size_t cur = c.current.load();
  for (;;) {
    const std::size_t limit = c.limit.load();
    if (bytes > SIZE_MAX - cur || (limit != 0 && cur + bytes > limit)) {
      throw OutOfMemoryError(DeviceName(device), bytes, cur, limit, what);
    }
    if (c.current.compare_exchange_weak(cur, cur + bytes)) break;
  }
  const std::size_t now = cur + bytes;
  std::size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}

void Release(int device, std::size_t bytes) { At(device).current.fetch_sub(bytes); }

void* HostAlloc(std::size_t bytes, const char* what) {
  Reserve(kCpuDevice, bytes, what);
  const std::size_t rounded = ((bytes + 63) / 64) * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) {
    Release(kCpuDevice, bytes);
    throw OutOfMemoryError("cpu", bytes, GetMemoryStats(kCpuDevice).current, 0, what);
  }
  return p;
}

void HostFree(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  std::free(ptr);
  Release(kCpuDevice, bytes);
}

}  // namespace sinkflex
