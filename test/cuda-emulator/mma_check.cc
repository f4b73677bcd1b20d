// Driver of test/cuda-emulator/mma.test.ts: compiled with the CUDA emulator (scripts/cuda-emulator)
// and native/core/cuda_mma.cuh, it runs small kernels that build mma.m16n8k16 and ldmatrix
// fragments by the PTX ISA's layout tables, and prints their inputs and outputs as JSON (the test
// computes the float64 references). Random inputs from a seeded generator; two warps per block,
// each its own tile, so the warp indexing is checked too.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../../native/core/cuda_mma.cuh"

using sinkflex::mma::LdMatrixX2;
using sinkflex::mma::LdMatrixX4;
using sinkflex::mma::MmaBf16;
using sinkflex::mma::MmaF16;

namespace {

constexpr int kWarps = 2;

/** Per warp w: D_w = A_w B_w + C_w (A 16 x 16 row major, B 16 x 8 row major [k][n], C and D 16 x 8). */
__global__ void MmaKernel(int kind, const std::uint16_t* A, const std::uint16_t* B, const float* C, float* D) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* a = A + w * 256;
  const std::uint16_t* b = B + w * 128;
  auto pair = [](std::uint16_t lo, std::uint16_t hi) { return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16); };
  const unsigned af[4] = {pair(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]), pair(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]),
                          pair(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]),
                          pair(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9])};
  const unsigned bf[2] = {pair(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]), pair(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g])};
  const float* c = C + w * 128;
  float d[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
  if (kind == 0) MmaBf16(d, af, bf);
  else MmaF16(d, af, bf);
  float* o = D + w * 128;
  o[g * 8 + 2 * t] = d[0];
  o[g * 8 + 2 * t + 1] = d[1];
  o[(g + 8) * 8 + 2 * t] = d[2];
  o[(g + 8) * 8 + 2 * t + 1] = d[3];
}

/**
 * Per warp w: 32 rows of 8 16-bit elements in shared memory (row i = src[w][i]); lane l gives the
 * address of row perm(l) = (5 l + 3) % 32; out[w][variant][lane][reg] for x4, x4.trans, x2, x2.trans.
 */
__global__ void LdMatrixKernel(const std::uint16_t* src, unsigned* out) {
  alignas(16) __shared__ std::uint16_t rows[kWarps][32][8];
  for (int e = threadIdx.x; e < kWarps * 32 * 8; e += blockDim.x) (&rows[0][0][0])[e] = src[e];
  __syncthreads();
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint16_t* row = rows[w][(5 * lane + 3) % 32];
  unsigned r[4];
  unsigned* o = out + (w * 4 * 32 + lane) * 4;
  LdMatrixX4<false>(r, row);
  for (int j = 0; j < 4; ++j) o[j] = r[j];
  LdMatrixX4<true>(r, row);
  for (int j = 0; j < 4; ++j) o[32 * 4 + j] = r[j];
  LdMatrixX2<false>(r, row);
  for (int j = 0; j < 2; ++j) o[2 * 32 * 4 + j] = r[j];
  LdMatrixX2<true>(r, row);
  for (int j = 0; j < 2; ++j) o[3 * 32 * 4 + j] = r[j];
}

/** One mma where only the first 16 lanes of the warp take part (a misuse the emulator must report). */
__global__ void PartialWarpKernel(float* D) {
  if (threadIdx.x >= 16) return;
  const unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float d[4] = {0, 0, 0, 0};
  MmaBf16(d, a, b);
  D[threadIdx.x] = d[0];
}

std::uint64_t g_state = 0x9e3779b97f4a7c15ull;
std::uint32_t Next() {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return static_cast<std::uint32_t>(g_state >> 11);
}
/** Random 16-bit float bits: bf16 (kind 0) or f16 (kind 1), finite, magnitudes about 2^-6 .. 4, both signs. */
std::uint16_t RandomBits(int kind) {
  const std::uint32_t r = Next();
  const std::uint16_t sign = (r & 1u) ? 0x8000u : 0u;
  if (kind == 0) return static_cast<std::uint16_t>(sign | ((121u + (r >> 1) % 9u) << 7) | ((r >> 8) & 0x7fu));
  return static_cast<std::uint16_t>(sign | ((9u + (r >> 1) % 9u) << 10) | ((r >> 8) & 0x3ffu));
}

template <typename T>
std::string Json(const std::vector<T>& v) {
  std::string s = "[";
  char buf[64];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof(buf), std::is_same<T, float>::value ? "%.9g" : "%.0f", static_cast<double>(v[i]));
    s += (i ? "," : "") + std::string(buf);
  }
  return s + "]";
}

template <typename T>
T* Device(const std::vector<T>& host) {
  void* p = nullptr;
  cudaMalloc(&p, host.size() * sizeof(T));
  cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, nullptr);
  return static_cast<T*>(p);
}

}  // namespace

int main() {
  std::printf("{\"mma\":[");
  for (int kind = 0; kind < 2; ++kind) {
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<std::uint16_t> A(kWarps * 256), B(kWarps * 128);
      std::vector<float> C(kWarps * 128), D(kWarps * 128);
      for (auto& x : A) x = RandomBits(kind);
      for (auto& x : B) x = RandomBits(kind);
      for (auto& x : C) x = (static_cast<float>(Next() % 20001) - 10000.0f) / 997.0f;
      float* d = Device(D);
      SFX_LAUNCH(MmaKernel, dim3(1), dim3(32 * kWarps), 0, nullptr)(kind, Device(A), Device(B), Device(C), d);
      cudaMemcpyAsync(D.data(), d, D.size() * sizeof(float), cudaMemcpyDeviceToHost, nullptr);
      std::printf("%s{\"kind\":%d,\"a\":%s,\"b\":%s,\"c\":%s,\"d\":%s}", kind + trial ? "," : "", kind, Json(A).c_str(),
                  Json(B).c_str(), Json(C).c_str(), Json(D).c_str());
    }
  }
  std::vector<std::uint16_t> rows(kWarps * 32 * 8);
  for (auto& x : rows) x = static_cast<std::uint16_t>(Next());
  std::vector<unsigned> out(kWarps * 4 * 32 * 4, 0u);
  unsigned* o = Device(out);
  SFX_LAUNCH(LdMatrixKernel, dim3(1), dim3(32 * kWarps), 0, nullptr)(Device(rows), o);
  cudaMemcpyAsync(out.data(), o, out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost, nullptr);
  std::printf("],\"ldmatrix\":{\"rows\":%s,\"out\":%s}", Json(rows).c_str(), Json(out).c_str());
  std::string error;
  try {
    SFX_LAUNCH(PartialWarpKernel, dim3(1), dim3(32), 0, nullptr)(Device(std::vector<float>(32, 0.0f)));
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::string quoted;
  for (char ch : error) quoted += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  std::printf(",\"partialWarpError\":\"%s\"}\n", quoted.c_str());
  return 0;
}
