// The KernelTable of one instruction set, filled from the kernels that simd_vec.inl,
// ops_kernels.inl and gemm_micro.inl just compiled for it (kernels_generic.cc and
// kernels_x86.inl include this after them). MR is the micro-tile height of the packed GEMM
// kernel; the table is a constant expression. Reference and tests: see kernel_table.h.

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
