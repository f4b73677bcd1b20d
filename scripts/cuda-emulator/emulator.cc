// The CUDA emulator's runtime: device memory is host memory (filled with NaN bytes when
// allocated, so reads of unwritten memory show), streams run synchronously, and a launch runs
// its blocks one after another, the threads of a block as cooperative fibers that switch only
// at __syncthreads and warp shuffles. Between two barriers the threads run one after another —
// in index order, or in reverse with SFX_EMU_ORDER=reverse — so a missing barrier shows up as
// a wrong result in one of the two orders; threads waiting at different barriers (divergent
// __syncthreads) are reported as an error. x86-64 only (the context switch is a few lines of
// assembly). The warp-level matrix instructions (mma.m16n8k16, ldmatrix) are warp-collective
// operations over the lanes' fragments, like the shuffles: every lane deposits its operands,
// the warp meets at a barrier, and each lane computes its own part of the result from all of them.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_runtime.h"

extern "C" void sfx_emu_switch(void** save, void* to);
asm(R"(
.text
.globl sfx_emu_switch
.hidden sfx_emu_switch
.type sfx_emu_switch,@function
sfx_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size sfx_emu_switch, .-sfx_emu_switch
)");

namespace emu {
namespace {

constexpr std::size_t kStackBytes = 256 * 1024;
enum State { kReady, kBlockBarrier, kWarpBarrier, kDone };

struct Fiber {
  void* sp = nullptr;
  std::vector<char> stack;
  State state = kReady;
};

/** What a lane gives to a warp-collective matrix operation. */
struct LaneOperands {
  int op = 0;  // 1 + kind for mma, 10 + count (+ 100 when .trans) for ldmatrix
  unsigned a[4] = {}, b[2] = {};
  float c[4] = {};
  const void* row = nullptr;
};

struct Run {
  dim3 grid, block, index;
  std::vector<Fiber> fibers;
  void* scheduler = nullptr;
  int current = 0;
  const std::function<void()>* body = nullptr;
  std::vector<float> shuffle;
  std::vector<LaneOperands> lanes;
  std::vector<unsigned char> shared;
  std::string error;  // a misuse seen inside a kernel (thrown when the block ends)
};

Run g_run;
std::mutex g_launch;
thread_local int g_device = 0;
thread_local cudaError_t g_lastError = cudaSuccess;

[[noreturn]] void FiberEntry() {
  (*g_run.body)();
  g_run.fibers[g_run.current].state = kDone;
  sfx_emu_switch(&g_run.fibers[g_run.current].sp, g_run.scheduler);
  std::abort();  // a finished fiber is never resumed
}

void* InitialStack(Fiber& f) {
  auto top = reinterpret_cast<std::uintptr_t>(f.stack.data() + f.stack.size()) & ~std::uintptr_t{15};
  auto** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                   // top - 8: keeps FiberEntry's frame aligned
  *--sp = reinterpret_cast<void*>(&FiberEntry);      // top - 16: where the first switch returns to
  for (int r = 0; r < 6; ++r) *--sp = nullptr;       // rbp, rbx, r12..r15
  return sp;
}

void Yield(State s) {
  Fiber& f = g_run.fibers[g_run.current];
  f.state = s;
  sfx_emu_switch(&f.sp, g_run.scheduler);
}

void RunBlock(bool reverse) {
  const int n = static_cast<int>(g_run.fibers.size());
  for (Fiber& f : g_run.fibers) {
    f.state = kReady;
    f.sp = InitialStack(f);
  }
  std::memset(g_run.shared.data(), 0xff, g_run.shared.size());  // NaN: uninitialised shared memory shows
  for (;;) {
    for (int i = 0; i < n; ++i) {
      const int t = reverse ? n - 1 - i : i;
      if (g_run.fibers[t].state != kReady) continue;
      g_run.current = t;
      sfx_emu_switch(&g_run.scheduler, g_run.fibers[t].sp);
    }
    bool released = false, live = false, allAtBlock = true;
    for (int w = 0; w < n; w += 32) {
      bool any = false, all = true;
      for (int t = w; t < n && t < w + 32; ++t) {
        if (g_run.fibers[t].state == kDone) continue;
        any = true;
        all = all && g_run.fibers[t].state == kWarpBarrier;
      }
      if (any && all) {
        for (int t = w; t < n && t < w + 32; ++t) {
          if (g_run.fibers[t].state == kWarpBarrier) g_run.fibers[t].state = kReady;
        }
        released = true;
      }
    }
    if (released) continue;
    for (const Fiber& f : g_run.fibers) {
      if (f.state == kDone) continue;
      live = true;
      allAtBlock = allAtBlock && f.state == kBlockBarrier;
    }
    if (!live) {
      if (!g_run.error.empty()) throw std::runtime_error("CUDA emulator: " + g_run.error);
      return;
    }
    if (!allAtBlock) {
      throw std::runtime_error("CUDA emulator: the threads of block (" + std::to_string(g_run.index.x) + ", " +
                               std::to_string(g_run.index.y) + ", " + std::to_string(g_run.index.z) +
                               ") wait at different barriers (divergent __syncthreads or warp shuffle)");
    }
    for (Fiber& f : g_run.fibers) {
      if (f.state == kBlockBarrier) f.state = kReady;
    }
  }
}

}  // namespace

Coord ThreadIdx() { return Coord{static_cast<unsigned>(g_run.current), 0u, 0u}; }
const dim3& BlockIdx() { return g_run.index; }
const dim3& BlockDim() { return g_run.block; }
const dim3& GridDim() { return g_run.grid; }
void SyncThreads() { Yield(kBlockBarrier); }
void* DynamicShared() { return g_run.shared.data(); }

float ShflXor(float v, int laneMask) {
  const int t = g_run.current;
  g_run.shuffle[t] = v;
  Yield(kWarpBarrier);
  const int partner = (t & ~31) | ((t & 31) ^ (laneMask & 31));
  const float r = g_run.shuffle[partner];
  Yield(kWarpBarrier);  // nobody overwrites its slot before everyone has read
  return r;
}

namespace {

/**
 * Deposits this lane's operands, waits for the warp and returns the warp's first thread; records
 * an error (and returns -1) unless all 32 lanes of the warp are running and made the same call.
 */
int GatherWarp(const LaneOperands& mine) {
  const int t = g_run.current, w = t & ~31, n = static_cast<int>(g_run.fibers.size());
  g_run.lanes[t] = mine;
  Yield(kWarpBarrier);
  bool ok = w + 32 <= n;
  for (int l = w; ok && l < w + 32; ++l) ok = g_run.fibers[l].state != kDone && g_run.lanes[l].op == mine.op;
  if (!ok && g_run.error.empty()) {
    g_run.error = "a warp-level matrix instruction (mma/ldmatrix) was not executed by all 32 lanes of warp " +
                  std::to_string(t / 32) + " together (block size " + std::to_string(n) + ")";
  }
  return ok ? w : -1;
}

float Half16(unsigned bits, int kind) {
  bits &= 0xffffu;
  if (kind == 0) {
    const std::uint32_t u = bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = static_cast<int>((bits >> 10) & 0x1fu), m = static_cast<int>(bits & 0x3ffu);
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(m | 0x400), e - 25);
}

}  // namespace

void MmaM16N8K16(int kind, float d[4], const unsigned a[4], const unsigned b[2]) {
  LaneOperands mine;
  mine.op = 1 + kind;
  for (int i = 0; i < 4; ++i) mine.a[i] = a[i], mine.c[i] = d[i];
  mine.b[0] = b[0];
  mine.b[1] = b[1];
  const int w = GatherWarp(mine);
  const int lane = g_run.current & 31, g = lane / 4, t = lane % 4;
  if (w < 0) {
    for (int i = 0; i < 4; ++i) d[i] = NAN;
  } else {
    // A[r][k] and B[k][c] from the lanes that hold them (the PTX ISA's m16n8k16 fragment tables).
    auto A = [&](int r, int k) {
      const LaneOperands& o = g_run.lanes[w + (r % 8) * 4 + (k % 8) / 2];
      return Half16(o.a[(r / 8) + 2 * (k / 8)] >> (16 * (k % 2)), kind);
    };
    auto B = [&](int k, int c) {
      const LaneOperands& o = g_run.lanes[w + c * 4 + (k % 8) / 2];
      return Half16(o.b[k / 8] >> (16 * (k % 2)), kind);
    };
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), c = 2 * t + (i % 2);
      double s = g_run.lanes[w + lane].c[i];
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A(r, k)) * static_cast<double>(B(k, c));
      d[i] = static_cast<float>(s);
    }
  }
  Yield(kWarpBarrier);  // nobody overwrites its operands before everyone has read
}

void LdMatrix(int count, bool trans, const void* row, unsigned* r) {
  LaneOperands mine;
  mine.op = 10 + count + (trans ? 100 : 0);
  mine.row = row;
  int w = GatherWarp(mine);
  const int lane = g_run.current & 31;
  for (int l = 0; w >= 0 && l < 8 * count; ++l) {
    if (reinterpret_cast<std::uintptr_t>(g_run.lanes[w + l].row) % 16 != 0) {
      if (g_run.error.empty()) g_run.error = "ldmatrix: lane " + std::to_string(l) + " gave a row address that is not 16-byte aligned";
      w = -1;
    }
  }
  for (int j = 0; j < count; ++j) {
    if (w < 0) {
      r[j] = 0xffffffffu;
      continue;
    }
    std::uint16_t lo, hi;
    if (!trans) {
      const auto* p = static_cast<const std::uint16_t*>(g_run.lanes[w + 8 * j + lane / 4].row);
      lo = p[2 * (lane % 4)];
      hi = p[2 * (lane % 4) + 1];
    } else {
      lo = static_cast<const std::uint16_t*>(g_run.lanes[w + 8 * j + 2 * (lane % 4)].row)[lane / 4];
      hi = static_cast<const std::uint16_t*>(g_run.lanes[w + 8 * j + 2 * (lane % 4) + 1].row)[lane / 4];
    }
    r[j] = static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
  }
  Yield(kWarpBarrier);
}

void Launch(dim3 grid, dim3 block, std::size_t sharedBytes, std::function<void()> body) {
  std::lock_guard<std::mutex> lock(g_launch);
  const unsigned n = block.x * block.y * block.z;
  if (n == 0 || n > 1024 || block.y != 1 || block.z != 1 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    g_lastError = cudaErrorInvalidValue;
    return;
  }
  const char* order = std::getenv("SFX_EMU_ORDER");
  const bool reverse = order != nullptr && std::strcmp(order, "reverse") == 0;
  g_run.grid = grid;
  g_run.block = block;
  g_run.body = &body;
  if (g_run.fibers.size() != n) {
    g_run.fibers.resize(n);
    for (Fiber& f : g_run.fibers) f.stack.resize(kStackBytes);
  }
  g_run.shuffle.assign(n, 0.0f);
  g_run.lanes.assign(n, LaneOperands{});
  g_run.error.clear();
  g_run.shared.assign(sharedBytes, 0);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        g_run.index = dim3(x, y, z);
        RunBlock(reverse);
      }
    }
  }
}

}  // namespace emu

// ---- runtime API ------------------------------------------------------------------------------

namespace {
int DeviceCount() {
  const char* n = std::getenv("SFX_EMU_DEVICES");
  return n != nullptr ? std::atoi(n) : 1;
}
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = DeviceCount();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= DeviceCount()) return cudaErrorInvalidDevice;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "sinkflex CUDA emulator (CPU)");
  prop->totalGlobalMem = std::size_t{16} << 30;
  prop->major = 9;  // an H100/H200; SFX_EMU_CC=<major>.<minor> pretends another (e.g. 7.5: no bf16 mma)
  prop->minor = 0;
  if (const char* cc = std::getenv("SFX_EMU_CC")) {
    int major = 0, minor = 0;
    if (std::sscanf(cc, "%d.%d", &major, &minor) == 2 && major > 0) prop->major = major, prop->minor = minor;
  }
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = emu::g_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= DeviceCount()) return cudaErrorInvalidDevice;
  emu::g_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 232448 : 0;  // an H100/H200's limit
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, rounded);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*ptr, 0xff, rounded);  // NaN: reads of memory no kernel wrote show
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind, cudaStream_t) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::g_lastError;
  emu::g_lastError = cudaSuccess;
  return e;
}

const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidValue: return "invalid argument";
    default: return "emulated CUDA error";
  }
}

const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    default: return "cudaErrorUnknown";
  }
}
