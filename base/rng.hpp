#pragma once
// A small, fast, seedable generator (xoshiro256**, Blackman & Vigna) whose
// output is the same on every platform and standard library.

#include <cmath>
#include <cstdint>

namespace troupe {

/// splitmix64's increment, and its finalizer: a 64-bit mix in which every
/// input bit changes half the output bits.
constexpr std::uint64_t splitmix64_gamma = 0x9e3779b97f4a7c15ull;
constexpr auto splitmix64_mix(std::uint64_t z) -> std::uint64_t {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class rng {
public:
  explicit rng(std::uint64_t seed) {
    // splitmix64 expands the seed into the state, as the authors recommend
    for (auto& s : s_) {
      seed += splitmix64_gamma;
      s = splitmix64_mix(seed);
    }
  }

  auto next() -> std::uint64_t {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  auto uniform() -> double { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Exponential with mean 1 (by inversion): Poisson gaps, think times.
  auto exponential() -> double { return -std::log(1.0 - uniform()); }

  /// Standard normal (Box-Muller); for weight initialisation and tests.
  auto normal() -> double;

  /// Gamma(shape k > 0, scale 1), Marsaglia–Tsang (with Stuart's boost for
  /// k < 1): mean k, coefficient of variation 1/√k. Scaled by 1/(rate·k),
  /// gaps between arrivals with mean 1/rate (k = 1: Poisson; k < 1: burstier).
  auto gamma(double k) -> double;

private:
  static auto rotl(std::uint64_t x, int k) -> std::uint64_t { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

inline auto rng::normal() -> double {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  constexpr double two_pi = 6.283185307179586;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
}

inline auto rng::gamma(double k) -> double {
  const double d = (k < 1 ? k + 1 : k) - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  double x = 0;
  for (;;) {
    const double z = normal(), v = std::pow(1 + c * z, 3);
    if (v <= 0) continue;
    if (std::log(uniform() + 1e-300) < 0.5 * z * z + d - d * v + d * std::log(v)) {
      x = d * v;
      break;
    }
  }
  if (k < 1) x *= std::pow(uniform() + 1e-300, 1.0 / k);
  return x;
}

} // namespace troupe
