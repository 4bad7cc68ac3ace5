// troupe bench-engine: decode and prefill speed of the CPU backend, set
// against this machine's memory read bandwidth measured in the same run.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/model/presets.hpp"
#include "engine/model/random_model.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

auto median(std::vector<double> v) -> double {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

auto parse_list(const std::string& s, const std::string& name) -> std::vector<int> {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size() || out.back() < 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw usage_error("--" + name + " expects comma-separated non-negative integers");
    }
  }
  if (out.empty()) throw usage_error("--" + name + " is empty");
  return out;
}

// Sustained read bandwidth: a 1 GiB buffer summed with vector loads, median
// of `runs` passes after a warm-up pass.
auto read_bandwidth_gbs(int threads, int runs) -> double {
  const std::size_t n = (std::size_t{1} << 30) / sizeof(float);
  static std::vector<float> buf(n, 1.0f);
  set_cpu_threads(threads);
  std::vector<double> gbs;
  float sink = 0.0f;
  for (int r = 0; r <= runs; ++r) {
    const auto t0 = clock_type::now();
    float s = 0.0f;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
    for (std::size_t i = 0; i < n; ++i) s += buf[i];
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    sink += s;
    if (r > 0) gbs.push_back(static_cast<double>(n * sizeof(float)) / sec / 1e9);
  }
  if (sink < 0) std::puts(""); // keeps the sum alive
  return median(gbs);
}

auto weight_bytes(const model_weights& w) -> double {
  const auto bytes = [](const weight_tensor& t) {
    return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.type));
  };
  double b = bytes(w.lm_head);
  for (const auto& l : w.layers)
    b += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) +
         bytes(l.w_up) + bytes(l.w_down);
  return b;
}

struct bench_setup {
  int prompt_tokens;
  int decode_steps;
  int runs;
};

// Decode tokens/s for `batch` sequences that each already hold a prompt.
auto decode_rate(cpu_executor& ex, int batch, const bench_setup& s) -> double {
  const std::int32_t bs = ex.block_size();
  const std::int32_t per_seq = (s.prompt_tokens + s.decode_steps + bs) / bs;
  scheduler_output step;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 1 << 20;
  for (int b = 0; b < batch; ++b) {
    scheduled_chunk c;
    c.id = static_cast<request_id>(b + 1);
    c.block_table.resize(static_cast<std::size_t>(per_seq));
    std::iota(c.block_table.begin(), c.block_table.end(), b * per_seq);
    for (int i = 0; i < s.prompt_tokens; ++i) c.tokens.push_back((7 * i + b) % 1000 + 3);
    c.sample = true;
    step.new_requests.push_back({c.id, c.tokens, greedy});
    step.scheduled.push_back(std::move(c));
  }
  auto prefilled = ex.execute(step);
  step.new_requests.clear();
  std::vector<double> rates;
  for (int r = 0; r <= s.runs; ++r) {
    for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
      step.scheduled[b].tokens = {prefilled.sampled[b].result.token};
      step.scheduled[b].num_computed_tokens = s.prompt_tokens;
    }
    const auto t0 = clock_type::now();
    for (int i = 0; i < s.decode_steps; ++i) {
      auto out = ex.execute(step);
      for (std::size_t b = 0; b < step.scheduled.size(); ++b) {
        step.scheduled[b].tokens = {out.sampled[b].result.token};
        ++step.scheduled[b].num_computed_tokens;
      }
    }
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (r > 0) rates.push_back(batch * s.decode_steps / sec); // run 0 warms up
  }
  for (auto& c : step.scheduled) step.finished.push_back(c.id);
  step.scheduled.clear();
  ex.execute(step);
  return median(rates);
}

auto prefill_rate(cpu_executor& ex, int tokens, int runs) -> double {
  scheduler_output step;
  scheduled_chunk c;
  c.id = 999'999;
  for (int i = 0; i < tokens; ++i) c.tokens.push_back(i % 1000 + 3);
  c.block_table.resize(static_cast<std::size_t>((tokens + ex.block_size() - 1) / ex.block_size()));
  std::iota(c.block_table.begin(), c.block_table.end(), 0);
  c.sample = false;
  step.scheduled.push_back(c);
  std::vector<double> rates;
  for (int r = 0; r <= runs; ++r) {
    const auto t0 = clock_type::now();
    ex.execute(step);
    const double sec = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (r > 0) rates.push_back(tokens / sec);
  }
  return median(rates);
}

} // namespace

auto run_bench_engine(std::span<char* const> argv) -> int {
  const args a(argv, {"preset", "model", "batches", "threads", "decode-steps", "prompt-tokens",
                      "prefill-tokens", "runs"}, {});
  const auto batches = parse_list(a.str("batches", "1,8,32"), "batches");
  auto thread_counts = parse_list(a.str("threads", "1,0"), "threads");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (auto& t : thread_counts) if (t == 0) t = cores;
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  const bench_setup setup{static_cast<int>(a.integer("prompt-tokens", 32)),
                          static_cast<int>(a.integer("decode-steps", 16)),
                          static_cast<int>(a.integer("runs", 5))};
  const int prefill_tokens = static_cast<int>(a.integer("prefill-tokens", 256));
  if (setup.prompt_tokens < 1 || setup.decode_steps < 1 || setup.runs < 1 || prefill_tokens < 1)
    throw usage_error("--prompt-tokens, --decode-steps, --prefill-tokens and --runs must be positive");

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
  const auto w = model_weights::load(dir);
  const double wbytes = weight_bytes(w);

  std::printf("memory read bandwidth (1 GiB sum, median of 5):");
  std::vector<double> bw;
  for (int t : thread_counts) {
    bw.push_back(read_bandwidth_gbs(t, 5));
    std::printf("  %d thread%s %.1f GB/s", t, t == 1 ? "" : "s", bw.back());
  }
  std::printf("\nmodel %s: %.0f MB of weights read per step (%s), %d layers, hidden %lld\n",
              dir.c_str(), wbytes / 1e6, std::string(dtype_name(w.layers[0].wq.type)).c_str(),
              static_cast<int>(w.layers.size()), static_cast<long long>(w.config.hidden_size));
  std::printf("decode: prompt %d tokens, %d steps, median of %d runs after a warm-up\n",
              setup.prompt_tokens, setup.decode_steps, setup.runs);
  std::printf("%8s %6s %12s %10s %12s %11s %10s\n", "threads", "batch", "tokens/s", "step ms",
              "weight GB/s", "% of bw", "x batch 1");

  const int max_batch = *std::max_element(batches.begin(), batches.end());
  cpu_executor_options eo;
  eo.num_kv_blocks = std::max(max_batch * ((setup.prompt_tokens + setup.decode_steps + 16) / 16),
                              (prefill_tokens + 15) / 16);
  bool bw_ok = true, scale_ok = true;
  for (std::size_t ti = 0; ti < thread_counts.size(); ++ti) {
    eo.num_threads = thread_counts[ti];
    cpu_executor ex(w, eo);
    double base = 0.0;
    for (int b : batches) {
      const double rate = decode_rate(ex, b, setup);
      if (b == 1) base = rate;
      const double gbs = rate / b * wbytes / 1e9;
      std::printf("%8d %6d %12.1f %10.2f %12.1f %10.1f%% %10.2f\n", thread_counts[ti], b, rate,
                  1e3 * b / rate, gbs, 100.0 * gbs / bw[ti], base > 0 ? rate / base : 0.0);
      if (b == 1 && gbs < 0.85 * bw[ti]) bw_ok = false;
      if (b == 32 && base > 0 && rate < 10 * base) scale_ok = false;
    }
    std::printf("%8d prefill %d tokens: %.1f tokens/s\n", thread_counts[ti], prefill_tokens,
                prefill_rate(ex, prefill_tokens, setup.runs));
  }
  std::printf("target batch-1 decode >= 85%% of read bandwidth: %s\n", bw_ok ? "met" : "NOT met");
  std::printf("target batch-32 decode >= 10x batch 1: %s\n", scale_ok ? "met" : "NOT met");
  return 0;
}

} // namespace troupe::cli
