// Block-wide tree reductions through shared memory, for the CUDA kernels. Every thread of a
// block of n threads (n a power of two, n <= blockDim.x) passes a value and gets the reduction
// of all n. Values are combined in pairs s apart for s = n/2, n/4, ..., 1, an order that depends
// on n only, so a result is the same bits on every run (no atomics). `sh` holds n values and is
// free again on return. Included by .cu files only.
#pragma once

namespace sinkflex::cuda_reduce {

/** `T` in a position that does not take part in deduction: the element type comes from `sh`, and
 * the value converts to it (a float summed into a double array is widened first). */
template <typename T>
struct Element {
  using type = T;
};

/** `combine(a, b)` of all n threads' values (a is the lower thread's partial). */
template <typename T, typename Combine>
__device__ T BlockReduce(typename Element<T>::type v, T* sh, int n, Combine combine) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = n / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] = combine(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();
  return r;
}

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Min {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

/** Sum over the block. */
template <typename T>
__device__ T BlockSum(typename Element<T>::type v, T* sh, int n) {
  return BlockReduce<T>(v, sh, n, Add{});
}
/** Largest value over the block (fmaxf: a NaN loses to a number). */
template <typename T>
__device__ T BlockMax(typename Element<T>::type v, T* sh, int n) {
  return BlockReduce<T>(v, sh, n, MaxF{});
}
/** Smallest value over the block. */
template <typename T>
__device__ T BlockMin(typename Element<T>::type v, T* sh, int n) {
  return BlockReduce<T>(v, sh, n, Min{});
}

}  // namespace sinkflex::cuda_reduce
