// A non-owning, row-major view of a contiguous array with up to 4 dimensions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "errors.h"

namespace sinkflex {

template <typename T>
struct TensorView {
  T* data = nullptr;
  std::array<std::int64_t, 4> shape{1, 1, 1, 1};
  int ndim = 0;

  TensorView() = default;
  TensorView(T* ptr, std::initializer_list<std::int64_t> dims) : data(ptr) {
    if (dims.size() > 4) throw ArgumentError("TensorView supports at most 4 dimensions");
    for (std::int64_t d : dims) {
      if (d < 0) throw ArgumentError("TensorView dimension must be non-negative");
      shape[ndim++] = d;
    }
  }

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  std::int64_t stride(int dim) const {
    std::int64_t s = 1;
    for (int i = ndim - 1; i > dim; --i) s *= shape[i];
    return s;
  }
  T& operator()(std::int64_t i0) const { return data[i0]; }
  T& operator()(std::int64_t i0, std::int64_t i1) const { return data[i0 * shape[1] + i1]; }
  T& operator()(std::int64_t i0, std::int64_t i1, std::int64_t i2) const {
    return data[(i0 * shape[1] + i1) * shape[2] + i2];
  }
  T& operator()(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return data[((i0 * shape[1] + i1) * shape[2] + i2) * shape[3] + i3];
  }
  std::string describe() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
};

}  // namespace sinkflex
