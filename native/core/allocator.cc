#include "allocator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

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

// ---- the cache of large host blocks ------------------------------------------------------
// A training step allocates and frees the same large activation buffers every step (tens of
// MB each); from the system allocator each comes as fresh pages whose first touch faults, which
// cost a fifth of a small model's CPU step. Freed blocks of at least kCacheMinBytes are kept
// (up to the cache's byte budget, oldest dropped first) and handed back to a later request of
// about the same size: a request is rounded up to its class (an eighth of its power of two, at
// most 12.5% more) and takes the smallest cached block of at least that class and at most a
// quarter more, so that steps whose token count moves a little reuse each other's blocks. The
// live set remembers each such block's capacity for HostFree. The counters above count the
// requested bytes of live blocks only (a cached block is free).

constexpr std::size_t kCacheMinBytes = std::size_t{1} << 20;
constexpr std::size_t kDefaultCacheBytes = std::size_t{256} << 20;

/** The block capacity of a request of `rounded` bytes (>= kCacheMinBytes). */
std::size_t CacheClass(std::size_t rounded) {
  std::size_t pow2 = kCacheMinBytes;
  while (pow2 * 2 <= rounded) pow2 *= 2;
  const std::size_t granule = pow2 / 8;
  return (rounded + granule - 1) / granule * granule;
}

/** The cache's byte budget: SINKFLEX_HOST_CACHE_MIB (0 turns the cache off), else 256 MiB. */
std::size_t CacheBudget() {
  static const std::size_t budget = [] {
    const char* env = std::getenv("SINKFLEX_HOST_CACHE_MIB");
    if (env == nullptr || *env == '\0') return kDefaultCacheBytes;
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(env, &end, 10);
    if (end == env || *end != '\0' || mib > (std::size_t{1} << 24)) return kDefaultCacheBytes;
    return static_cast<std::size_t>(mib) << 20;
  }();
  return budget;
}

struct BlockCache {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, void*>> blocks;  // (capacity, pointer), oldest first
  std::size_t bytes = 0;
  std::unordered_map<void*, std::size_t> live;  // blocks handed out from this scheme -> capacity
};

BlockCache& Cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: blocks may be freed at exit
  return *cache;
}

/**
 * A cached block for a request of class `capacity`: the smallest one of at least that size and
 * at most a quarter more (steps whose sizes straddle a class boundary still reuse each other's
 * blocks), or null. Sets `*got` to the block's capacity.
 */
void* TakeCached(std::size_t capacity, std::size_t* got) {
  BlockCache& c = Cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  std::size_t best = c.blocks.size();
  for (std::size_t i = 0; i < c.blocks.size(); ++i) {
    const std::size_t cap = c.blocks[i].first;
    if (cap < capacity || cap > capacity + capacity / 4) continue;
    if (best == c.blocks.size() || cap < c.blocks[best].first) best = i;
  }
  if (best == c.blocks.size()) return nullptr;
  void* p = c.blocks[best].second;
  *got = c.blocks[best].first;
  c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(best));
  c.bytes -= *got;
  c.live.emplace(p, *got);
  return p;
}

/** Records a fresh block of `capacity` bytes as live (HostFree finds its capacity there). */
void AddLive(void* p, std::size_t capacity) {
  BlockCache& c = Cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.live.emplace(p, capacity);
}

/** The capacity of a live block (removed from the live set), or 0 when it is not one. */
std::size_t TakeLive(void* p) {
  BlockCache& c = Cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.live.find(p);
  if (it == c.live.end()) return 0;
  const std::size_t cap = it->second;
  c.live.erase(it);
  return cap;
}

/** Keeps a freed block of `capacity` bytes, or frees it (and the oldest blocks past the budget). */
void PutCached(void* ptr, std::size_t capacity) {
  const std::size_t budget = CacheBudget();
  if (capacity > budget) {
    std::free(ptr);
    return;
  }
  std::vector<void*> drop;
  {
    BlockCache& c = Cache();
    const std::lock_guard<std::mutex> lock(c.mutex);
    std::size_t k = 0;
    while (c.bytes + capacity > budget && k < c.blocks.size()) {
      c.bytes -= c.blocks[k].first;
      drop.push_back(c.blocks[k].second);
      ++k;
    }
    c.blocks.erase(c.blocks.begin(), c.blocks.begin() + static_cast<std::ptrdiff_t>(k));
    c.blocks.emplace_back(capacity, ptr);
    c.bytes += capacity;
  }
  for (void* p : drop) std::free(p);
}

/** Frees every cached block (before the system allocator is asked again after it refused). */
void DropCache() {
  std::vector<std::pair<std::size_t, void*>> all;
  {
    BlockCache& c = Cache();
    const std::lock_guard<std::mutex> lock(c.mutex);
    all.swap(c.blocks);
    c.bytes = 0;
  }
  for (auto& b : all) std::free(b.second);
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
  std::size_t rounded = ((bytes + 63) / 64) * 64;
  void* p = nullptr;
  if (rounded >= kCacheMinBytes && CacheBudget() > 0) {
    rounded = CacheClass(rounded);
    std::size_t got = 0;
    p = TakeCached(rounded, &got);
    if (p == nullptr) {
      p = std::aligned_alloc(64, rounded);
      if (p == nullptr) {
        DropCache();
        p = std::aligned_alloc(64, rounded);
      }
      if (p != nullptr) AddLive(p, rounded);
    }
  } else if (rounded) {
    p = std::aligned_alloc(64, rounded);
  }
  if (rounded && !p) {
    Release(kCpuDevice, bytes);
    throw OutOfMemoryError("cpu", bytes, GetMemoryStats(kCpuDevice).current, 0, what);
  }
  return p;
}

void HostFree(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  const std::size_t rounded = ((bytes + 63) / 64) * 64;
  const std::size_t capacity = rounded >= kCacheMinBytes && CacheBudget() > 0 ? TakeLive(ptr) : 0;
  if (capacity > 0)
    PutCached(ptr, capacity);
  else
    std::free(ptr);
  Release(kCpuDevice, bytes);
}

}  // namespace sinkflex
