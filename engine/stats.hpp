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

/// Nearest-rank quantile q in [0, 1] of sorted values; 0 when empty.
inline auto nearest_rank(const std::vector<double>& sorted, double q) -> double {
  return sorted.empty() ? 0.0 : sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

} // namespace troupe
