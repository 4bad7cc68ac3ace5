// troupe bench-engine: decode and prefill speed of the CPU backend, set
// against this machine's memory read bandwidth measured in the same run.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/core/expert_load.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cpu/gemm.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "engine/cpu/linear.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "base/stats.hpp"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// Sustained read bandwidth: a 1 GiB buffer in 2 MiB pages (as the weights
// are, see place_in_huge_pages) summed with four vector accumulators per
// thread (read_sum_f32), one pass.
auto read_bandwidth_gbs() -> double {
  constexpr std::size_t bytes = std::size_t{1} << 30;
  static const auto mapping = map_huge_pages(bytes);
  static float* const buf = [] {
    auto* p = reinterpret_cast<float*>(mapping.get());
    std::fill(p, p + bytes / sizeof(float), 1.0f);
    return p;
  }();
  const auto t0 = clock_type::now();
  const float s = read_sum_f32(buf, static_cast<std::int64_t>(bytes / sizeof(float)));
  const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (s < 0) std::puts(""); // keeps the sum alive
  return static_cast<double>(bytes) / sec / 1e9;
}

// The weight bytes a decode step of `tokens` tokens reads: every matrix,
// but of a mixture of experts' experts only those its tokens route to, each
// once (expected_distinct_experts, uniform routing: num_experts_per_tok for
// one token).
auto weight_bytes(const model_weights& w, int tokens) -> double {
  const auto bytes = [](const weight_tensor& t) { return static_cast<double>(t.num_bytes()); };
  double b = bytes(w.lm_head);
  const double experts = expected_distinct_experts(w.config.num_experts, w.config.num_experts_per_tok, tokens);
  for (const auto& l : w.layers) {
    b += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down);
    if (!l.experts.empty())
      b += bytes(l.experts.router) +
           experts * (bytes(l.experts.gate[0]) + bytes(l.experts.up[0]) + bytes(l.experts.down[0]));
  }
  return b;
}

// A mixture of experts: what each batch size's step reads, and so the most
// it could run at over batch 1 were both bound by the same bandwidth.
void print_expert_reads(const model_weights& w, const std::vector<int>& batches) {
  const auto& c = w.config;
  if (c.num_experts == 0) return;
  const double one = weight_bytes(w, 1);
  for (int b : batches) {
    if (b == 1) continue;
    const double bytes = weight_bytes(w, b);
    std::printf("batch %d reads about %.0f of %lld experts a layer (uniform routing): %.0f MB a step where batch 1 "
                "reads %.0f, so at one bandwidth it runs at most %.1fx batch 1\n",
                b, expected_distinct_experts(c.num_experts, c.num_experts_per_tok, b),
                static_cast<long long>(c.num_experts), bytes / 1e6, one / 1e6, b * one / bytes);
  }
}

struct bench_setup {
  int prompt_tokens;
  int decode_steps;
  int runs;
};

// `batch` sequences that each hold a prefilled prompt, ready to decode.
struct decode_group {
  int batch;
  scheduler_output step;
  std::vector<token_id> first; ///< the token sampled after each prompt
};

auto prepare_group(cpu_executor& ex, int batch, request_id first_id, block_id first_block,
                   const bench_setup& s) -> decode_group {
  const std::int32_t per_seq = (s.prompt_tokens + s.decode_steps + ex.block_size()) / ex.block_size();
  decode_group g{batch, {}, {}};
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 1 << 20;
  for (int b = 0; b < batch; ++b) {
    std::vector<token_id> prompt;
    for (int i = 0; i < s.prompt_tokens; ++i)
      prompt.push_back(static_cast<token_id>((7 * i + b) % (ex.vocab_size() - 3) + 3));
    const request_id id = first_id + static_cast<request_id>(b);
    std::vector<block_id> table(static_cast<std::size_t>(per_seq));
    std::iota(table.begin(), table.end(), first_block + b * per_seq);
    auto& c = g.step.add_chunk(id, prompt, 0, table, true); // the same whole table every step
    c.sample = true;
    g.step.new_requests.push_back({id, prompt, greedy});
  }
  for (const auto& t : ex.execute(g.step).sampled) g.first.push_back(t.result.token);
  g.step.new_requests.clear();
  // From now on, one decode token per sequence.
  g.step.token_ids.assign(static_cast<std::size_t>(batch), 0);
  for (int b = 0; b < batch; ++b) {
    g.step.scheduled[static_cast<std::size_t>(b)].first_token = b;
    g.step.scheduled[static_cast<std::size_t>(b)].num_tokens = 1;
  }
  return g;
}

// Decode tokens/s of one timed run: decode_steps steps from the prompt's end
// (the cache slots of earlier runs are simply overwritten).
auto time_decode(cpu_executor& ex, decode_group& g, const bench_setup& s) -> double {
  for (std::size_t b = 0; b < g.step.scheduled.size(); ++b) {
    g.step.token_ids[b] = g.first[b];
    g.step.scheduled[b].num_computed_tokens = s.prompt_tokens;
  }
  const auto t0 = clock_type::now();
  for (int i = 0; i < s.decode_steps; ++i) {
    const auto out = ex.execute(g.step);
    for (std::size_t b = 0; b < g.step.scheduled.size(); ++b) {
      g.step.token_ids[b] = out.sampled[b].result.token;
      ++g.step.scheduled[b].num_computed_tokens;
    }
  }
  const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
  return g.batch * s.decode_steps / sec;
}

auto prefill_rate(cpu_executor& ex, int tokens, int runs) -> double {
  scheduler_output step;
  std::vector<token_id> ids;
  for (int i = 0; i < tokens; ++i) ids.push_back(static_cast<token_id>(i % (ex.vocab_size() - 3) + 3));
  std::vector<block_id> table(static_cast<std::size_t>((tokens + ex.block_size() - 1) / ex.block_size()));
  std::iota(table.begin(), table.end(), 0);
  auto& c = step.add_chunk(999'999, ids, 0, table, true);
  c.sample = false;
  std::vector<double> rates;
  for (int r = 0; r <= runs; ++r) {
    const auto t0 = clock_type::now();
    ex.execute(step);
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (r > 0) rates.push_back(tokens / sec);
  }
  return median(rates);
}

// GFLOP/s of troupe's gemm and of OpenBLAS (cblas_sgemv / cblas_sgemm) on
// one weight matrix of the model, interleaved, medians of `runs`: why the
// backend has kernels of its own (OpenBLAS 0.3.21 runs its Haswell kernels
// on CPUs it does not know, and its threads contend with OpenMP's).
void compare_with_openblas(const weight_tensor& w, int threads, int runs) {
  if (w.type != dtype::f32 || w.quant) return;
  set_cpu_threads(threads);
  const auto n = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  // OpenBLAS reads the matrix row-major; troupe as the model holds it.
  std::vector<float> row_major(static_cast<std::size_t>(n) * static_cast<std::size_t>(k));
  for (int r = 0; r < n; ++r) load_row(w, r, row_major.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(k));
  const auto* a = row_major.data();
  for (int m : {1, 32}) {
    std::vector<float> x(static_cast<std::size_t>(m * k), 0.5f), y(static_cast<std::size_t>(m * n));
    std::vector<double> ours, blas;
    for (int r = 0; r <= runs; ++r) {
      auto t0 = clock_type::now();
      gemm(x.data(), m, w.data, dtype::f32, n, k, y.data(), w.layout);
      const double s1 = std::chrono::duration<double>(clock_type::now() - t0).count();
      t0 = clock_type::now();
      if (m == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, a, k, x.data(), 1, 0.0f, y.data(), 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, a, k, 0.0f,
                    y.data(), n);
      const double s2 = std::chrono::duration<double>(clock_type::now() - t0).count();
      if (r == 0) continue;
      ours.push_back(2.0 * m * n * k / s1 / 1e9);
      blas.push_back(2.0 * m * n * k / s2 / 1e9);
    }
    std::printf("%7d %s [%d x %d] x %d rows: troupe %.1f GFLOP/s, OpenBLAS %.1f GFLOP/s\n", threads,
                m == 1 ? "gemv" : "gemm", n, k, m, median(ours), median(blas));
  }
}

// The flags, checked.
struct engine_options {
  bool json = false;
  std::vector<int> batches, thread_counts;
  bench_setup setup{};
  int prefill_tokens = 0;
};

// Reads and checks the flags; a usage_error for a bad one.
auto parse_engine_options(const args& a) -> engine_options {
  engine_options o;
  o.json = a.has("json");
  o.batches = parse_list(a.str("batches", "1,8,32"), "batches");
  o.thread_counts = parse_list(a.str("threads", "1,0"), "threads");
  for (auto& t : o.thread_counts) t = resolve_threads(t);
  o.thread_counts.erase(std::unique(o.thread_counts.begin(), o.thread_counts.end()), o.thread_counts.end());
  o.setup = bench_setup{static_cast<int>(a.integer("prompt-tokens", 32)),
                        static_cast<int>(a.integer("decode-steps", 16)),
                        static_cast<int>(a.integer("runs", 7))};
  o.prefill_tokens = static_cast<int>(a.integer("prefill-tokens", 256));
  if (o.setup.prompt_tokens < 1 || o.setup.decode_steps < 1 || o.setup.runs < 1 || o.prefill_tokens < 1)
    throw usage_error("--prompt-tokens, --decode-steps, --prefill-tokens and --runs must be positive");
  return o;
}

// --model, or a preset's random weights (written once to a temporary folder).
auto model_dir(const args& a) -> std::filesystem::path {
  std::filesystem::path dir = a.str("model", "");
  const std::string preset = a.str("preset", "stories110m");
  if (dir.empty()) {
    auto cfg = preset_config(preset);
    if (!cfg) throw usage_error("unknown preset '" + preset + "'");
    dir = std::filesystem::temp_directory_path() / ("troupe-bench-" + preset);
    if (!std::filesystem::exists(dir / "model.safetensors")) {
      std::fprintf(stderr, "writing random %s weights to %s\n", preset.c_str(), dir.c_str());
      write_random_model(dir, *cfg, {});
    }
  }
  return dir;
}

// What the figures are held to: a share of the read bandwidth at batch 1,
// and batch 32's speed-up over batch 1.
struct goals {
  double bw;
  double batch;
};

// A quantized model's figures are held to the goals for them: 80%
// of the read bandwidth (the blocks' scales are read too) and batch 32 at
// 8x batch 1 (its integer products cost more than F32 FMAs); a mixture of
// experts' to 75% and 5x (its batch reads more experts than one token).
auto goals_for(const model_weights& w) -> goals {
  if (w.config.num_experts > 0) return {0.75, 5.0};
  const bool quantized = w.layers[0].w_down.quant.has_value();
  return {quantized ? 0.80 : 0.85, quantized ? 8.0 : 10.0};
}

// The model, how each run goes, and the table's heading.
void print_heading(const std::filesystem::path& dir, const model_weights& w, const std::vector<int>& batches,
                   const bench_setup& setup) {
  const auto& l0 = w.layers[0];
  const weight_tensor& down = l0.experts.empty() ? l0.w_down : l0.experts.down[0];
  std::string types = std::string(l0.wq.type_name());
  if (down.type_name() != types) types += ", " + std::string(down.type_name()) + " down_proj";
  std::printf("model %s: %.0f MB of weights read per batch-1 step (%s), %d layers, hidden %lld\n",
              dir.c_str(), weight_bytes(w, 1) / 1e6, types.c_str(),
              static_cast<int>(w.layers.size()), static_cast<long long>(w.config.hidden_size));
  print_expert_reads(w, batches);
  std::printf("each run: one 1 GiB read-bandwidth pass, then %d decode steps per batch size "
              "(prompt %d tokens);\nmedians of %d runs after a warm-up run; ratios are taken "
              "within each run, then the median\n",
              setup.decode_steps, setup.prompt_tokens, setup.runs);
  std::printf("%7s %5s %10s %8s %11s %10s %8s %9s\n", "threads", "batch", "tokens/s", "step ms",
              "weight GB/s", "read GB/s", "% of bw", "x batch 1");
}

// rate[g][run], bw[run] of the timed runs (the warm-up run left out).
struct decode_runs {
  std::vector<std::vector<double>> rate;
  std::vector<double> bw;
};

// Batch sizes interleaved within each run so that the machine's drifting
// load affects all of them alike.
auto time_groups(cpu_executor& ex, std::vector<decode_group>& groups, const bench_setup& setup) -> decode_runs {
  decode_runs d{std::vector<std::vector<double>>(groups.size()), {}};
  for (int r = 0; r <= setup.runs; ++r) {
    const double bw_now = read_bandwidth_gbs();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double x = time_decode(ex, groups[g], setup);
      if (r > 0) d.rate[g].push_back(x);
    }
    if (r > 0) d.bw.push_back(bw_now);
  }
  return d;
}

// A table row per batch size, its verdicts appended to `verdicts`; returns
// the --json decode entries.
auto report_decode(int threads, const std::vector<int>& batches, const std::vector<decode_group>& groups,
                   const decode_runs& d, const model_weights& w, const goals& goal, std::string& verdicts)
    -> std::string {
  std::string json_rows;
  const auto& rate = d.rate;
  const auto& bw = d.bw;
  const auto base = std::find(batches.begin(), batches.end(), 1);
  const std::size_t base_g = static_cast<std::size_t>(base - batches.begin());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const int b = groups[g].batch;
    const double wbytes = weight_bytes(w, b);
    std::vector<double> gbs, of_bw, vs_base;
    for (std::size_t r = 0; r < bw.size(); ++r) {
      gbs.push_back(rate[g][r] / b * wbytes / 1e9);
      of_bw.push_back(gbs.back() / bw[r]);
      if (base != batches.end()) vs_base.push_back(rate[g][r] / rate[base_g][r]);
    }
    const double x_base = vs_base.empty() ? 0.0 : median(vs_base);
    std::printf("%7d %5d %10.1f %8.2f %11.1f %10.1f %7.1f%% %9.2f\n", threads, b,
                median(rate[g]), 1e3 * b / median(rate[g]), median(gbs), median(bw),
                100.0 * median(of_bw), x_base);
    char line[160];
    if (b == 1) {
      std::snprintf(line, sizeof line, "%d thread%s: batch-1 decode at %.0f%% of read bandwidth (target %.0f%%): %s\n",
                    threads, threads == 1 ? "" : "s", 100.0 * median(of_bw), 100.0 * goal.bw,
                    median(of_bw) >= goal.bw ? "met" : "NOT met");
      verdicts += line;
    }
    if (b == 32 && base != batches.end()) {
      std::snprintf(line, sizeof line, "%d thread%s: batch-32 decode at %.2fx batch 1 (target %.0fx): %s\n",
                    threads, threads == 1 ? "" : "s", x_base, goal.batch, x_base >= goal.batch ? "met" : "NOT met");
      verdicts += line;
    }
    json_rows += (json_rows.empty() ? "" : ", ") + std::string("\"") + std::to_string(b) +
                 "\": {\"tokens_per_s\": " + std::to_string(median(rate[g])) +
                 ", \"weight_gbs\": " + std::to_string(median(gbs)) + ", \"weight_mb\": " +
                 std::to_string(wbytes / 1e6) + ", \"read_gbs\": " +
                 std::to_string(median(bw)) + "}";
  }
  return json_rows;
}

// Everything measured with one thread count: decode per batch size, prefill,
// and the OpenBLAS comparison; its --json line appended to `json_lines`.
void bench_threads(const model_weights& w, cpu_executor_options eo, int threads, const engine_options& o,
                   int per_seq, const goals& goal, std::string& verdicts, std::string& json_lines) {
  eo.num_threads = threads;
  cpu_executor ex(w, eo);
  std::vector<decode_group> groups;
  request_id next_id = 1;
  block_id next_block = 0;
  for (int b : o.batches) {
    groups.push_back(prepare_group(ex, b, next_id, next_block, o.setup));
    next_id += static_cast<request_id>(b);
    next_block += b * per_seq;
  }
  const auto d = time_groups(ex, groups, o.setup);
  const std::string json_rows = report_decode(threads, o.batches, groups, d, w, goal, verdicts);
  const double prefill = prefill_rate(ex, o.prefill_tokens, o.setup.runs);
  std::printf("%7d prefill of %d tokens: %.1f tokens/s\n", threads, o.prefill_tokens, prefill);
  if (o.json)
    json_lines += "{\"threads\": " + std::to_string(threads) + ", \"decode\": {" + json_rows +
                  "}, \"prefill_tokens_per_s\": " + std::to_string(prefill) + "}\n";
  const auto& l0 = w.layers[0];
  compare_with_openblas(l0.experts.empty() ? l0.w_up : l0.experts.up[0], threads, o.setup.runs);
}

} // namespace

auto run_bench_engine(std::span<char* const> argv) -> int {
  const args a(argv, {"preset", "model", "batches", "threads", "decode-steps", "prompt-tokens",
                      "prefill-tokens", "runs"}, {"no-huge-pages", "json"});
  const auto o = parse_engine_options(a);
  const auto dir = model_dir(a);
  auto w = model_weights::load(dir);
  if (!a.has("no-huge-pages")) place_in_huge_pages(w);
  const goals goal = goals_for(w);
  print_heading(dir, w, o.batches, o.setup);

  int total_seqs = 0;
  for (int b : o.batches) total_seqs += b;
  cpu_executor_options eo;
  const int per_seq = (o.setup.prompt_tokens + o.setup.decode_steps + eo.block_size) / eo.block_size;
  eo.num_kv_blocks = std::max(total_seqs * per_seq, (o.prefill_tokens + eo.block_size - 1) / eo.block_size);
  std::string verdicts;
  std::string json_lines; // --json: one line per thread count, after the table
  for (int threads : o.thread_counts) bench_threads(w, eo, threads, o, per_seq, goal, verdicts, json_lines);
  std::fputs(verdicts.c_str(), stdout);
  if (o.json) std::fputs(json_lines.c_str(), stdout);
  return 0;
}

} // namespace troupe::cli
