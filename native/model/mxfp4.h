// Reference: transformers integrations/mxfp4.py (convert_moe_packed_tensors), mirrored by
//   lib/model/hf/mxfp4.ts (decodeMxfp4Rows), which the tests compare against.
// Tests: test/model/mxfp4-gemm.test.ts (GEMM over packed = GEMM over the dequantized bfloat16, bit for
//   bit, every ISA path), test/model/hf/loader-mxfp4.test.ts (packed model = dequantized model).
// MXFP4 weights kept packed: a row-major matrix (or stack of matrices) of `cols` columns, cols a
// multiple of 32, stored as 4-bit E2M1 codes two to a byte (the LOW nibble is the even element)
// and one E8M0 scale byte per 32 consecutive elements of a row. Because every row is a whole
// number of blocks, the flattened element index i of the logical tensor is at byte i / 2 of the
// blocks and uses scale byte i / 32 — a packed tensor is addressed like a plain array.
// An element decodes to bf16(FP4[code] * float32(2^(scale - 127))) (transformers' ldexp then its
// bfloat16 cast): every finite result is exact in bfloat16; scale 255 gives 2^128 = infinity
// (0 * infinity is NaN, written as the canonical quiet NaN 0x7fc0).
#pragma once

#include <cstdint>
#include <cstring>

namespace sinkflex::model {

/** Elements sharing one scale byte. */
constexpr std::int64_t kMxfp4Block = 32;

/** The 256 x 16 decode table: entry (scale << 4 | code) is the element's float32 value (a bfloat16 value). */
const float* Mxfp4Table();

/** The bfloat16 bits of an element with 4-bit `code` and scale byte `scale`. */
inline std::uint16_t Mxfp4Bf16(std::uint8_t scale, unsigned code) {
  const float f = Mxfp4Table()[(static_cast<unsigned>(scale) << 4) | (code & 15u)];
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<std::uint16_t>(u >> 16);
}

/**
 * A read-only MXFP4 tensor addressed like a pointer to its logical elements: `p + i` moves i
 * elements; Value() decodes the element it points at. The tensor's rows must be whole blocks.
 */
struct Mxfp4Ptr {
  const std::uint8_t* blocks = nullptr;  // numel / 2 bytes
  const std::uint8_t* scales = nullptr;  // numel / 32 bytes
  std::int64_t offset = 0;               // element index

  Mxfp4Ptr operator+(std::int64_t n) const { return Mxfp4Ptr{blocks, scales, offset + n}; }
  /** The float32 value (exactly a bfloat16 value) of the element pointed at. */
  float Value(const float* table) const {
    const std::uint8_t byte = blocks[offset >> 1];
    const unsigned code = (offset & 1) ? (byte >> 4) : (byte & 15u);
    return table[(static_cast<unsigned>(scales[offset >> 5]) << 4) | code];
  }
};

/** Writes n decoded elements starting at `src` as float32 (n and src.offset even or not). */
void Mxfp4DecodeFloat(Mxfp4Ptr src, std::int64_t n, float* dst);
/** Writes n decoded elements starting at `src` as bfloat16 bits. */
void Mxfp4DecodeBf16(Mxfp4Ptr src, std::int64_t n, std::uint16_t* dst);

}  // namespace sinkflex::model
