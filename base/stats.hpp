#pragma once
// The statistics the benchmarks and the simulator print.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace troupe {

/// The middle element (the upper one of an even count); v non-empty.
inline auto median(std::vector<double> v) -> double {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Quantile q in [0, 1] of sorted values, interpolated linearly between the
/// two nearest ranks (numpy's default, which vLLM's and SGLang's benchmarks
/// report); 0 when empty. The one definition every troupe figure uses, so
/// that the simulator's percentiles compare with `troupe bench`'s.
inline auto percentile(const std::vector<double>& sorted, double q) -> double {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

} // namespace troupe
