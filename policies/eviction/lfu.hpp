#pragma once
#include "policies/api/eviction.hpp"

namespace troupe::policy {

/// Least frequently hit first, least recently used among equals: keeps a hot
/// shared system prompt through bursts of one-off prompts.
class lfu_eviction final : public eviction_policy {
public:
  auto name() const -> std::string_view override { return "lfu"; }
  auto key(const block_view& b) const -> eviction_key override;
};

} // namespace troupe::policy
