// troupe bench-scheduler: CPU time of one scheduler step (schedule() and
// update()) with many running and waiting requests, the zero-cost executor
// standing in for the model. Set against the time to merely copy the step's
// output (its token and block-table vectors), measured in the same run.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "base/stats.hpp"
#include "engine/zero_executor.hpp"
#include "policies/registry.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

} // namespace

auto run_bench_scheduler(std::span<char* const> argv) -> int {
  const args a(argv, {"running", "waiting", "steps", "policy", "prompt-tokens"}, {"no-prefix-caching"});
  const auto running = static_cast<std::int32_t>(a.integer("running", 256));
  const auto waiting = static_cast<std::int32_t>(a.integer("waiting", 1000));
  const auto steps = static_cast<int>(a.integer("steps", 2000));
  const auto prompt = static_cast<std::int32_t>(a.integer("prompt-tokens", 128));
  const std::string name = a.str("policy", "fcfs");
  if (running < 1 || waiting < 0 || steps < 10 || prompt < 1) throw usage_error("bad counts");
  std::unique_ptr<policy::scheduling_policy> pol;
  try {
    pol = policy::make_scheduling_policy(name);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  const auto eviction = policy::make_eviction_policy("lru");
  const std::int32_t bs = 16;
  // Room for every running request's prompt and the steps' tokens; the
  // waiting ones stay waiting (max_num_seqs is full), as the target asks.
  const std::int32_t per = (prompt + steps + 2 * bs) / bs;
  prefix_cache cache(running * per + 64, *eviction);
  kv_cache_manager kv(cache, {bs, 0, !a.has("no-prefix-caching")});
  scheduler_limits lim{running, 2048, prompt + steps + 64, running + waiting + 1, 1LL << 40};
  batch_scheduler s(lim, kv, *pol, {});
  zero_executor ex({bs, cache.num_blocks(), 32000, {}, {}});
  request_id next = 1;
  const auto add = [&](std::int32_t n) {
    for (std::int32_t i = 0; i < n; ++i, ++next) {
      request r;
      r.id = next;
      r.tenant = next % 4;
      for (std::int32_t t = 0; t < prompt; ++t) r.prompt.push_back(static_cast<token_id>((next * 131 + t * 7) % 31000 + 3));
      r.sampling.max_tokens = steps + 32;
      if (s.submit(std::move(r)).status != 0) throw std::runtime_error("bench request refused");
    }
  };
  add(running);
  // Prefill everyone, then queue the waiting ones.
  double t = 0;
  while (s.num_running() < running || s.kv().blocks(1).size() * bs < static_cast<std::size_t>(prompt)) {
    auto st = s.schedule(t += 0.001);
    s.update(st, ex.execute(st));
    if (st.scheduled.empty()) break;
  }
  for (int i = 0; i < 4; ++i) {
    auto st = s.schedule(t += 0.001);
    s.update(st, ex.execute(st));
  }
  add(waiting);
  std::vector<double> step_us, copy_us;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = clock_type::now();
    auto st = s.schedule(t += 0.001);
    const auto t1 = clock_type::now();
    auto result = ex.execute(st);
    const auto t2 = clock_type::now();
    s.update(st, result);
    const auto t3 = clock_type::now();
    // The baseline: copying the step's output once.
    const auto c0 = clock_type::now();
    scheduler_output copy = st;
    const auto c1 = clock_type::now();
    if (copy.scheduled.size() != static_cast<std::size_t>(running)) throw std::runtime_error("the batch shrank");
    step_us.push_back(std::chrono::duration<double, std::micro>((t1 - t0) + (t3 - t2)).count());
    copy_us.push_back(std::chrono::duration<double, std::micro>(c1 - c0).count());
  }
  const double m = median(step_us), c = median(copy_us);
  std::printf("scheduler step (%s, prefix caching %s): %d running, %lld waiting, median of %d steps\n", name.c_str(),
              a.has("no-prefix-caching") ? "off" : "on", running, static_cast<long long>(s.num_waiting()), steps);
  std::printf("schedule + update: %.1f us per step; copying the step's output alone: %.1f us (%.1fx)\n", m, c, m / c);
  std::printf("target <= 20 us per step: %s\n", m <= 20 ? "met" : "NOT met");
  return 0;
}

} // namespace troupe::cli
