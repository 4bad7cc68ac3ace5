#pragma once
#include "policies/api/eviction.hpp"

namespace troupe::policy {

/// Least recently used first (vLLM's and SGLang's default).
class lru_eviction final : public eviction_policy {
public:
  auto name() const -> std::string_view override { return "lru"; }
  auto key(const block_view& b) const -> eviction_key override;
};

} // namespace troupe::policy
