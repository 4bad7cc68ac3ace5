#include "engine/request_tables.hpp"

#include "base/check.hpp"

namespace troupe {

void request_tables::apply(const scheduler_output& step) {
  for (const auto& c : step.scheduled) {
    auto& t = tables_[c.id];
    const auto fresh = step.new_blocks_of(c);
    if (c.reset_blocks) t.assign(fresh.begin(), fresh.end());
    else t.insert(t.end(), fresh.begin(), fresh.end());
  }
}

void request_tables::forget_finished(const scheduler_output& step) {
  for (const auto id : step.finished) tables_.erase(id);
}

auto request_tables::table(request_id id) const -> std::span<const block_id> {
  const auto it = tables_.find(id);
  TROUPE_CHECK(it != tables_.end(), "a chunk of a request with no block table");
  return it->second;
}

} // namespace troupe
