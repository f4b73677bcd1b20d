// The KernelTable of one instruction set, filled from the kernels that simd_vec.inl,
// ops_kernels.inl and gemm_micro.inl just compiled for it (kernels_<isa>.cc include this last,
// inside their target region). MR is the micro-tile height of the packed GEMM kernel; the table
// is a constant expression, so each ISA's table is constant-initialised (no static-init order).
// Reference and tests: see kernel_table.h.

namespace sinkflex::model {
namespace {

template <int MR>
constexpr KernelTable MakeKernelTable(const char* name) {
  return KernelTable{
      name,
      W,
      MR,
      2 * W,
      GemmMicroPacked<MR, 2>,
      GemmMicroDirect<MR, 2>,
      GemmSmallTransBK,
      GemmSmallNoTransK,
      GemmSmallTransBBf16K,
      GemmSmallNoTransBf16K,
      FmaBurnK,
      RmsNormForwardK,
      RmsNormBackwardK,
      RopeK,
      SwiGluForwardK,
      SwiGluBackwardK,
      LogSoftmaxForwardK,
      LogSoftmaxBackwardK,
      AdamWK,
      SumSquaresK,
      AddRowsK,
      AddK,
      WidenBf16K,
  };
}

}  // namespace
}  // namespace sinkflex::model
