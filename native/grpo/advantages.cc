// Reference: docs/design.md, "GRPO — semantics" ("Advantages", "Token advantages"); float64
//   reference: test/grpo/fixtures/reference.ts.
// Tests: test/grpo/advantages.test.ts, determinism.test.ts.
// Group-relative advantages (grpo, rloo, grpo_passk) and their broadcast over tokens.
//
// Grouping: a stable LSD radix sort of the response indices by group id puts every group's
// members next to each other in ascending index order, in O(n) for any int32 ids. Group
// statistics are then computed in double in that order, so results do not depend on the
// thread count (groups are independent and may be processed in parallel).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../core/allocator.h"
#include "../core/errors.h"
#include "grpo.h"
#include "grpo_cuda.h"
#include "parallel.h"

namespace sinkflex::grpo {
namespace {

constexpr std::int64_t kGroupGrain = 16384;  // responses per parallel task (rough)

/** Sorts indices 0..n-1 by id, stably: order[] lists each group's members in index order. */
void SortByGroup(const std::int32_t* ids, std::int64_t n, std::uint32_t* order) {
  HostBuffer<std::uint32_t> keys(static_cast<std::size_t>(n), "grpo advantages: sort keys");
  HostBuffer<std::uint32_t> keys2(static_cast<std::size_t>(n), "grpo advantages: sort keys");
  HostBuffer<std::uint32_t> order2(static_cast<std::size_t>(n), "grpo advantages: sort order");
  std::uint32_t* k = keys.data();
  std::uint32_t* o = order;
  std::uint32_t* kt = keys2.data();
  std::uint32_t* ot = order2.data();
  for (std::int64_t i = 0; i < n; ++i) {
    k[i] = static_cast<std::uint32_t>(ids[i]) ^ 0x80000000u;  // signed order as unsigned
    o[i] = static_cast<std::uint32_t>(i);
  }
  for (int shift = 0; shift < 32; shift += 8) {
    std::int64_t count[256] = {0};
    for (std::int64_t i = 0; i < n; ++i) ++count[(k[i] >> shift) & 255u];
    if (count[(k[0] >> shift) & 255u] == n) continue;  // every key shares this digit
    std::int64_t pos[256];
    std::int64_t acc = 0;
    for (int d = 0; d < 256; ++d) {
      pos[d] = acc;
      acc += count[d];
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t p = pos[(k[i] >> shift) & 255u]++;
      kt[p] = k[i];
      ot[p] = o[i];
    }
    std::swap(k, kt);
    std::swap(o, ot);
  }
  if (o != order) std::memcpy(order, o, static_cast<std::size_t>(n) * sizeof(std::uint32_t));
}

struct GroupStats {
  double mean;
  double std;  // unbiased (n - 1); 0 for a group of one
};

GroupStats Stats(const float* rewards, const std::uint32_t* members, std::int64_t g) {
  double sum = 0;
  for (std::int64_t j = 0; j < g; ++j) sum += rewards[members[j]];
  const double mean = sum / static_cast<double>(g);
  if (g < 2) return {mean, 0.0};
  double ss = 0;
  for (std::int64_t j = 0; j < g; ++j) {
    const double d = rewards[members[j]] - mean;
    ss += d * d;
  }
  return {mean, std::sqrt(ss / static_cast<double>(g - 1))};
}

/** num / den where den == 0 only happens with num == 0 (eps == 0 and equal rewards): 0. */
double SafeDiv(double num, double den) { return den == 0 ? 0.0 : num / den; }

void Group(const float* rewards, const std::uint32_t* members, std::int64_t g, const AdvantageOptions& o, float* out) {
  switch (o.estimator) {
    case Estimator::kGrpo: {
      // VERL: a group of one has mean 0 and std 1.
      const GroupStats s = g == 1 ? GroupStats{0.0, 1.0} : Stats(rewards, members, g);
      for (std::int64_t j = 0; j < g; ++j) {
        const double dev = rewards[members[j]] - s.mean;
        out[members[j]] = static_cast<float>(o.normByStd ? SafeDiv(dev, s.std + o.eps) : dev);
      }
      break;
    }
    case Estimator::kRloo: {
      // VERL: a group of one has no leave-one-out baseline and keeps its reward.
      if (g == 1) {
        out[members[0]] = rewards[members[0]];
        break;
      }
      const GroupStats s = Stats(rewards, members, g);
      const double scale = static_cast<double>(g) / static_cast<double>(g - 1);
      for (std::int64_t j = 0; j < g; ++j) out[members[j]] = static_cast<float>((rewards[members[j]] - s.mean) * scale);
      break;
    }
    case Estimator::kGrpoPassK: {
      // The first (lowest index) response holding the maximum gets r_max - r_second; ties give 0.
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < g; ++j) {
        if (rewards[members[j]] > rewards[members[best]]) best = j;
      }
      double second = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < g; ++j) {
        if (j != best && rewards[members[j]] > second) second = rewards[members[j]];
        out[members[j]] = 0.0f;
      }
      const double gap = static_cast<double>(rewards[members[best]]) - second;
      const double adv = o.normByStd ? SafeDiv(gap, Stats(rewards, members, g).std + o.eps) : gap;
      out[members[best]] = static_cast<float>(adv);
      break;
    }
  }
}

}  // namespace

GroupPlan PlanGroups(const std::int32_t* groupIds, std::int64_t n) {
  GroupPlan plan;
  plan.order.resize(static_cast<std::size_t>(n));
  SortByGroup(groupIds, n, plan.order.data());
  const std::uint32_t* ord = plan.order.data();
  for (std::int64_t i = 0; i < n; ++i) {
    if (i == 0 || groupIds[ord[i]] != groupIds[ord[i - 1]]) plan.starts.push_back(i);
  }
  plan.starts.push_back(n);
  for (std::size_t gi = 0; gi + 1 < plan.starts.size(); ++gi) {
    if (plan.starts[gi + 1] - plan.starts[gi] == 1) {
      const std::int64_t idx = ord[plan.starts[gi]];
      if (plan.singleton < 0 || idx < plan.singleton) plan.singleton = idx;
    }
  }
  return plan;
}

[[noreturn]] void ThrowPassKSingleton(const std::int32_t* groupIds, std::int64_t singleton) {
  throw ArgumentError("groupIds: grpo_passk needs at least 2 responses per group, but group " +
                      std::to_string(groupIds[singleton]) + " (response " + std::to_string(singleton) + ") has 1");
}

void ComputeAdvantages(const float* rewards, const std::int32_t* groupIds, std::int64_t n, const AdvantageOptions& opts,
                       float* out) {
  if (n < 1) throw ArgumentError("rewards must not be empty");
  if (n > std::numeric_limits<std::int32_t>::max()) throw ArgumentError("rewards has more than 2^31 - 1 responses");
  if (!(opts.eps >= 0) || !std::isfinite(opts.eps)) throw ArgumentError("eps must be a finite number >= 0");
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(rewards[i])) {
      throw ArgumentError("rewards[" + std::to_string(i) + "] is " + DescribeValue(rewards[i]) +
                          "; rewards must be finite");
    }
  }

  const GroupPlan plan = PlanGroups(groupIds, n);
  const std::uint32_t* ord = plan.order.data();
  const std::vector<std::int64_t>& starts = plan.starts;
  const std::int64_t groups = static_cast<std::int64_t>(starts.size()) - 1;
  if (opts.estimator == Estimator::kGrpoPassK && plan.singleton >= 0) ThrowPassKSingleton(groupIds, plan.singleton);

  // Task boundaries: whole groups of about kGroupGrain responses.
  std::vector<std::int64_t> taskFirstGroup{0};
  for (std::int64_t gi = 1, taskStart = 0; gi < groups; ++gi) {
    if (starts[gi] - taskStart >= kGroupGrain) {
      taskFirstGroup.push_back(gi);
      taskStart = starts[gi];
    }
  }
  taskFirstGroup.push_back(groups);

  const std::int64_t tasks = static_cast<std::int64_t>(taskFirstGroup.size()) - 1;
  ThreadPool::Global().ParallelFor(tasks, [&](std::int64_t t, int) {
    for (std::int64_t gi = taskFirstGroup[t]; gi < taskFirstGroup[t + 1]; ++gi) {
      Group(rewards, ord + starts[gi], starts[gi + 1] - starts[gi], opts, out);
    }
  });
}

void BroadcastAdvantages(const float* adv, const float* responseMask, std::int64_t batch, std::int64_t responseLen,
                         float* out) {
  if (batch < 1) throw ArgumentError("batch must be >= 1");
  if (responseLen < 1) throw ArgumentError("responseLen must be >= 1");
  for (std::int64_t i = 0; i < batch; ++i) {
    if (!std::isfinite(adv[i])) {
      throw ArgumentError("adv[" + std::to_string(i) + "] is " + DescribeValue(adv[i]) + "; advantages must be finite");
    }
  }
  const std::int64_t total = batch * responseLen;
  const std::int64_t grain = 65536;
  const std::int64_t chunks = (total + grain - 1) / grain;
  std::vector<std::int64_t> firstBad(static_cast<std::size_t>(chunks), -1);
  ForChunks(total, grain, [&](std::int64_t c, std::int64_t begin, std::int64_t end) {
    std::int32_t bad = 0;
    // Row by row so the per-row advantage is a loop constant.
    for (std::int64_t s = begin; s < end;) {
      const std::int64_t row = s / responseLen;
      const std::int64_t stop = std::min(end, (row + 1) * responseLen);
      const float a = adv[row];
      for (std::int64_t i = s; i < stop; ++i) {
        const float m = responseMask[i];
        bad |= static_cast<std::int32_t>(m != 0.0f) & static_cast<std::int32_t>(m != 1.0f);
        out[i] = m == 1.0f ? a : 0.0f;
      }
      s = stop;
    }
    if (bad) {
      for (std::int64_t i = begin; i < end; ++i) {
        if (responseMask[i] != 0.0f && responseMask[i] != 1.0f) {
          firstBad[static_cast<std::size_t>(c)] = i;
          break;
        }
      }
    }
  });
  for (std::int64_t i : firstBad) {
    if (i >= 0) {
      throw ArgumentError("responseMask[" + std::to_string(i / responseLen) + ", " + std::to_string(i % responseLen) +
                          "] is " + DescribeValue(responseMask[i]) + "; mask values must be 0 or 1");
    }
  }
}

}  // namespace sinkflex::grpo
