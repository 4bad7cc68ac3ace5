// troupe-gpu-bench: the CUDA backend's speed, each figure set against a
// ceiling measured in the same run on the same device: the read bandwidth
// (a read-once kernel) for decode steps, cuBLAS's bf16 matrix product rate
// for prefill. Built only with the CUDA toolkit; `make bench-gpu` runs it.
//
//   troupe-gpu-bench [--device N] [--models llama-3.2-1b,llama-3-8b]
//                    [--batches 1,16,64,256] [--prompt 32] [--decode 128]

#include "engine/cuda/cuda_executor.hpp"
#include "engine/cuda/cuda_memory.hpp"
#include "engine/model/presets.hpp"
#include "base/stats.hpp"
#include "kernels/probe.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;

namespace {

auto split(const std::string& s) -> std::vector<std::string> {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const auto comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Median over `runs` of a device region timed with events, after `warmup` runs.
template <class F>
auto device_ms(cudaStream_t s, int warmup, int runs, F&& f) -> double {
  cudaEvent_t a, b;
  cuda::cuda_ok(cudaEventCreate(&a), "event");
  cuda::cuda_ok(cudaEventCreate(&b), "event");
  for (int i = 0; i < warmup; ++i) f(i);
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    cuda::cuda_ok(cudaEventRecord(a, s), "record");
    f(i);
    cuda::cuda_ok(cudaEventRecord(b, s), "record");
    cuda::cuda_ok(cudaEventSynchronize(b), "sync");
    float ms = 0;
    cuda::cuda_ok(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

auto read_bandwidth_gbs(cudaStream_t s, int sms) -> double {
  const std::int64_t bytes = std::int64_t{4} << 30; // far past the 50 MB L2
  void* buf = nullptr;
  void* sink = nullptr;
  cuda::cuda_ok(cudaMalloc(&buf, static_cast<std::size_t>(bytes)), "cudaMalloc");
  cuda::cuda_ok(cudaMalloc(&sink, static_cast<std::size_t>(kernels::read_probe_grid(sms)) * 4), "cudaMalloc");
  kernels::fill_random_bf16(buf, bytes / 2, 1, 1.0f, s);
  const double ms = device_ms(s, 3, 20, [&](int) { kernels::read_probe(buf, bytes, static_cast<float*>(sink), s); });
  cuda::cuda_ok(cudaGetLastError(), "read_probe");
  cudaFree(buf);
  cudaFree(sink);
  return static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

auto gemm_tflops(cudaStream_t s) -> double {
  const int n = 8192;
  const auto elems = static_cast<std::int64_t>(n) * n;
  // Three input sets in turn, random (never zeros), so no run reads another's cache.
  std::vector<void*> a(3), b(3);
  void* c = nullptr;
  for (int i = 0; i < 3; ++i) {
    cuda::cuda_ok(cudaMalloc(&a[static_cast<std::size_t>(i)], static_cast<std::size_t>(elems) * 2), "cudaMalloc");
    cuda::cuda_ok(cudaMalloc(&b[static_cast<std::size_t>(i)], static_cast<std::size_t>(elems) * 2), "cudaMalloc");
    kernels::fill_random_bf16(a[static_cast<std::size_t>(i)], elems, 10 + static_cast<std::uint64_t>(i), 1.0f, s);
    kernels::fill_random_bf16(b[static_cast<std::size_t>(i)], elems, 20 + static_cast<std::uint64_t>(i), 1.0f, s);
  }
  cuda::cuda_ok(cudaMalloc(&c, static_cast<std::size_t>(elems) * 2), "cudaMalloc");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
  cublasSetStream(h, s);
  const float one = 1, zero = 0;
  const double ms = device_ms(s, 3, 10, [&](int i) {
    const auto k = static_cast<std::size_t>(i % 3);
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a[k], CUDA_R_16BF, n, b[k], CUDA_R_16BF, n, &zero, c,
                     CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasGemmEx failed");
  });
  cublasDestroy(h);
  for (auto* p : a) cudaFree(p);
  for (auto* p : b) cudaFree(p);
  cudaFree(c);
  return 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3) / 1e12;
}

// A model of random bf16 weights in host memory (norms F32 ones), made by
// every core: an 8B model needs no 16 GB file.
struct host_model {
  model_weights w;

  explicit host_model(const model_config& c) {
    w.config = c;
    const auto tensor = [&](std::int64_t rows, std::int64_t cols, float scale) {
      auto data = std::shared_ptr<std::uint16_t[]>(new std::uint16_t[static_cast<std::size_t>(rows * cols)]);
      const auto n = rows * cols;
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      std::vector<std::thread> pool;
      const auto seed = static_cast<std::uint64_t>(w.storage.size() + 1) * 0x9e3779b97f4a7c15ull;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          for (std::int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) {
            std::uint64_t z = seed + static_cast<std::uint64_t>(i);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
            data[static_cast<std::size_t>(i)] = f32_to_bf16((2 * u - 1) * scale);
          }
        });
      for (auto& th : pool) th.join();
      w.storage.push_back(data);
      return weight_tensor{dtype::bf16, data.get(), rows, cols, weight_layout::row_major, {}};
    };
    const auto ones = [&](std::int64_t n) {
      auto data = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(n)]);
      std::fill(data.get(), data.get() + n, 1.0f);
      w.storage.push_back(data);
      return weight_tensor{dtype::f32, data.get(), 1, n, weight_layout::row_major, {}};
    };
    const std::int64_t d = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
    const float s = 1.0f / std::sqrt(static_cast<float>(d));
    w.embed = tensor(c.vocab_size, d, 1.0f);
    for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
      layer_weights x;
      x.attn_norm = ones(d);
      x.mlp_norm = ones(d);
      x.wq = tensor(nh * hd, d, s);
      x.wk = tensor(nkv * hd, d, s);
      x.wv = tensor(nkv * hd, d, s);
      x.wo = tensor(d, nh * hd, s);
      x.w_gate = tensor(c.intermediate_size, d, s);
      x.w_up = tensor(c.intermediate_size, d, s);
      x.w_down = tensor(d, c.intermediate_size, 1.0f / std::sqrt(static_cast<float>(c.intermediate_size)));
      w.layers.push_back(x);
    }
    w.final_norm = ones(d);
    w.lm_head = c.tie_word_embeddings ? w.embed : tensor(c.vocab_size, d, s);
  }

  // Bytes a decode step must read: every matrix once (the embedding: a row).
  auto step_weight_bytes() const -> double {
    double b = static_cast<double>(w.lm_head.num_bytes());
    for (const auto& l : w.layers)
      for (const auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) b += static_cast<double>(t->num_bytes());
    return b;
  }
  auto matmul_params() const -> double { return step_weight_bytes() / 2; }
};

// Drives the executor directly: `batch` requests, each its own blocks.
struct driver {
  executor& ex;
  std::int32_t batch, prompt, bs, per_req;
  std::vector<std::int32_t> pos;

  driver(executor& e, std::int32_t b, std::int32_t p, std::int32_t total)
    : ex(e), batch(b), prompt(p), bs(e.block_size()), per_req((total + e.block_size() - 1) / e.block_size()),
      pos(static_cast<std::size_t>(b), 0) {}

  auto block(std::int32_t r, std::int32_t i) const -> block_id { return r * per_req + i; }

  // Prefill chunks of every request, `budget` tokens per step; returns the seconds of each step.
  void prefill(std::int32_t budget) {
    std::int32_t r = 0;
    while (r < batch) {
      scheduler_output s;
      std::int32_t used = 0;
      for (; r < batch && used + prompt <= std::max(budget, prompt); ++r) {
        std::vector<token_id> toks(static_cast<std::size_t>(prompt));
        for (std::int32_t i = 0; i < prompt; ++i) toks[static_cast<std::size_t>(i)] = (r * 7919 + i * 31) % 1000 + 1;
        std::vector<block_id> blocks;
        for (std::int32_t i = 0; i < (prompt + bs - 1) / bs; ++i) blocks.push_back(block(r, i));
        sampling_params sp;
        sp.temperature = 0.0f;
        const auto id = static_cast<request_id>(r + 1);
        s.new_requests.push_back({id, toks, sp});
        s.add_chunk(id, toks, 0, blocks, true).sample = true;
        pos[static_cast<std::size_t>(r)] = prompt;
        used += prompt;
      }
      (void)ex.execute(s);
    }
  }

  // One decode step of every request; its wall time (execute() synchronises).
  auto decode() -> double {
    scheduler_output s;
    const std::vector<token_id> one{7};
    for (std::int32_t r = 0; r < batch; ++r) {
      auto& p = pos[static_cast<std::size_t>(r)];
      std::vector<block_id> fresh;
      if (p % bs == 0) fresh.push_back(block(r, p / bs));
      s.add_chunk(static_cast<request_id>(r + 1), one, p, fresh).sample = true;
      ++p;
    }
    const auto t0 = std::chrono::steady_clock::now();
    (void)ex.execute(s);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void finish() {
    scheduler_output s;
    for (std::int32_t r = 0; r < batch; ++r) s.finished.push_back(static_cast<request_id>(r + 1));
    (void)ex.execute(s);
  }
};

// The command line's settings.
struct bench_options {
  int device = 0;
  std::string models = "llama-3.2-1b,llama-3-8b", batches = "1,16,64,256";
  std::int32_t prompt = 32, decode_steps = 128;
};

// Reads the command line into `b`; false on an unknown option (after saying so).
auto parse_args(int argc, char** argv, bench_options& b) -> bool {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "troupe-gpu-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") b.device = std::stoi(value());
    else if (a == "--models") b.models = value();
    else if (a == "--batches") b.batches = value();
    else if (a == "--prompt") b.prompt = std::stoi(value());
    else if (a == "--decode") b.decode_steps = std::stoi(value());
    else {
      std::fprintf(stderr, "troupe-gpu-bench: unknown option %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

// The executor's options for a model run whose largest batch is `max_batch`.
auto executor_options(const bench_options& b, std::int32_t max_batch) -> cuda::cuda_executor_options {
  const std::int32_t prompt = b.prompt, decode_steps = b.decode_steps;
  cuda::cuda_executor_options o;
  o.device = b.device;
  o.act = dtype::bf16;
  o.max_num_seqs = max_batch;
  o.max_num_batched_tokens = std::max(8192, max_batch * prompt);
  o.max_model_len = std::max<std::int32_t>(2048, prompt + decode_steps + 16);
  o.num_kv_blocks = std::max(max_batch * ((prompt + decode_steps + 15) / 16), 8 * (1025 + 15) / 16) + 64;
  return o;
}

// Decode steps at one batch size, against the measured read bandwidth.
void bench_decode(executor& ex, const model_config& c, const host_model& m, const bench_options& b,
                  const cuda::cuda_executor_options& o, std::int32_t batch, double bw) {
  const std::int32_t prompt = b.prompt, decode_steps = b.decode_steps;
  driver d(ex, batch, prompt, prompt + decode_steps);
  d.prefill(o.max_num_batched_tokens);
  std::vector<double> t;
  for (std::int32_t i = 0; i < decode_steps; ++i) t.push_back(d.decode());
  d.finish();
  std::vector<double> timed(t.begin() + std::min<std::size_t>(8, t.size() / 2), t.end()); // warm-up: graph capture
  const double step = median(timed);
  const double kv = 2.0 * static_cast<double>(c.num_hidden_layers * c.num_key_value_heads * c.head_dim) * 2 *
                    batch * (prompt + decode_steps / 2.0);
  const double bytes = m.step_weight_bytes() + kv;
  std::printf("  batch %4d: decode step %.3f ms (median of %zu), %.0f tokens/s; %.0f GB/s = %.0f%% of the "
              "measured read bandwidth\n",
              batch, step * 1e3, timed.size(), batch / step, bytes / step / 1e9, 100 * bytes / step / 1e9 / bw);
}

// Prefill: 8 prompts of 1024 tokens in one step, against the measured GEMM rate.
void bench_prefill(executor& ex, const model_config& c, const host_model& m, const cuda::cuda_executor_options& o,
                   std::int32_t max_batch, double tflops) {
  const std::int32_t n = 8, len = 1024;
  driver d(ex, std::min(n, max_batch), len, len + 1);
  if (d.per_req * d.batch > ex.num_kv_blocks()) throw std::runtime_error("KV pool too small for the prefill run");
  std::vector<double> t;
  for (int run = 0; run < 4; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    d.prefill(o.max_num_batched_tokens);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    d.finish();
  }
  const double sec = median(std::vector<double>(t.begin() + 1, t.end()));
  const double tokens = static_cast<double>(d.batch) * len;
  const double attn = 2.0 * 2.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_dim) *
                      d.batch * (static_cast<double>(len) * (len + 1) / 2);
  const double flops = 2.0 * m.matmul_params() * tokens + attn;
  std::printf("  prefill %d x %d tokens: %.0f tokens/s, %.0f TFLOP/s = %.0f%% of the measured GEMM rate\n",
              d.batch, len, tokens / sec, flops / sec / 1e12, 100 * flops / sec / 1e12 / tflops);
}

// One preset: its random weights on a fresh executor, then every batch's decode and the prefill run.
void bench_model(const std::string& name, const bench_options& b, double bw, double tflops) {
  const auto cfg = preset_config(name);
  if (!cfg) throw std::runtime_error("unknown preset " + name);
  host_model m(*cfg);
  const auto bl = split(b.batches);
  std::int32_t max_batch = 1;
  for (const auto& x : bl) max_batch = std::max(max_batch, std::stoi(x));
  const cuda::cuda_executor_options o = executor_options(b, max_batch);
  const auto ex = cuda::make_cuda_executor(m.w, o);
  std::printf("\n%s: %.2f B matrix parameters, %.2f GB read per decode step\n", name.c_str(),
              m.matmul_params() / 1e9, m.step_weight_bytes() / 1e9);
  for (const auto& x : bl) bench_decode(*ex, *cfg, m, b, o, std::stoi(x), bw);
  bench_prefill(*ex, *cfg, m, o, max_batch, tflops);
}

} // namespace

auto main(int argc, char** argv) -> int {
  bench_options b;
  if (!parse_args(argc, argv, b)) return 2;
  try {
    cuda::cuda_ok(cudaSetDevice(b.device), "cudaSetDevice");
    cudaDeviceProp prop{};
    cuda::cuda_ok(cudaGetDeviceProperties(&prop, b.device), "cudaGetDeviceProperties");
    cudaStream_t s;
    cuda::cuda_ok(cudaStreamCreate(&s), "stream");
    const double bw = read_bandwidth_gbs(s, prop.multiProcessorCount);
    const double tflops = gemm_tflops(s);
    std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    std::printf("measured: read bandwidth %.0f GB/s (one read of 4 GiB, median of 20); bf16 GEMM %.0f TFLOP/s "
                "(cuBLAS 8192^3, median of 10)\n",
                bw, tflops);
    for (const auto& name : split(b.models)) bench_model(name, b, bw, tflops);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-gpu-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
