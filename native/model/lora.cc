// Low-rank adapters: forward, backward and merge (lora.h).
// Reference: docs/models.md, "LoRA"; float64 reference: the LoRA terms of
//   test/model/fixtures/transformer-reference.ts.
// Tests: test/model/lora-transformer.test.ts, test/model/lora-merge.test.ts.
#include "lora.h"

#include <algorithm>
#include <string>

#include "../core/errors.h"
#include "bf16.h"
#include "gemm.h"

namespace sinkflex::model {

void LoraForward(const float* x, const float* a, const float* b, float scale, float* t, float* y, std::int64_t ldy,
                 std::int64_t T, std::int64_t in, std::int64_t out, std::int64_t r) {
  Gemm(false, true, T, r, in, 1.0f, x, in, a, in, 0.0f, t, r);
  Gemm(false, true, T, out, r, scale, t, r, b, r, 1.0f, y, ldy);
}

void LoraBackward(const float* x, const float* a, const float* b, float scale, const float* t, const float* dy,
                  std::int64_t ldy, float* dx, float* dA, float* dB, float* dt, std::int64_t T, std::int64_t in,
                  std::int64_t out, std::int64_t r) {
  if (dB) Gemm(true, false, out, r, T, scale, dy, ldy, t, r, 1.0f, dB, r);
  if (!dA && !dx) return;
  Gemm(false, false, T, r, out, scale, dy, ldy, b, r, 0.0f, dt, r);
  if (dA) Gemm(true, false, r, in, T, 1.0f, dt, r, x, in, 1.0f, dA, in);
  if (dx) Gemm(false, false, T, in, r, 1.0f, dt, r, a, in, 1.0f, dx, in);
}

void LoraMerge(Parameter& w, std::int64_t rowOffset, const Parameter& a, const Parameter& b, double scale) {
  const std::size_t nd = w.spec.shape.size();
  const bool experts = nd == 3;
  if ((nd != 2 && nd != 3) || a.spec.shape.size() != nd || b.spec.shape.size() != nd) {
    throw ArgumentError("LoRA merge needs matrices, or [E, ...] stacks of them for the experts ('" + w.spec.name +
                        "', '" + a.spec.name + "', '" + b.spec.name + "')");
  }
  const std::size_t o = experts ? 1 : 0;  // first matrix dimension
  const std::int64_t E = experts ? w.spec.shape[0] : 1;
  const std::int64_t rows = w.spec.shape[o], in = w.spec.shape[o + 1];
  const std::int64_t r = a.spec.shape[o], out = b.spec.shape[o];
  if (a.spec.shape[o + 1] != in || b.spec.shape[o + 1] != r ||
      (experts && (a.spec.shape[0] != E || b.spec.shape[0] != E))) {
    throw ArgumentError("LoRA merge: '" + a.spec.name + "' [" + std::to_string(r) + ", " +
                        std::to_string(a.spec.shape[o + 1]) + "] and '" + b.spec.name + "' [" + std::to_string(out) +
                        ", " + std::to_string(b.spec.shape[o + 1]) + "] do not fit '" + w.spec.name + "' [" +
                        std::to_string(rows) + ", " + std::to_string(in) + "]" +
                        (experts ? " (per expert, " + std::to_string(E) + " experts)" : std::string()));
  }
  if (rowOffset < 0 || rowOffset + out > rows) {
    throw ArgumentError("LoRA merge: rows [" + std::to_string(rowOffset) + ", " + std::to_string(rowOffset + out) +
                        ") are outside '" + w.spec.name + "' (" + std::to_string(rows) + " rows)");
  }
  if (a.bf16() || b.bf16()) throw ArgumentError("LoRA merge: the adapter matrices must be float32");
  if (w.mxfp4()) {
    throw ArgumentError("LoRA merge: '" + w.spec.name +
                        "' is MXFP4, which cannot take a float update without re-quantizing (load the base with mxfp4: "
                        "'bf16' to merge into it)");
  }
  if (a.value.data() == nullptr || b.value.data() == nullptr ||
      (w.value.data() == nullptr && w.value16.data() == nullptr)) {
    throw ArgumentError("LoRA merge runs on CPU stores only");
  }
  const float s = static_cast<float>(scale);
  // Row blocks of about 4 MiB of float32 products.
  const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(in, 1));
  HostBuffer<float> delta(static_cast<std::size_t>(std::min(block, out) * in), "LoRA merge product");
  for (std::int64_t e = 0; e < E; ++e) {
    const float* ae = a.value.data() + e * r * in;
    const float* be = b.value.data() + e * out * r;
    const std::size_t we = static_cast<std::size_t>(e * rows * in);
    for (std::int64_t i0 = 0; i0 < out; i0 += block) {
      const std::int64_t n = std::min(block, out - i0);
      Gemm(false, false, n, in, r, s, be + i0 * r, r, ae, in, 0.0f, delta.data(), in);
      const std::size_t base = we + static_cast<std::size_t>((rowOffset + i0) * in);
      const std::size_t count = static_cast<std::size_t>(n * in);
      if (w.bf16()) {
        std::uint16_t* dst = w.value16.data() + base;
        for (std::size_t k = 0; k < count; ++k) dst[k] = FloatToBf16(Bf16ToFloat(dst[k]) + delta[k]);
      } else {
        float* dst = w.value.data() + base;
        for (std::size_t k = 0; k < count; ++k) dst[k] += delta[k];
      }
    }
  }
}

}  // namespace sinkflex::model
