#pragma once
// The traffic of a scenario, generated one request at a time in arrival
// order from its seed (or read from a trace), so a million requests need no
// more memory than one.
//
// A trace is a CSV file whose first line names its columns: arrival_s,
// prompt_tokens, output_tokens (required), tenant, priority, prefix_group
// (optional; an empty cell is the default). Arrival times must not
// decrease. Requests of one prefix_group share their first prefix.tokens
// tokens (at most all but one of the prompt's).

#include "engine/sampling/rng.hpp"
#include "engine/types.hpp"
#include "sim/scenario.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::sim {

struct sim_request {
  std::int64_t index = 0; ///< 0, 1, ... in arrival order
  double arrival_s = 0;
  std::int32_t prompt_tokens = 1;
  std::int32_t output_tokens = 1;
  std::int32_t tenant = 0; ///< index into workload::tenant_names()
  std::int32_t priority = 0;
  std::int32_t prefix_group = -1; ///< -1: none
  std::int32_t prefix_tokens = 0; ///< leading prompt tokens shared with the group
  std::int64_t conversation = -1; ///< its conversation ([chat]); -1: a lone request
  std::int32_t turn = 0;          ///< 0, 1, ... within it
  std::int32_t turns = 1;         ///< turns the conversation has
};

/// Draws token counts from a length_dist; deterministic given the rng.
class length_sampler {
public:
  explicit length_sampler(const length_dist& d);
  auto operator()(rng& g) const -> std::int64_t;

private:
  length_dist d_;
  std::vector<double> cdf_; ///< zipf: P(n <= min + i)
};

class workload {
public:
  /// Throws scenario_error for a malformed trace, naming its line.
  explicit workload(const scenario& sc);

  /// The next request in arrival order; nullopt after the last.
  auto next() -> std::optional<sim_request>;
  auto size() const -> std::int64_t { return total_; }
  auto tenant_names() const -> const std::vector<std::string>& { return tenant_names_; }

  /// The prompt's token ids: its group's shared prefix, then its own.
  void prompt_of(const sim_request& r, std::vector<token_id>& out) const;
  /// The next turn of `prev`'s conversation, `prev` having ended at
  /// finish_s: its index is `index`, its prompt prev's prompt and answer
  /// (`history`, replaced by the new prompt) and a new message. Drawn from
  /// the conversation's own stream: the same whatever else happens meanwhile.
  auto follow_up(const sim_request& prev, double finish_s, std::int64_t index, std::vector<token_id>& history) const
      -> sim_request;

private:
  auto draw(std::int64_t index) -> sim_request;
  void read_trace(const std::filesystem::path& file);

  const scenario& sc_;
  rng g_;
  length_sampler prompt_, output_, turns_;
  std::vector<double> tenant_cdf_;
  std::vector<std::string> tenant_names_;
  std::vector<std::int32_t> tenant_priority_;
  std::vector<sim_request> trace_;
  std::int64_t total_ = 0;
  std::int64_t issued_ = 0;
  double t_ = 0;
};

} // namespace troupe::sim
