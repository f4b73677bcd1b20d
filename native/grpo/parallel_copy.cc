// Reference: none: a plain copy, the bandwidth baseline of bench/grpo.ts.
// Tests: test/grpo/bench.test.ts.
// The memory-bandwidth baseline of the GRPO benchmark: a plain copy split over the kernel
// thread pool the same way the kernels split their work.
#include <cstring>

#include "grpo.h"
#include "parallel.h"

namespace sinkflex::grpo {

void ParallelCopy(float* dst, const float* src, std::int64_t count) {
  ForChunks(count, std::int64_t{1} << 16, [&](std::int64_t, std::int64_t begin, std::int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<std::size_t>(end - begin) * sizeof(float));
  });
}

}  // namespace sinkflex::grpo
