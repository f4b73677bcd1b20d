// Error types raised by native kernels. The N-API layer turns them into JavaScript errors in one
// place (ToJsError, native/addon/napi_util.cc): ArgumentError -> RangeError, OutOfMemoryError ->
// the package's OutOfMemoryError (code ERR_SINKFLEX_OOM), DeviceError -> the package's
// DeviceError (code ERR_SINKFLEX_DEVICE), anything else -> Error. Kernels never abort the process.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace sinkflex {

/** An argument that passed type checks but has an invalid value (shape, range). */
class ArgumentError : public std::invalid_argument {
 public:
  explicit ArgumentError(const std::string& msg) : std::invalid_argument(msg) {}
};

/** An allocation that would exceed the tracked limit of a device (or that the system refused). */
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(const std::string& device, std::size_t requested, std::size_t current, std::size_t limit,
                   const std::string& what);
  const std::string& device() const { return device_; }
  std::size_t requested() const { return requested_; }
  std::size_t current() const { return current_; }
  /** The limit in bytes; 0 means the system itself refused the allocation. */
  std::size_t limit() const { return limit_; }

 private:
  std::string device_;
  std::size_t requested_, current_, limit_;
};

/**
 * A device that fails or cannot serve a call: a failure reported by the CUDA runtime (the
 * message includes the call and the error string), a device or kernels this build or machine
 * lacks.
 */
class DeviceError : public std::runtime_error {
 public:
  explicit DeviceError(const std::string& msg) : std::runtime_error(msg) {}
};

/** Human-readable byte count, e.g. "1.50 GiB (1610612736 bytes)". */
std::string FormatBytes(std::size_t bytes);

}  // namespace sinkflex
