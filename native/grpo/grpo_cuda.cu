// Reference: docs/design.md, "GRPO — semantics"; checked against the CPU kernels and the float64
//   reference test/grpo/fixtures/reference.ts.
// Tests: test/grpo/cuda.test.ts (on a GPU, or on the CUDA emulator without one).
// GRPO kernels on CUDA: the segmented advantage reduction (grpo, rloo, grpo_passk), the token
// broadcast and the fused policy loss (forward, gradient, the four aggregations, metrics).
// Registered with RegisterCudaGrpoBackend at load; compiled only by the CUDA build.
//
// Determinism: every reduction has a fixed shape (block-wide trees in double over a layout
// fixed by the problem size; per-block partials added on the host in block order), so the same
// inputs give the same bits on every run. Runtime flags instead of template variants keep the
// compile time of the five architectures small.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "../core/cuda_check.cuh"
#include "../core/cuda_reduce.cuh"
#include "../core/device_buffer.h"
#include "grpo_cuda.h"

namespace sinkflex::grpo::cuda {
namespace {

using cuda_reduce::BlockMin;
using cuda_reduce::BlockSum;

constexpr int kThreads = 128;                            // advantages: threads per group
constexpr int kLossThreads = 256;                        // policy loss / broadcast: threads per block
constexpr int kPerThread = 8;                            // tokens per thread
constexpr long long kChunk = kLossThreads * kPerThread;  // tokens per block (one row's piece)
constexpr long long kNone = 0x7fffffffffffffffLL;

__device__ __forceinline__ double SafeDiv(double num, double den) { return den == 0 ? 0.0 : num / den; }

// ---- advantages: one block per group --------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    AdvantageKernel(const float* rewards, const std::uint32_t* order, const long long* starts, int estimator,
                    int normByStd, double eps, float* out, long long* bad) {
  __shared__ double shd[kThreads];
  __shared__ long long shl[kThreads];
  __shared__ long long shp[kThreads];
  const long long g = blockIdx.x;
  const std::uint32_t* mem = order + starts[g];
  const long long cnt = starts[g + 1] - starts[g];
  const int tid = threadIdx.x;

  long long firstBad = kNone;
  double sum = 0;
  for (long long j = tid; j < cnt; j += kThreads) {
    const float v = rewards[mem[j]];
    if (!isfinite(v)) {
      if (static_cast<long long>(mem[j]) < firstBad) firstBad = mem[j];
    } else {
      sum += v;
    }
  }
  firstBad = BlockMin(firstBad, shl, kThreads);
  if (tid == 0) bad[g] = firstBad == kNone ? -1 : firstBad;
  if (firstBad != kNone) return;  // uniform over the block

  const double mean = BlockSum(sum, shd, kThreads) / static_cast<double>(cnt);
  double ss = 0;
  for (long long j = tid; j < cnt; j += kThreads) {
    const double d = rewards[mem[j]] - mean;
    ss += d * d;
  }
  ss = BlockSum(ss, shd, kThreads);
  const double sd = cnt < 2 ? 0.0 : sqrt(ss / static_cast<double>(cnt - 1));

  if (estimator == static_cast<int>(Estimator::kGrpo)) {
    // VERL: a group of one has mean 0 and std 1.
    const double m = cnt == 1 ? 0.0 : mean, s = cnt == 1 ? 1.0 : sd;
    for (long long j = tid; j < cnt; j += kThreads) {
      const double dev = rewards[mem[j]] - m;
      out[mem[j]] = static_cast<float>(normByStd ? SafeDiv(dev, s + eps) : dev);
    }
  } else if (estimator == static_cast<int>(Estimator::kRloo)) {
    const double scale = cnt == 1 ? 0.0 : static_cast<double>(cnt) / static_cast<double>(cnt - 1);
    for (long long j = tid; j < cnt; j += kThreads) {
      const float r = rewards[mem[j]];
      out[mem[j]] = cnt == 1 ? r : static_cast<float>((r - mean) * scale);
    }
  } else {
    // grpo_passk: the lowest position holding the maximum (positions follow the index order).
    long long bestPos = kNone;
    float bestVal = 0;
    for (long long j = tid; j < cnt; j += kThreads) {
      const float v = rewards[mem[j]];
      if (bestPos == kNone || v > bestVal) {
        bestVal = v;
        bestPos = j;
      }
    }
    shd[tid] = bestPos == kNone ? -INFINITY : bestVal;
    shp[tid] = bestPos;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (tid < s) {
        const double v2 = shd[tid + s];
        const long long p2 = shp[tid + s];
        if (p2 != kNone && (shp[tid] == kNone || v2 > shd[tid] || (v2 == shd[tid] && p2 < shp[tid]))) {
          shd[tid] = v2;
          shp[tid] = p2;
        }
      }
      __syncthreads();
    }
    const long long best = shp[0];
    const double maxVal = shd[0];
    __syncthreads();
    double second = -INFINITY;
    for (long long j = tid; j < cnt; j += kThreads) {
      const double v = rewards[mem[j]];
      if (j != best && v > second) second = v;
      out[mem[j]] = 0.0f;
    }
    shd[tid] = second;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (tid < s && shd[tid + s] > shd[tid]) shd[tid] = shd[tid + s];
      __syncthreads();
    }
    second = shd[0];
    if (tid == 0) {
      const double gap = maxVal - second;
      out[mem[best]] = static_cast<float>(normByStd ? SafeDiv(gap, sd + eps) : gap);
    }
  }
}

DeviceCheck Advantages(int device, const float* rewards, std::int64_t n, const GroupPlan& plan,
                       const AdvantageOptions& opts, float* out) {
  DeviceGuard guard(device);
  const auto groups = static_cast<std::size_t>(plan.starts.size() - 1);
  DeviceBuffer<std::uint32_t> order(device, static_cast<std::size_t>(n), "grpo advantages (cuda): order");
  order.Upload(plan.order.data());
  std::vector<long long> startsHost(plan.starts.begin(), plan.starts.end());
  DeviceBuffer<long long> starts(device, startsHost.size(), "grpo advantages (cuda): group starts");
  starts.Upload(startsHost.data());
  DeviceBuffer<long long> bad(device, groups, "grpo advantages (cuda): checks");
  CudaStream stream;
  SFX_LAUNCH(AdvantageKernel, dim3(static_cast<unsigned>(groups)), dim3(kThreads), 0, stream)
  (rewards, order.data(), starts.data(), static_cast<int>(opts.estimator), opts.normByStd ? 1 : 0, opts.eps, out,
   bad.data());
  SFX_CUDA_LAUNCH_CHECK("grpo AdvantageKernel");
  stream.Synchronize();
  std::vector<long long> badHost(groups);
  bad.Download(badHost.data());
  DeviceCheck check;
  for (long long b : badHost) {
    if (b >= 0 && (check.bad < 0 || b < check.bad)) check.bad = b;
  }
  return check;
}

// ---- broadcast ------------------------------------------------------------------------------

__global__ void __launch_bounds__(kLossThreads)
    BroadcastKernel(const float* adv, const float* mask, long long len, long long total, float* out, int* bad) {
  __shared__ long long shl[kLossThreads];
  const long long base = static_cast<long long>(blockIdx.x) * kChunk;
  long long flag = 0;
  for (int k = 0; k < kPerThread; ++k) {
    const long long i = base + k * kLossThreads + threadIdx.x;
    if (i >= total) break;
    const float a = adv[i / len];
    const float m = mask[i];
    flag |= (m != 0.0f && m != 1.0f) || !isfinite(a);
    out[i] = m == 1.0f ? a : 0.0f;
  }
  flag = BlockSum(flag, shl, kLossThreads);
  if (threadIdx.x == 0) bad[blockIdx.x] = flag != 0;
}

/** Flags of a launch's blocks, downloaded: the first set one, or -1. */
std::int64_t FirstFlag(const DeviceBuffer<int>& flags) {
  std::vector<int> host(flags.size());
  flags.Download(host.data());
  for (std::size_t b = 0; b < host.size(); ++b) {
    if (host[b]) return static_cast<std::int64_t>(b);
  }
  return -1;
}

DeviceCheck Broadcast(int device, const float* adv, const float* mask, std::int64_t batch, std::int64_t len,
                      float* out) {
  DeviceGuard guard(device);
  const long long total = batch * len;
  const auto blocks = static_cast<std::size_t>(CeilDiv<long long>(total, kChunk));
  DeviceBuffer<int> bad(device, blocks, "grpo broadcast (cuda): checks");
  CudaStream stream;
  SFX_LAUNCH(BroadcastKernel, dim3(static_cast<unsigned>(blocks)), dim3(kLossThreads), 0, stream)
  (adv, mask, static_cast<long long>(len), total, out, bad.data());
  SFX_CUDA_LAUNCH_CHECK("grpo BroadcastKernel");
  stream.Synchronize();
  return DeviceCheck{FirstFlag(bad)};
}

// ---- policy loss: blocks of kChunk tokens of one row -------------------------------------------

struct LossLayout {
  long long batch, len, chunksPerRow, blocks;
  LossLayout(long long b, long long l) : batch(b), len(l), chunksPerRow(CeilDiv<long long>(l, kChunk)) {
    blocks = batch * chunksPerRow;
  }
};

__global__ void __launch_bounds__(kLossThreads)
    MaskCountKernel(const float* mask, long long len, long long chunksPerRow, long long* counts, int* bad) {
  __shared__ long long shl[kLossThreads];
  const long long row = blockIdx.x / chunksPerRow;
  const long long start = (blockIdx.x % chunksPerRow) * kChunk;
  long long count = 0, flag = 0;
  for (int k = 0; k < kPerThread; ++k) {
    const long long t = start + k * kLossThreads + threadIdx.x;
    if (t >= len) break;
    const float m = mask[row * len + t];
    count += m == 1.0f;
    flag |= m != 0.0f && m != 1.0f;
  }
  count = BlockSum(count, shl, kLossThreads);
  flag = BlockSum(flag, shl, kLossThreads);
  if (threadIdx.x == 0) {
    counts[blockIdx.x] = count;
    bad[blockIdx.x] = flag != 0;
  }
}

struct LossArgs {
  const float* logp;
  const float* old;
  const float* adv;
  int advPerToken;
  const float* mask;
  const float* ref;
  const float* ent;
  float* grad;
  const float* rowWeight;  // [batch]: dLoss/dl of an unmasked token of the row
  long long len, chunksPerRow;
  float lo, hi, dual, klCoef;
  int kl;  // KlType
};

/** low_var_kl of e = clamp(ref - logp, ±20): k3 = e^e - e - 1 and em1 = e^e - 1 (in double: no cancellation). */
__device__ __forceinline__ void LowVarKl(float e, float* k3, float* em1) {
  const double x = expm1(static_cast<double>(e));
  *k3 = static_cast<float>(x - static_cast<double>(e));
  *em1 = static_cast<float>(x);
}

__global__ void __launch_bounds__(kLossThreads) LossKernel(LossArgs a, double* sums, long long* clips, int* bad) {
  __shared__ double shd[kLossThreads];
  __shared__ long long shl[kLossThreads];
  const long long row = blockIdx.x / a.chunksPerRow;
  const long long start = (blockIdx.x % a.chunksPerRow) * kChunk;
  const float w = a.rowWeight[row];
  float pg = 0, klSum = 0, entSum = 0, nl = 0;
  long long clip = 0, clipLower = 0, flag = 0;
  for (int k = 0; k < kPerThread; ++k) {
    const long long t = start + k * kLossThreads + threadIdx.x;
    if (t >= a.len) break;
    const long long i = row * a.len + t;
    if (a.mask[i] != 1.0f) {
      a.grad[i] = 0.0f;
      continue;
    }
    const float lp = a.logp[i], ol = a.old[i];
    const float A = a.advPerToken ? a.adv[i] : a.adv[row];
    bool finite = isfinite(lp) && isfinite(ol) && isfinite(A);
    const float x = lp - ol;
    const float xc = fminf(fmaxf(x, -20.0f), 20.0f);
    const bool inRange = xc == x;
    const float rho = expf(xc);
    const float negA = -A;
    const float l1 = negA * rho;
    const float l2 = negA * fminf(fmaxf(rho, a.lo), a.hi);
    const bool clipped = l2 > l1;
    const float lc = clipped ? l2 : l1;
    const float dlc = (clipped || !inRange) ? 0.0f : l1;
    const bool neg = A < 0.0f;
    const float l3 = negA * a.dual;
    const bool lower = neg && lc > l3;
    const bool tie = neg && lc == l3;
    const float l = lower ? l3 : lc;
    float g = lower ? 0.0f : (tie ? 0.5f * dlc : dlc);
    if (a.kl != static_cast<int>(KlType::kNone)) {
      const float ref = a.ref[i];
      finite = finite && isfinite(ref);
      const float d = lp - ref;
      float klv, dkl;
      if (a.kl == static_cast<int>(KlType::kK1)) {
        klv = d;
        dkl = 1.0f;
      } else if (a.kl == static_cast<int>(KlType::kK2)) {
        klv = 0.5f * d * d;
        dkl = d;
      } else if (a.kl == static_cast<int>(KlType::kAbs)) {
        klv = fabsf(d);
        dkl = d > 0.0f ? 1.0f : (d < 0.0f ? -1.0f : 0.0f);
      } else {
        const float e = ref - lp;
        const float ec = fminf(fmaxf(e, -20.0f), 20.0f);
        float k3, em1;
        LowVarKl(ec, &k3, &em1);
        klv = fminf(fmaxf(k3, -10.0f), 10.0f);
        dkl = (ec == e && klv == k3) ? -em1 : 0.0f;
      }
      klSum += klv;
      g += a.klCoef * dkl;
    }
    if (a.ent) {
      const float e = a.ent[i];
      finite = finite && isfinite(e);
      entSum += e;
    }
    flag |= !finite;
    pg += l;
    nl -= xc;
    clip += clipped;
    clipLower += lower;
    a.grad[i] = w * g;
  }
  const double s0 = BlockSum(pg, shd, kLossThreads);
  const double s1 = BlockSum(klSum, shd, kLossThreads);
  const double s2 = BlockSum(entSum, shd, kLossThreads);
  const double s3 = BlockSum(nl, shd, kLossThreads);
  clip = BlockSum(clip, shl, kLossThreads);
  clipLower = BlockSum(clipLower, shl, kLossThreads);
  flag = BlockSum(flag, shl, kLossThreads);
  if (threadIdx.x == 0) {
    double* s = sums + 4 * static_cast<long long>(blockIdx.x);
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    clips[2 * static_cast<long long>(blockIdx.x)] = clip;
    clips[2 * static_cast<long long>(blockIdx.x) + 1] = clipLower;
    bad[blockIdx.x] = flag != 0;
  }
}

PolicyLossResult PolicyLoss(int device, const PolicyLossInputs& in, const PolicyLossOptions& o, float* dLogProbs,
                            bool* ok) {
  ValidatePolicyLoss(in, o);
  DeviceGuard guard(device);
  const LossLayout g(in.batch, in.responseLen);
  const auto blocks = static_cast<std::size_t>(g.blocks);
  PolicyLossResult r;
  *ok = false;

  // Pass A: unmasked tokens per block, and the mask check.
  DeviceBuffer<long long> counts(device, blocks, "grpo policyLoss (cuda): token counts");
  DeviceBuffer<int> bad(device, blocks, "grpo policyLoss (cuda): checks");
  CudaStream stream;
  SFX_LAUNCH(MaskCountKernel, dim3(static_cast<unsigned>(blocks)), dim3(kLossThreads), 0, stream)
  (in.responseMask, g.len, g.chunksPerRow, counts.data(), bad.data());
  SFX_CUDA_LAUNCH_CHECK("grpo MaskCountKernel");
  stream.Synchronize();
  if (FirstFlag(bad) >= 0) return r;
  std::vector<long long> countHost(blocks);
  counts.Download(countHost.data());
  std::vector<std::int64_t> rowCount(static_cast<std::size_t>(in.batch), 0);
  for (std::size_t b = 0; b < blocks; ++b) rowCount[b / static_cast<std::size_t>(g.chunksPerRow)] += countHost[b];
  std::int64_t tokens = 0, sequences = 0;
  for (std::int64_t c : rowCount) {
    tokens += c;
    sequences += c > 0 ? 1 : 0;
  }
  const double denom = AggregationDenominator(o, tokens, sequences, in.responseLen);
  const double G = denom > 0 ? 1.0 / denom : 0.0;
  std::vector<double> weight(static_cast<std::size_t>(in.batch));
  std::vector<float> weightF(weight.size());
  for (std::size_t i = 0; i < weight.size(); ++i) {
    weight[i] = o.aggMode == AggMode::kSeqMeanTokenMean ? G / (static_cast<double>(rowCount[i]) + 1e-8) : G;
    weightF[i] = static_cast<float>(weight[i]);
  }
  DeviceBuffer<float> weightDev(device, weightF.size(), "grpo policyLoss (cuda): row weights");
  weightDev.Upload(weightF.data());

  // Pass B: the fused token kernel.
  LossArgs a{};
  a.logp = in.logProbs;
  a.old = in.oldLogProbs;
  a.adv = in.advantages;
  a.advPerToken = in.advantagesPerToken ? 1 : 0;
  a.mask = in.responseMask;
  a.ref = in.refLogProbs;
  a.ent = in.entropy;
  a.grad = dLogProbs;
  a.rowWeight = weightDev.data();
  a.len = g.len;
  a.chunksPerRow = g.chunksPerRow;
  a.lo = static_cast<float>(1.0 - o.clipLow);
  a.hi = static_cast<float>(1.0 + o.clipHigh);
  a.dual = static_cast<float>(o.dualClipC);
  a.klCoef = static_cast<float>(o.klCoef);
  a.kl = static_cast<int>(o.klType);
  DeviceBuffer<double> sums(device, 4 * blocks, "grpo policyLoss (cuda): sums");
  DeviceBuffer<long long> clips(device, 2 * blocks, "grpo policyLoss (cuda): clip counts");
  SFX_LAUNCH(LossKernel, dim3(static_cast<unsigned>(blocks)), dim3(kLossThreads), 0, stream)
  (a, sums.data(), clips.data(), bad.data());
  SFX_CUDA_LAUNCH_CHECK("grpo LossKernel");
  stream.Synchronize();
  if (FirstFlag(bad) >= 0) return r;
  std::vector<double> sumHost(4 * blocks);
  std::vector<long long> clipHost(2 * blocks);
  sums.Download(sumHost.data());
  clips.Download(clipHost.data());

  double clip = 0, clipLower = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    const double w = weight[b / static_cast<std::size_t>(g.chunksPerRow)];
    r.pgLoss += w * sumHost[4 * b];
    r.klLoss += w * sumHost[4 * b + 1];
    r.entropy += w * sumHost[4 * b + 2];
    r.ppoKl += sumHost[4 * b + 3];
    clip += static_cast<double>(clipHost[2 * b]);
    clipLower += static_cast<double>(clipHost[2 * b + 1]);
  }
  FinishPolicyLoss(r, clip, clipLower, tokens, sequences, o);
  *ok = true;
  return r;
}

const CudaGrpoBackend kBackend = {Advantages, Broadcast, PolicyLoss};

[[maybe_unused]] const bool kRegistered = (RegisterCudaGrpoBackend(&kBackend), true);

}  // namespace
}  // namespace sinkflex::grpo::cuda
