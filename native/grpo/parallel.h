// Reference: docs/design.md, "The native addon" (threads and determinism).
// Tests: test/grpo/determinism.test.ts (the same bits with 1 and N threads).
// Fixed work decomposition for the GRPO kernels: chunk boundaries depend only on the problem
// size, never on the thread count, so per-chunk partial results summed in chunk order give
// the same bits with 1 or N threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/thread_pool.h"

namespace sinkflex::grpo {

/** Calls fn(chunk, begin, end) for the chunks [k*grain, min(n, (k+1)*grain)) of [0, n), in parallel. */
template <typename Fn>
void ForChunks(std::int64_t n, std::int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  const std::int64_t chunks = (n + grain - 1) / grain;
  ThreadPool::Global().ParallelFor(chunks, [&](std::int64_t k, int) {
    const std::int64_t begin = k * grain;
    fn(k, begin, std::min(n, begin + grain));
  });
}

/** "NaN", "Infinity" or "-Infinity" for a non-finite value, else the number. */
inline std::string DescribeValue(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return std::to_string(v);
}

}  // namespace sinkflex::grpo
