#pragma once
// Each request's KV block table as an executor keeps it: built from the
// steps' diffs (scheduled_chunk's new blocks, or a reset), dropped when the
// request finishes. The CPU and CUDA backends both keep them so.

#include "engine/core/scheduler_output.hpp"

#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

class request_tables {
public:
  /// Applies the step's new blocks (a reset replaces the table).
  void apply(const scheduler_output& step);
  /// Drops the tables of the step's finished requests.
  void forget_finished(const scheduler_output& step);
  /// A scheduled request's table (an invariant: apply() has seen it).
  auto table(request_id id) const -> std::span<const block_id>;
  auto size() const -> std::size_t { return tables_.size(); }

private:
  std::unordered_map<request_id, std::vector<block_id>> tables_;
};

} // namespace troupe
