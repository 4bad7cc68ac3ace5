// The simulator on its own: scenario files and their errors, traffic
// statistics, determinism, the cost models, and known scheduling effects
// (continuous over static batching, prefix caching, fairness).

#include "sim/cost_model.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "sim/workload.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

using namespace troupe;
using namespace troupe::sim;

namespace {

// A small model on modest hardware: steps of a few milliseconds.
const char* k_base = R"(
[sim]
seed = 7
num_requests = 400
[arrival]
process = "poisson"
rate = 20.0
[lengths]
prompt = { dist = "uniform", min = 20, max = 200 }
output = { dist = "uniform", min = 10, max = 100 }
[[replicas]]
kv_blocks = 2048
max_num_seqs = 32
max_num_batched_tokens = 1024
[model]
layers = 12
hidden = 768
intermediate = 2048
heads = 12
kv_heads = 12
vocab = 32000
[hardware]
memory_bandwidth_gbs = 100
peak_tflops = 10
step_overhead_us = 200
)";

auto one(const std::string& text, std::vector<scenario_override> overrides = {}) -> scenario {
  auto runs = parse_scenario(text, "test.toml", ".", overrides);
  REQUIRE(runs.size() == 1);
  return runs.front();
}

auto error_of(const std::string& text, std::vector<scenario_override> overrides = {}) -> std::string {
  try {
    (void)parse_scenario(text, "test.toml", ".", overrides);
  } catch (const scenario_error& e) {
    return e.what();
  }
  return "";
}

auto summary_json(const run_result& r) -> std::string {
  testing::temp_dir dir;
  write_results(dir.path(), {r}, {summarize(r)});
  std::ifstream in(dir / "summary.json");
  std::stringstream s;
  s << in.rdbuf();
  std::ifstream req(dir.path() / folder_name(r.sc.name) / "requests.csv");
  s << req.rdbuf();
  return s.str();
}

} // namespace

TEST_CASE("a scenario file: defaults, values, variants times sweep values") {
  const auto sc = one(k_base);
  CHECK(sc.name == "base");
  CHECK(sc.seed == 7);
  CHECK(sc.rate == 20.0);
  CHECK(sc.prompt.type == length_dist::kind::uniform);
  CHECK(sc.replicas.at(0).kv_blocks == 2048);
  CHECK(sc.replicas.at(0).policy == "fcfs");
  CHECK(sc.cost.model.layers == 12);

  const auto runs = parse_scenario(std::string(k_base) + R"(
[[variants]]
name = "fcfs"
[[variants]]
name = "sjf"
set = { "replicas.policy" = "sjf" }
[sweep]
key = "arrival.rate"
values = [5, 10.5]
)", "test.toml", ".");
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].name == "fcfs arrival.rate=5");
  CHECK(runs[1].name == "fcfs arrival.rate=10.5");
  CHECK(runs[1].rate == 10.5);
  CHECK(runs[2].name == "sjf arrival.rate=5");
  CHECK(runs[2].replicas[0].policy == "sjf");
  CHECK(runs[0].replicas[0].policy == "fcfs");
  // Overrides from the command line, nested tables in a variant alike.
  CHECK(one(k_base, {{"replicas.max_num_seqs", "8"}, {"arrival.process", "gamma"}}).replicas[0].max_num_seqs == 8);
  CHECK(parse_scenario(std::string(k_base) + "[[variants]]\nname = \"v\"\nset = { replicas = { policy = \"vtc\" } }\n",
                       "t", ".")[0].replicas[0].policy == "vtc");
}

TEST_CASE("a bad scenario names the key and the problem") {
  CHECK(error_of(k_base, {{"arrival.rate", "-1"}}) == "arrival.rate: must be > 0, got -1");
  CHECK(error_of(k_base, {{"arrival.rat", "1"}}) ==
        "arrival.rat: unknown key; known: process, rate, cv, trace, trace_format, time_scale, max_rows, "
        "trace_block_tokens");
  CHECK(error_of("[arival]\nrate = 1\n").starts_with("arival: unknown key; known: sim, arrival"));
  CHECK(error_of(k_base, {{"arrival.process", "\"burst\""}}) ==
        "arrival.process: unknown value \"burst\"; known: poisson, gamma, constant, all_at_once, trace");
  CHECK(error_of(k_base, {{"replicas.policy", "lottery"}}) ==
        "replicas[0].policy: unknown scheduling policy \"lottery\"; known: fcfs, priority, sjf, vtc, static");
  CHECK(error_of(k_base, {{"lengths.output", "{ dist = \"lognormal\", median = 0 }"}}) ==
        "lengths.output.median: must be > 0, got 0");
  CHECK(error_of(k_base, {{"lengths.output", "{ dist = \"uniform\", min = 9, max = 3 }"}}) ==
        "lengths.output: min (9) is over max (3)");
  CHECK(error_of(k_base, {{"model.vocab", "1"}}) == "model.vocab: must be in [2, 2147483647], got 1");
  CHECK(error_of(k_base, {{"replicas.kv_blocks", "\"many\""}}) ==
        "replicas[0].kv_blocks: expected an integer, got string");
  CHECK(error_of(k_base, {{"arrival.process", "trace"}}) ==
        "arrival.trace: missing: the process \"trace\" needs a trace file");
  CHECK(error_of(k_base, {{"cost.kind", "calibrated"}}).starts_with("cost.step_log: missing"));
  CHECK(error_of("[sim\nseed = 1\n").starts_with("test.toml: line 1, column "));
  CHECK(error_of(std::string(k_base) + "[sweep]\nkey = \"arrival.rate\"\nvalues = []\n") ==
        "sweep.values: expected a non-empty array");
  CHECK(error_of(k_base, {{"routing.policy", "random"}}) ==
        "routing.policy: unknown value \"random\"; known: round_robin, least_requests, least_tokens, "
        "consistent_hash, prefix_affinity, weighted");
  CHECK(error_of(k_base, {{"replicas.weight", "0"}}) == "replicas[0].weight: must be > 0, got 0");
}

TEST_CASE("a trace: read in order; a malformed line is named") {
  testing::temp_dir dir;
  const auto trace_scenario = [&](const std::string& text) {
    std::ofstream(dir / "t.csv") << text;
    auto sc = one(k_base, {{"arrival.process", "trace"}, {"arrival.trace", (dir / "t.csv").string()}});
    return sc;
  };
  auto sc = trace_scenario("arrival_s,prompt_tokens,output_tokens,tenant,priority,prefix_group\n"
                           "0.0,10,5,alice,1,\n0.5,20,3,bob,0,2\n0.5,30,4,alice,,2\n");
  workload w(sc);
  CHECK(w.size() == 3);
  const auto a = *w.next();
  const auto b = *w.next();
  const auto c = *w.next();
  CHECK(!w.next());
  CHECK(a.prompt_tokens == 10);
  CHECK(a.priority == 1);
  CHECK(b.arrival_s == 0.5);
  CHECK(w.tenant_names() == std::vector<std::string>{"default", "alice", "bob"});
  CHECK(b.tenant == 2);
  CHECK(c.prefix_group == 2);
  const auto bad = [&](const std::string& text) {
    try {
      (void)workload(trace_scenario(text));
    } catch (const scenario_error& e) {
      const std::string m = e.what();
      return m.substr(m.find(".csv:") + 5);
    }
    return std::string();
  };
  CHECK(bad("arrival_s,prompt_tokens\n1,2\n") ==
        "1: the header names no column output_tokens (columns: arrival_s, prompt_tokens, output_tokens, tenant, "
        "priority, prefix_group)");
  CHECK(bad("arrival_s,prompt_tokens,output_tokens\n0,1,1\n0.1,x,1\n") ==
        "3: prompt_tokens: \"x\" is not an integer in [1, 2^30]");
  CHECK(bad("arrival_s,prompt_tokens,output_tokens\n1,1,1\n0.5,1,1\n") == "3: arrival_s goes back in time (0.5 after 1.000000)");
  CHECK(bad("arrival_s,prompt_tokens,output_tokens\n1,1\n") == "2: 2 cells, the header has 3");
  CHECK(bad("arrival_s,prompt_tokens,output_tokens,colour\n") == "1: unknown column \"colour\"");
  // Columns in any order: a group's prefix length is set once the row is read.
  auto reordered = trace_scenario("prefix_group,output_tokens,prompt_tokens,arrival_s\n1,5,40,0\n1,5,40,0.1\n");
  reordered.prefix_tokens = 16;
  workload w2(reordered);
  CHECK(w2.next()->prefix_tokens == 16);
}

TEST_CASE("traffic: arrival processes and length distributions have their stated statistics") {
  const auto gaps = [](const scenario& sc) {
    workload w(sc);
    std::vector<double> g;
    double prev = 0;
    while (auto r = w.next()) {
      g.push_back(r->arrival_s - prev);
      prev = r->arrival_s;
    }
    double mean = 0, var = 0;
    for (const double x : g) mean += x;
    mean /= static_cast<double>(g.size());
    for (const double x : g) var += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(var / static_cast<double>(g.size())) / mean};
  };
  const auto poisson = gaps(one(k_base, {{"sim.num_requests", "20000"}, {"arrival.rate", "50"}}));
  CHECK(poisson.first == doctest::Approx(0.02).epsilon(0.03));
  CHECK(poisson.second == doctest::Approx(1.0).epsilon(0.05));
  const auto gamma = gaps(one(k_base, {{"sim.num_requests", "20000"}, {"arrival.rate", "50"}, {"arrival.process", "gamma"},
                                       {"arrival.cv", "4"}}));
  CHECK(gamma.first == doctest::Approx(0.02).epsilon(0.1));
  CHECK(gamma.second == doctest::Approx(4.0).epsilon(0.15));
  const auto constant = gaps(one(k_base, {{"arrival.process", "constant"}}));
  CHECK(constant.second < 1e-6);

  const auto lengths = [](const std::string& dist) {
    auto sc = one(k_base, {{"lengths.prompt", dist}, {"sim.num_requests", "20000"}});
    workload w(sc);
    std::vector<double> v;
    while (auto r = w.next()) v.push_back(r->prompt_tokens);
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto logn = lengths("{ dist = \"lognormal\", median = 100, sigma = 0.5, max = 10000 }");
  CHECK(logn[logn.size() / 2] == doctest::Approx(100).epsilon(0.05));
  const auto zipf = lengths("{ dist = \"zipf\", s = 1.2, min = 1, max = 1000 }");
  CHECK(zipf.front() == 1);
  CHECK(zipf.back() <= 1000);
  CHECK(std::count(zipf.begin(), zipf.end(), 1.0) > std::count(zipf.begin(), zipf.end(), 2.0));
  const auto share = lengths("{ dist = \"sharegpt\" }");
  CHECK(share[share.size() / 2] == doctest::Approx(110).epsilon(0.1)); // the table's median prompt
  const auto fixed = lengths("64");
  CHECK(fixed.front() == 64);
  CHECK(fixed.back() == 64);
}

TEST_CASE("prefix groups: requests of a group share their first tokens, others do not") {
  auto sc = one(k_base, {{"prefix.groups", "2"}, {"prefix.tokens", "32"}, {"prefix.fraction", "1"}});
  workload w(sc);
  std::vector<token_id> a, b;
  std::optional<sim_request> first;
  while (auto r = w.next()) {
    if (!first) {
      first = r;
      w.prompt_of(*r, a);
      continue;
    }
    CHECK(r->prefix_tokens == 32);
    w.prompt_of(*r, b);
    const bool same_group = r->prefix_group == first->prefix_group;
    CHECK(std::equal(a.begin(), a.begin() + 32, b.begin()) == same_group);
    CHECK(a[32] != b[32]); // then their own tokens
  }
}

TEST_CASE("the simulator: every request served in full, same seed same bytes") {
  const auto sc = one(k_base);
  const auto r = simulate(sc);
  REQUIRE(r.requests.size() == 400);
  workload w(sc);
  for (const auto& q : r.requests) {
    const auto spec = *w.next();
    CHECK(q.status == 0);
    CHECK(q.output_tokens == spec.output_tokens);
    CHECK(q.first_token_s > q.arrival_s);
    CHECK(q.finish_s >= q.first_token_s);
  }
  const auto s = summarize(r);
  CHECK(s.completed == 400);
  CHECK(s.ttft.p50 > 0);
  CHECK(s.itl.p50 > 0);
  CHECK(r.itl.count() == [&] {
    std::int64_t gaps = 0;
    for (const auto& q : r.requests) gaps += q.output_tokens - 1;
    return gaps;
  }());
  CHECK(summary_json(r) == summary_json(simulate(sc)));
  CHECK(summary_json(r) != summary_json(simulate(one(k_base, {{"sim.seed", "8"}}))));
}

TEST_CASE("the simulator: requests that cannot fit are refused with 400, as the server does") {
  const auto r = simulate(one(k_base, {{"replicas.max_model_len", "150"}}));
  const auto s = summarize(r);
  CHECK(s.refused > 0);
  CHECK(s.completed + s.refused == 400);
  for (const auto& q : r.requests)
    if (q.status != 0) CHECK(q.status == 400);
}

TEST_CASE("known results: continuous batching beats request-level batching") {
  // Everyone at once, outputs from 10 to 300 tokens: a static batch waits for its longest member.
  const std::vector<scenario_override> o = {{"arrival.process", "all_at_once"},
                                            {"lengths.output", "{ dist = \"uniform\", min = 10, max = 300 }"}};
  auto stat = o;
  stat.emplace_back("replicas.policy", "static");
  const auto cont = summarize(simulate(one(k_base, o)));
  const auto batch = summarize(simulate(one(k_base, stat)));
  CHECK(cont.output_throughput > 1.5 * batch.output_throughput);
  CHECK(cont.e2e.p50 < batch.e2e.p50);
}

TEST_CASE("known results: a shared system prompt hits the prefix cache and cuts TTFT") {
  const std::vector<scenario_override> o = {{"prefix.groups", "1"}, {"prefix.tokens", "512"}, {"arrival.rate", "40"}};
  auto off = o;
  off.emplace_back("replicas.enable_prefix_caching", "false");
  const auto on = summarize(simulate(one(k_base, o)));
  const auto none = summarize(simulate(one(k_base, off)));
  CHECK(on.prefix_hit_rate > 0.5);
  CHECK(none.prefix_hit_rate == 0);
  CHECK(on.ttft.p50 < none.ttft.p50);
}

TEST_CASE("known results: vtc keeps a light tenant's TTFT low beside a heavy one") {
  const std::string tenants = std::string(k_base) +
                              "[[tenants]]\nname = \"heavy\"\nshare = 4\n[[tenants]]\nname = \"light\"\nshare = 1\n";
  // Beyond capacity: a queue forms, and the order it is served in decides.
  const std::vector<scenario_override> o = {{"arrival.rate", "400"}, {"sim.num_requests", "1000"}};
  auto vtc = o;
  vtc.emplace_back("replicas.policy", "vtc");
  const auto fcfs_run = summarize(simulate(one(tenants, o)));
  const auto vtc_run = summarize(simulate(one(tenants, vtc)));
  REQUIRE(fcfs_run.tenants.size() == 2);
  CHECK(vtc_run.tenants[1].name == "light");
  CHECK(vtc_run.tenants[1].ttft_p95 < fcfs_run.tenants[1].ttft_p95);
}

TEST_CASE("the roofline cost: a decode step at batch 1 reads the weights once") {
  const auto sc = one(k_base);
  roofline_cost c(sc.cost.model, sc.cost.hardware, 16);
  step_features f;
  add_chunk(f, 100, 1, true);
  // 12 layers of (2·768² + 2·768² + 3·768·2048) weights + the 32000 × 768 head, 2 bytes each, at 100 GB/s.
  const double params = 12.0 * (4.0 * 768 * 768 + 3.0 * 768 * 2048) + 32000.0 * 768;
  const double kv = 2.0 * 12 * 768 * 2 * 101; // the KV read (and the new token's written)
  CHECK(c.step_seconds(f) == doctest::Approx(200e-6 + (params * 2 + kv + 2.0 * 12 * 768 * 2) / 100e9));
  step_features big;
  add_chunk(big, 0, 1024, true); // a long prefill is compute-bound
  CHECK(c.step_seconds(big) > 2 * params * 1024 / 10e12);
}

TEST_CASE("the calibrated cost: a fit recovers the coefficients a step log was made with") {
  testing::temp_dir dir;
  {
    std::ofstream log(dir / "steps.log");
    log << "# troupe step log\n";
    double start = 0;
    for (int i = 0; i < 200; ++i) {
      const int seqs = 1 + i % 16, prefill = (i % 5) * 100;
      step_features f;
      std::string chunks;
      for (int s = 0; s < seqs; ++s) {
        add_chunk(f, 50 + 10 * s, 1, true);
        chunks += " " + std::to_string(s) + "/" + std::to_string(50 + 10 * s) + "/1/1";
      }
      if (prefill > 0) {
        add_chunk(f, 0, prefill, true);
        chunks += " 99/0/" + std::to_string(prefill) + "/1";
      }
      const double t = 0.002 + 20e-6 * f.tokens + 50e-6 * f.seqs + 1e-7 * f.decode_context + 1e-9 * f.prefill_pairs;
      log << "step " << start << " " << t << " 0" << chunks << "\n";
      start += t + 0.0005; // half a millisecond between steps
    }
  }
  const calibrated_cost c(read_step_log(dir / "steps.log"));
  CHECK(c.relative_error() < 0.001);
  step_features f;
  add_chunk(f, 300, 1, true);
  CHECK(c.step_seconds(f) == doctest::Approx(0.0005 + 0.002 + 20e-6 + 50e-6 + 301e-7).epsilon(0.01));
  std::ofstream(dir / "bad.log") << "step 0 0.01 0\nstep 1 0.02 0 3/4\n";
  try {
    (void)read_step_log(dir / "bad.log");
    FAIL("a malformed step log was read");
  } catch (const scenario_error& e) {
    CHECK(std::string(e.what()).ends_with("bad.log:2: chunk \"3/4\" is not <id>/<computed>/<tokens>/<sample 0|1>"));
  }
}

TEST_CASE("conversations: each later turn carries the whole conversation, and the prefix cache finds it") {
  const std::vector<scenario_override> o = {{"chat.turns", "3"}, {"chat.think_s", "2.0"}, {"arrival.rate", "5"},
                                            {"sim.num_requests", "100"}};
  const auto r = simulate(one(k_base, o));
  REQUIRE(r.requests.size() == 300);
  // Turn k + 1 of a conversation: its prompt is turn k's prompt and answer plus a new message.
  const auto& first = r.requests[0];
  std::size_t second = 0;
  for (std::size_t i = 100; i < r.requests.size(); ++i)
    if (r.requests[i].arrival_s > first.finish_s && r.requests[i].prompt_tokens > first.prompt_tokens + first.output_tokens &&
        second == 0)
      second = i;
  CHECK(second != 0);
  for (const auto& q : r.requests) CHECK(q.finish_s > 0);
  const auto with_cache = summarize(r);
  CHECK(with_cache.prefix_hit_rate > 0.5);
  auto off = o;
  off.emplace_back("replicas.enable_prefix_caching", "false");
  const auto without = summarize(simulate(one(k_base, off)));
  CHECK(without.prefix_hit_rate == 0);
  CHECK(with_cache.ttft.mean < without.ttft.mean);
  CHECK(summary_json(r) == summary_json(simulate(one(k_base, o))));
  CHECK(error_of(k_base, {{"chat.turns", "0"}}) == "chat.turns: must be >= 1, got 0");
}

TEST_CASE("replicas: requests reach them round robin, each runs its own core and policies") {
  const auto r = simulate(one(std::string(k_base) + "[[replicas]]\ncount = 2\npolicy = \"sjf\"\nkv_blocks = 512\n"));
  // [[replicas]] in the base text plus this one: 1 + 2 replicas.
  std::vector<int> per(3, 0);
  for (const auto& q : r.requests) ++per.at(static_cast<std::size_t>(q.replica));
  CHECK(per == std::vector<int>{134, 133, 133});
  CHECK(summarize(r).completed == 400);
}

TEST_CASE("the server's [scheduler] limits: a chunk cap keeps decode steps short behind long prompts; "
          "per-request and queue limits refuse as the server does") {
  // Prompts up to 3000 tokens at a light load: a long prompt's prefill fills
  // whole steps, and the decodes batched with it wait for them.
  std::string text = k_base;
  text.replace(text.find("max = 200 }"), 11, "max = 3000 }");
  const std::vector<scenario_override> light = {{"arrival.rate", "6"}};
  const auto plain = summarize(simulate(one(text, light)));
  auto capped_at = light;
  capped_at.emplace_back("replicas.long_prefill_token_threshold", "128");
  capped_at.emplace_back("replicas.max_num_partial_prefills", "1");
  const auto capped = summarize(simulate(one(text, capped_at)));
  CHECK(plain.completed == 400);
  CHECK(capped.completed == 400);
  CHECK(capped.tpot.p99 < 0.7 * plain.tpot.p99); // vLLM's reason for the threshold

  auto short_only = light;
  short_only.emplace_back("replicas.max_input_tokens", "1000");
  const auto r = simulate(one(text, short_only));
  std::int64_t refused = 0;
  for (const auto& q : r.requests) {
    CHECK((q.status == 400) == (q.prompt_tokens > 1000)); // what the server answers 400
    refused += q.status == 400;
  }
  CHECK(refused > 100);
  auto queue = light;
  queue.emplace_back("replicas.max_waiting_tokens", "3000");
  const auto q = summarize(simulate(one(text, queue)));
  CHECK(q.refused > 0); // 429s: the waiting prompts' tokens over the cap
  CHECK(q.refused + q.completed == 400);
}

TEST_CASE("routing: the server's routing policies pick the replicas; affinity finds more of the prompt cached") {
  // Four replicas, multi-turn chats behind 4 shared system prompts, KV for
  // part of what is live.
  const std::string text = std::string(k_base) + R"(
[chat]
turns = 4
think_s = 1.0
[prefix]
groups = 4
tokens = 256
fraction = 1.0
)";
  const std::vector<scenario_override> base = {{"replicas.count", "4"}, {"replicas.kv_blocks", "160"},
                                               {"sim.num_requests", "150"}, {"arrival.rate", "20"}};
  std::map<std::string, run_summary> s;
  const char* env = std::getenv("EXAMPLE_ROUTING_POLICY"); // an out-of-tree policy that reads cached blocks
  REQUIRE(env != nullptr);
  const std::string most_cached = env;
  for (const std::string& name : std::vector<std::string>{"round_robin", "least_tokens", "consistent_hash", "prefix_affinity", "weighted",
                                 most_cached}) {
    auto o = base;
    o.emplace_back("routing.policy", "\"" + name + "\"");
    const auto r = simulate(one(text, o));
    s[name] = summarize(r);
    CHECK(s[name].completed == 600);
    CHECK(s[name].replicas == 4);
    CHECK(summary_json(r) == summary_json(simulate(one(text, o)))); // deterministic
  }
  CHECK(s["prefix_affinity"].cached_prompt_share > s["round_robin"].cached_prompt_share + 0.05);
  CHECK(s["consistent_hash"].cached_prompt_share > s["round_robin"].cached_prompt_share);
  CHECK(s[most_cached].cached_prompt_share > s["round_robin"].cached_prompt_share + 0.05);
  CHECK(s["prefix_affinity"].replica_load_max_over_mean <= 1.5);
  CHECK(s["round_robin"].replica_load_max_over_mean <= 1.5);
  // weighted: a replica of weight 3 beside one of weight 1 gets three requests in four.
  const auto w = simulate(one(std::string(k_base) + "[[replicas]]\nweight = 3\nkv_blocks = 512\n",
                              {{"routing.policy", "weighted"}}));
  std::vector<int> per(2, 0);
  for (const auto& q : w.requests) ++per.at(static_cast<std::size_t>(q.replica));
  CHECK(per == std::vector<int>{100, 300});
}

TEST_CASE("autoscaling: a burst scales the fleet out (once replicas have started), the quiet after scales it in, "
          "draining, and no request is lost") {
  // Quiet (2/s), a burst (60/s) for 20 s, quiet again: a trace.
  testing::temp_dir dir;
  {
    std::ofstream f(dir / "burst.csv");
    f << "arrival_s,prompt_tokens,output_tokens\n";
    double t = 0;
    for (int i = 0; i < 60; ++i) f << (t += 0.5) << ",200,100\n";
    for (int i = 0; i < 1200; ++i) f << (t += 1.0 / 60) << ",200,100\n";
    for (int i = 0; i < 300; ++i) f << (t += 0.5) << ",200,100\n";
  }
  const std::vector<scenario_override> o = {
      {"arrival.process", "trace"}, {"arrival.trace", (dir / "burst.csv").string()}, {"autoscaler.policy", "queue_depth"},
      {"autoscaler.target", "8"}, {"autoscaler.max_replicas", "6"}, {"autoscaler.interval_s", "2"},
      {"autoscaler.cold_start_s", "10"}, {"autoscaler.scale_in_delay_s", "10"}, {"replicas.max_num_seqs", "16"}};
  const auto r = simulate(one(k_base, o));
  const auto s = summarize(r);
  CHECK(s.completed == 1560); // every request served, drains included
  CHECK(s.refused == 0);
  std::int32_t peak = 0;
  double first_up = -1;
  for (const auto& e : r.scale_events) {
    peak = std::max(peak, e.serving);
    if (e.desired > e.serving + e.starting && first_up < 0) first_up = e.t;
  }
  CHECK(peak >= 4);
  CHECK(first_up >= 30.0); // the burst starts at 30 s
  // Started replicas serve only after their cold start.
  bool seen_starting = false;
  for (const auto& e : r.scale_events) seen_starting |= e.starting > 0;
  CHECK(seen_starting);
  // After the burst the fleet comes back down, one replica per delay.
  CHECK(r.scale_events.back().serving < peak);
  CHECK(r.scale_events.back().serving <= 2);
  // The fixed fleet of 6 costs more replica-seconds.
  auto fixed = o;
  fixed.emplace_back("autoscaler.policy", "none");
  fixed.emplace_back("replicas.count", "6");
  const auto f = summarize(simulate(one(k_base, fixed)));
  CHECK(f.replica_seconds > 1.5 * s.replica_seconds);
  CHECK(summary_json(r) == summary_json(simulate(one(k_base, o)))); // deterministic
  CHECK(error_of(k_base, {{"autoscaler.policy", "cpu"}}) ==
        "autoscaler.policy: unknown value \"cpu\"; known: none, queue_depth, ttft_slo, tokens_per_second");
  CHECK(error_of(k_base, {{"autoscaler.min_replicas", "5"}, {"autoscaler.max_replicas", "2"}}) ==
        "autoscaler.min_replicas: (5) is over max_replicas (2)");
}

TEST_CASE("the KV cache's type: a replica's kv_memory holds the blocks the server's rule gives") {
  auto text = std::string(k_base);
  text.replace(text.find("kv_blocks = 2048"), 16, "kv_memory = 268435456");
  // stories110m's shape: 12 layers of 12 KV heads of 64, blocks of 16 tokens.
  const auto blocks = [&](const std::string& dtype) {
    return one(text, {{"model.kv_cache_dtype", "\"" + dtype + "\""}}).replicas.at(0).kv_blocks;
  };
  CHECK(blocks("f32") == 268435456 / (2 * 12 * 12 * 64 * 4 * 16));
  CHECK(blocks("bf16") == 268435456 / (2 * 12 * 12 * 64 * 2 * 16));
  CHECK(blocks("f16") == blocks("bf16"));
  CHECK(blocks("q8_0") == 268435456 / (2 * 12 * 12 * (2 * 34) * 16));
  CHECK(one(text, {{"model.kv_cache_dtype", "\"q8_0\""}}).cost.model.kv_bytes == 34.0 / 32.0);
  CHECK(error_of(text) == "replicas[0].kv_memory: needs model.kv_cache_dtype (the bytes a cached value takes)");
  CHECK(error_of(text, {{"model.kv_cache_dtype", "\"q4\""}}) ==
        "model.kv_cache_dtype: unknown value \"q4\"; known: f32, bf16, f16, q8_0");
  CHECK(error_of(k_base, {{"model.kv_cache_dtype", "\"f16\""}, {"model.kv_bytes", "2"}}) ==
        "model.kv_cache_dtype: and model.kv_bytes both set: give one");
  CHECK(error_of(k_base, {{"replicas.kv_memory", "1000"}}) == "replicas[0].kv_memory: and kv_blocks both set: give one");
  CHECK(error_of(text, {{"model.kv_cache_dtype", "\"f32\""}, {"replicas.kv_memory", "1000"}}) ==
        "replicas[0].kv_memory: 1000 bytes hold 0 KV blocks of 1179648 bytes");
}

TEST_CASE("a full lease pinned by the waiting requests' prefix hits does not stall the queue") {
  // One shared prefix, KV for about one request at a time, a burst: the
  // waiting requests' matches held the whole lease while nothing ran.
  const auto s = summarize(simulate(one(k_base, {{"prefix.groups", "1"},
                                                 {"prefix.tokens", "512"},
                                                 {"replicas.kv_blocks", "64"},
                                                 {"arrival.rate", "400"}})));
  CHECK(s.completed == 400);
  CHECK(s.prefix_hit_rate > 0);
}
