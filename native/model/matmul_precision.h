// Tests: test/model/cuda-gemm-tc.test.ts (the setting, its argument checks and the CUDA GEMMs it
//   selects).
// The process-wide precision of the CUDA GEMMs (like PyTorch's torch.set_float32_matmul_precision):
// 'highest' (the default) multiplies float32 operands (bfloat16 ones widened exactly) with
// float32 arithmetic, the same results as the CPU kernels; 'medium' runs every CUDA GEMM
// (linear layers forward and backward, LoRA, the MoE experts and router) on the bfloat16 tensor
// cores: operands rounded to bfloat16, products summed in float32 (cuda_gemm_tc.cuh) — or, with
// the operand type float16 (like PyTorch's autocast to float16), rounded to float16: three more
// significand bits, a range that ends at 65504. The CPU kernels are float32 either way. docs/cuda.md, "Numerics of the
// GEMMs", says why.
#pragma once

#include <string>

namespace sinkflex::model {

/** The CUDA GEMMs' operand precision. */
enum class MatmulPrecision { kHighest = 0, kMedium = 1 };

/** The tensor cores' operand type under kMedium. */
enum class MatmulOperand { kBf16 = 0, kF16 = 1 };

/** The current setting (kHighest until set). */
MatmulPrecision GetMatmulPrecision();
/** The operand type of the current setting (kBf16 unless set to kMedium with kF16). */
MatmulOperand GetMatmulOperand();
/** Sets both for the whole process (GEMMs launched after the call); kHighest keeps kBf16. */
void SetMatmulPrecision(MatmulPrecision p, MatmulOperand operand = MatmulOperand::kBf16);
/** 'highest' or 'medium'. */
const char* MatmulPrecisionName(MatmulPrecision p);
/** 'bfloat16' or 'float16'. */
const char* MatmulOperandName(MatmulOperand t);
/**
 * Says once per process, on stderr, why a GEMM asked for 'medium' runs the float32 kernel instead
 * (e.g. a GPU without bfloat16 tensor cores); later calls only count.
 */
void NoteMatmulFallback(const std::string& reason);
/** The setting named `name` ('highest' or 'medium'); false when `name` is neither. */
bool ParseMatmulPrecision(const std::string& name, MatmulPrecision* out);
/** The operand type named `name` ('bfloat16' or 'float16'); false when `name` is neither. */
bool ParseMatmulOperand(const std::string& name, MatmulOperand* out);

}  // namespace sinkflex::model
