// Reference: docs/design.md, "The built-in model — semantics" (initialisation, sampling).
// Tests: test/model/adamw-param-store.test.ts (seeded initialisation, RNG state),
//   transformer-inference.test.ts (seeded sampling).
// Seeded pseudo-random numbers for parameter initialisation (and anything else that must be
// reproducible): xoshiro256** seeded through SplitMix64. The state is four 64-bit words,
// saved in checkpoints.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace sinkflex::model {

class Rng {
 public:
  using State = std::array<std::uint64_t, 4>;

  explicit Rng(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& w : s_) w = SplitMix64(x);
  }

  /** One SplitMix64 step: advances x and returns a well-mixed 64-bit value. */
  static std::uint64_t SplitMix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  /** A seed derived from (seed, a, b), for independent per-parameter / per-chunk streams. */
  static std::uint64_t Derive(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
    std::uint64_t x = seed;
    std::uint64_t h = SplitMix64(x) ^ (a * 0xD6E8FEB86659FD93ULL);
    h = SplitMix64(h) ^ (b * 0xA0761D6478BD642FULL);
    return SplitMix64(h);
  }

  std::uint64_t Next() {
    const std::uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  /** A pair of independent standard normals (Box-Muller). */
  void NormalPair(double* a, double* b) {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double t = 6.283185307179586476925 * u2;
    *a = r * std::cos(t);
    *b = r * std::sin(t);
  }

  const State& state() const { return s_; }
  /** Restores a saved state (an all-zero state is invalid for xoshiro and is rejected by callers). */
  void set_state(const State& s) { s_ = s; }

 private:
  static std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

}  // namespace sinkflex::model
