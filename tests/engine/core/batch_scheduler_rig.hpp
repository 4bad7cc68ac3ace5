#pragma once
// The batch scheduler's test rig, shared by core/batch_scheduler and
// core/batch_scheduler_lifecycle: a scheduler with its cache and policies,
// requests, and shadows of the block tables and the KV an executor keeps.

#include "engine/core/batch_scheduler.hpp"
#include "base/rng.hpp"
#include "engine/zero_executor.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/registry.hpp"
#include "policies/scheduling/fcfs.hpp"
#include "policies/scheduling/sjf.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace troupe::testing {

// A scheduler with its cache and policies, as a replica owns them.
struct rig {
  policy::lru_eviction eviction;
  std::unique_ptr<policy::scheduling_policy> policy;
  prefix_cache cache;
  kv_cache_manager kv;
  batch_scheduler s;
  rig(scheduler_limits lim, std::int32_t num_blocks, kv_cache_options kv_opts, std::vector<token_id> eos = {},
      const char* policy_name = "fcfs")
    : policy(policy::make_scheduling_policy(policy_name)),
      cache(num_blocks, eviction),
      kv(cache, kv_opts),
      s(lim, kv, *policy, std::move(eos)) {}
};

inline auto make_request(request_id id, std::int32_t prompt_len, std::int32_t max_tokens, std::uint64_t tenant = 0,
                  token_id first = 5) -> request {
  request r;
  r.id = id;
  r.tenant = tenant;
  for (std::int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(first + (i % 50));
  r.sampling.max_tokens = max_tokens;
  return r;
}

inline auto tokens_of(const scheduler_output& st, std::size_t i) -> std::vector<token_id> {
  const auto t = st.tokens_of(st.scheduled[i]);
  return {t.begin(), t.end()};
}

inline auto submit(batch_scheduler& s, request r) -> bool { return s.submit(std::move(r)).status == 0; }

inline auto sampled(std::initializer_list<std::pair<request_id, token_id>> xs) -> step_result {
  step_result r;
  for (const auto& [id, t] : xs) r.sampled.push_back({id, {t, 0.0f, {}, {}}, {}});
  return r;
}

// The block tables as an executor rebuilds them from the steps' diffs.
struct tables {
  std::map<request_id, std::vector<block_id>> of;
  void apply(const scheduler_output& s) {
    for (const auto id : s.finished) of.erase(id);
    for (const auto& c : s.scheduled) {
      auto& t = of[c.id];
      if (c.reset_blocks) t.clear();
      const auto fresh = s.new_blocks_of(c);
      t.insert(t.end(), fresh.begin(), fresh.end());
    }
  }
};

// What the KV cache would hold, slot by slot: a hash of the tokens up to and
// including that position (a position's KV depends on exactly those). Each
// chunk must find the KV of its own prefix in its table's earlier slots,
// wherever it came from (its own steps, the prefix cache, a swap), and
// writes its own. Follows the swaps as an executor does, before compute.
struct shadow_kv {
  std::int32_t block_size;
  std::map<block_id, std::vector<std::uint64_t>> device, host;
  std::map<request_id, std::vector<token_id>> tokens; ///< prompt ++ output so far
  /// > 0: a chunk reads only the positions its first token attends to, from
  /// num_computed - window + 1 on (the blocks before may be gone).
  std::int32_t window = 0;

  void apply(const scheduler_output& s, tables& t) {
    for (const auto& c : s.swap_out) host[c.to] = device.at(c.from);
    for (const auto& c : s.swap_in) device[c.to] = host.at(c.from);
    for (const auto& c : s.scheduled) {
      const auto& all = tokens.at(c.id);
      const auto& table = t.of.at(c.id);
      const auto chunk = s.tokens_of(c);
      std::uint64_t h = 0;
      bool same = true;
      const std::int32_t first_read = window > 0 ? c.num_computed_tokens - window + 1 : 0;
      for (std::int32_t p = 0; p < c.num_computed_tokens + c.num_tokens; ++p) {
        h = (h ^ static_cast<std::uint64_t>(all.at(static_cast<std::size_t>(p)))) * 0x100000001b3ULL + 1;
        if (p < first_read) continue;
        auto& slots = device[table.at(static_cast<std::size_t>(p / block_size))];
        slots.resize(static_cast<std::size_t>(block_size));
        auto& slot = slots[static_cast<std::size_t>(p % block_size)];
        if (p < c.num_computed_tokens) {
          same = same && slot == h;
        } else {
          same = same && chunk[static_cast<std::size_t>(p - c.num_computed_tokens)] == all[static_cast<std::size_t>(p)];
          slot = h;
        }
      }
      REQUIRE(same);
    }
  }
  void record(const std::vector<request_update>& ups) {
    for (const auto& u : ups)
      if (u.token) {
        tokens[u.id].push_back(u.token->token);
        tokens[u.id].insert(tokens[u.id].end(), u.token->forced.begin(), u.token->forced.end());
      }
  }
};

// Every step must describe a valid batch: chunks within budget and
// max_num_seqs, block tables covering the chunk, no block in two tables.
inline void check_step(const scheduler_output& s, const scheduler_limits& lim, std::int32_t block_size, tables& t) {
  t.apply(s);
  CHECK(s.num_scheduled_tokens() <= lim.max_num_batched_tokens);
  CHECK(static_cast<std::int32_t>(s.scheduled.size()) <= lim.max_num_seqs);
  std::set<request_id> ids;
  for (const auto& c : s.scheduled) {
    CHECK(ids.insert(c.id).second);
    CHECK(c.num_tokens >= 1);
    CHECK(static_cast<std::int64_t>(t.of[c.id].size()) >= blocks_for(c.num_computed_tokens + c.num_tokens, block_size));
  }
}

} // namespace troupe::testing
