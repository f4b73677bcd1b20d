// MXFP4 decoding (mxfp4.h): the value table and row decoders.
// Reference: transformers integrations/mxfp4.py; lib/model/hf/mxfp4.ts (mxfp4Value).
// Tests: test/model/mxfp4-gemm.test.ts, test/model/hf/loader-mxfp4.test.ts.
#include "mxfp4.h"

#include <cmath>
#include <limits>

#include "bf16.h"

namespace sinkflex::model {
namespace {

constexpr float kFp4[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct Table {
  float v[256 * 16];
  Table() {
    for (int s = 0; s < 256; ++s) {
      // float32 2^(s - 127): subnormal for s = 0, infinity for s = 255 (as torch.ldexp in float32)
      const float power = s == 255 ? std::numeric_limits<float>::infinity() : std::ldexp(1.0f, s - 127);
      for (int c = 0; c < 16; ++c) {
        const float x = kFp4[c] * power;  // exact (or infinity / NaN)
        const std::uint16_t bits = std::isnan(x) ? std::uint16_t{0x7fc0} : FloatToBf16(x);
        v[s * 16 + c] = Bf16ToFloat(bits);
      }
    }
  }
};

}  // namespace

const float* Mxfp4Table() {
  static const Table table;
  return table.v;
}

void Mxfp4DecodeFloat(Mxfp4Ptr src, std::int64_t n, float* dst) {
  const float* t = Mxfp4Table();
  for (std::int64_t i = 0; i < n; ++i) dst[i] = (src + i).Value(t);
}

void Mxfp4DecodeBf16(Mxfp4Ptr src, std::int64_t n, std::uint16_t* dst) {
  const float* t = Mxfp4Table();
  for (std::int64_t i = 0; i < n; ++i) {
    const float f = (src + i).Value(t);
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    dst[i] = static_cast<std::uint16_t>(u >> 16);
  }
}

}  // namespace sinkflex::model
