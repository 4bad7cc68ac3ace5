#pragma once
#include "policies/api/eviction.hpp"

namespace troupe::policy {

/// Blocks of low-priority requests first, least recently used among equals
/// (SGLang's priority-aware radix cache eviction).
class priority_eviction final : public eviction_policy {
public:
  auto name() const -> std::string_view override { return "priority"; }
  auto key(const block_view& b) const -> eviction_key override;
};

} // namespace troupe::policy
