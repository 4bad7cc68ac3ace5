#pragma once
// Token runs for the KV-cache tests: first, first + 1, ...

#include "base/types.hpp"

#include <cstdint>
#include <numeric>
#include <vector>

namespace troupe::testing {

inline auto tokens(std::int32_t n, token_id first = 100) -> std::vector<token_id> {
  std::vector<token_id> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

} // namespace troupe::testing
