// The zero executor returns only ids a tokenizer can spell.

#include "engine/zero_executor.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

using namespace troupe;

namespace {

/// The tokens `ex` returns for 64 requests at 32 positions each.
auto returned(zero_executor& ex) -> std::set<token_id> {
  std::set<token_id> out;
  const std::vector<token_id> one{5};
  for (request_id id = 1; id <= 64; ++id)
    for (std::int32_t position = 0; position < 32; ++position) {
      scheduler_output step;
      step.add_chunk(id, one, position).sample = true;
      for (const auto& s : ex.execute(step).sampled) out.insert(s.result.token);
    }
  return out;
}

} // namespace

TEST_CASE("zero executor: ids below num_sampled_ids, avoiding the listed ones") {
  zero_executor_options o;
  o.vocab_size = 1000;
  o.avoid = {2, 7};
  {
    zero_executor whole(o);
    CHECK(*returned(whole).rbegin() >= 100); // the whole vocabulary, without a limit
  }
  o.num_sampled_ids = 100;
  zero_executor ex(o);
  const auto ids = returned(ex);
  CHECK(ids.size() > 50);
  CHECK(*ids.begin() >= 0);
  CHECK(*ids.rbegin() < 100);
  CHECK_FALSE(ids.contains(2));
  CHECK_FALSE(ids.contains(7));
  CHECK(ex.vocab_size() == 1000); // still the model's: prompts may hold any of its ids
}
