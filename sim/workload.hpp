#pragma once
// The traffic of a scenario, generated one request at a time in arrival
// order from its seed (or read from a trace), so a million requests need no
// more memory than one.
//
// A trace is read by sim/trace (troupe's CSV, Azure, BurstGPT, Mooncake).
// Requests of one prefix_group share their first prefix.tokens tokens (at
// most all but one of the prompt's); a Mooncake trace's requests share the
// blocks whose hash ids they share.

#include "base/rng.hpp"
#include "base/types.hpp"
#include "sim/scenario.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::sim {

/// The simulator's one token function: an id in [1, vocab) from a seed and
/// two coordinates (a stream: a prefix group, a request's own prompt, a
/// request's output; and a position), by splitmix64, scaled by a multiply
/// (a 64-bit division per token was a twentieth of a simulated request).
inline auto token_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t position, std::int64_t vocab) -> token_id {
  std::uint64_t z = seed ^ (stream * 0x9e3779b97f4a7c15ull) ^ (position * 0xc2b2ae3d27d4eb4full);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<token_id>(1 + (((z >> 32) * static_cast<std::uint64_t>(vocab - 1)) >> 32)); // vocab < 2^32
}
/// Streams of token_at: a request's own prompt tokens, a later turn's new
/// message, a request's sampled output (prefix group g is stream 1 + g).
inline constexpr std::uint64_t prompt_stream = std::uint64_t{1} << 40, message_stream = std::uint64_t{1} << 41,
                               output_stream = std::uint64_t{1} << 42, hash_stream = std::uint64_t{1} << 43;

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
  /// A trace's format, and its failed requests left out.
  auto trace_format() const -> const std::string& { return trace_format_; }
  auto trace_skipped() const -> std::int64_t { return trace_skipped_; }

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

  const scenario& sc_;
  rng g_;
  length_sampler prompt_, output_, turns_;
  std::vector<double> tenant_cdf_;
  std::vector<std::string> tenant_names_;
  std::vector<std::int32_t> tenant_priority_;
  std::vector<sim_request> trace_;
  std::vector<std::vector<std::uint64_t>> trace_blocks_; ///< Mooncake: each request's hash ids
  std::string trace_format_;
  std::int64_t trace_skipped_ = 0;
  std::int64_t total_ = 0;
  std::int64_t issued_ = 0;
  double t_ = 0;
};

} // namespace troupe::sim
