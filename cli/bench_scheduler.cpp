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
#include <memory>
#include <string>
#include <vector>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// The flags, checked.
struct scheduler_bench {
  std::int32_t running = 0;
  std::int32_t waiting = 0;
  int steps = 0;
  std::int32_t prompt = 0;
  std::string name;
};

// Reads and checks the flags; a usage_error for a bad one.
auto parse_scheduler_bench(const args& a) -> scheduler_bench {
  scheduler_bench b;
  b.running = static_cast<std::int32_t>(a.integer("running", 256));
  b.waiting = static_cast<std::int32_t>(a.integer("waiting", 1000));
  b.steps = static_cast<int>(a.integer("steps", 2000));
  b.prompt = static_cast<std::int32_t>(a.integer("prompt-tokens", 128));
  b.name = a.str("policy", "fcfs");
  if (b.running < 1 || b.waiting < 0 || b.steps < 10 || b.prompt < 1) throw usage_error("bad counts");
  return b;
}

// The named scheduling policy; a usage_error for an unknown one.
auto make_policy(const std::string& name) -> std::unique_ptr<policy::scheduling_policy> {
  std::unique_ptr<policy::scheduling_policy> pol;
  try {
    pol = policy::make_scheduling_policy(name);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  return pol;
}

// Submits n requests of b.prompt tokens, ids from `next` on.
void add_requests(batch_scheduler& s, request_id& next, std::int32_t n, const scheduler_bench& b) {
  for (std::int32_t i = 0; i < n; ++i, ++next) {
    request r;
    r.id = next;
    r.tenant = next % 4;
    for (std::int32_t t = 0; t < b.prompt; ++t) r.prompt.push_back(static_cast<token_id>((next * 131 + t * 7) % 31000 + 3));
    r.sampling.max_tokens = b.steps + 32;
    if (s.submit(std::move(r)).status != 0) throw std::runtime_error("bench request refused");
  }
}

// Steps until every running request is prefilled, then a few more.
void prefill_running(batch_scheduler& s, zero_executor& ex, double& t, const scheduler_bench& b, std::int32_t bs) {
  while (s.num_running() < b.running || s.kv().blocks(1).size() * bs < static_cast<std::size_t>(b.prompt)) {
    auto st = s.schedule(t += 0.001);
    s.update(st, ex.execute(st));
    if (st.scheduled.empty()) break;
  }
  for (int i = 0; i < 4; ++i) {
    auto st = s.schedule(t += 0.001);
    s.update(st, ex.execute(st));
  }
}

// Each step's schedule() and update() time, and the time to copy its
// output, in microseconds.
struct step_times {
  std::vector<double> step_us, copy_us;
};

// Times b.steps steps with every request running or waiting.
auto time_steps(batch_scheduler& s, zero_executor& ex, double& t, const scheduler_bench& b) -> step_times {
  step_times out;
  for (int i = 0; i < b.steps; ++i) {
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
    if (copy.scheduled.size() != static_cast<std::size_t>(b.running)) throw std::runtime_error("the batch shrank");
    out.step_us.push_back(std::chrono::duration<double, std::micro>((t1 - t0) + (t3 - t2)).count());
    out.copy_us.push_back(std::chrono::duration<double, std::micro>(c1 - c0).count());
  }
  return out;
}

} // namespace

auto run_bench_scheduler(std::span<char* const> argv) -> int {
  const args a(argv, {"running", "waiting", "steps", "policy", "prompt-tokens"}, {"no-prefix-caching"});
  const auto b = parse_scheduler_bench(a);
  const auto pol = make_policy(b.name);
  const auto eviction = policy::make_eviction_policy("lru");
  const std::int32_t bs = 16;
  // Room for every running request's prompt and the steps' tokens; the
  // waiting ones stay waiting (max_num_seqs is full), as the target asks.
  const std::int32_t per = (b.prompt + b.steps + 2 * bs) / bs;
  prefix_cache cache(b.running * per + 64, *eviction);
  kv_cache_manager kv(cache, {bs, 0, !a.has("no-prefix-caching")});
  scheduler_limits lim{b.running, 2048, b.prompt + b.steps + 64, b.running + b.waiting + 1, 1LL << 40};
  batch_scheduler s(lim, kv, *pol, {});
  zero_executor ex({bs, cache.num_blocks(), 32000, {}, {}});
  request_id next = 1;
  add_requests(s, next, b.running, b);
  // Prefill everyone, then queue the waiting ones.
  double t = 0;
  prefill_running(s, ex, t, b, bs);
  add_requests(s, next, b.waiting, b);
  const auto times = time_steps(s, ex, t, b);
  const double m = median(times.step_us), c = median(times.copy_us);
  std::printf("scheduler step (%s, prefix caching %s): %d running, %lld waiting, median of %d steps\n", b.name.c_str(),
              a.has("no-prefix-caching") ? "off" : "on", b.running, static_cast<long long>(s.num_waiting()), b.steps);
  std::printf("schedule + update: %.1f us per step; copying the step's output alone: %.1f us (%.1fx)\n", m, c, m / c);
  std::printf("target <= 20 us per step: %s\n", m <= 20 ? "met" : "NOT met");
  return 0;
}

} // namespace troupe::cli
