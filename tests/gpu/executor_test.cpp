// The CUDA executor against the CPU backend on small random models, driven
// by the server's own scheduler core (chunked prefill, mixed steps, decode
// batches that replay CUDA graphs): the same greedy text in fp32 mode, the
// same logits (top logprobs) within fp32 / bf16 bounds, and the same text
// with and without graphs, through NCCL with one rank, over a group of two
// devices where there are two, and after swaps to host memory. (A greedy tie
// between the two best logits could part the texts: float against the CPU's
// rounding; look there first if the fp32 test fails.)
// Skips (77) where no CUDA device can be used.

#define DOCTEST_CONFIG_IMPLEMENT
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"
#include "engine/core/prefix_cache.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cuda/cuda_executor.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "engine/make_model/tiny_model.hpp"
#include "policies/registry.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <map>
#include <tuple>

using namespace troupe;

namespace {

// Every request's sampled results, by request, running them all at once.
auto run(executor& ex, const std::vector<std::vector<token_id>>& prompts, const sampling_params& sp,
         std::int32_t max_batched, std::int32_t host_blocks = 0) -> std::map<request_id, std::vector<sample_result>> {
  auto eviction = policy::make_eviction_policy("lru");
  auto policy = policy::make_scheduling_policy("fcfs");
  prefix_cache cache(ex.num_kv_blocks(), *eviction);
  kv_cache_manager kv(cache, {ex.block_size(), 0, true});
  scheduler_limits limits;
  limits.max_num_seqs = 64;
  limits.max_num_batched_tokens = max_batched;
  limits.max_model_len = 512;
  if (host_blocks > 0) { // preempted requests keep their KV in host memory
    limits.preemption = preemption_mode::swap;
    limits.num_host_blocks = host_blocks;
  }
  batch_scheduler core(limits, kv, *policy, {});
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    request r;
    r.id = static_cast<request_id>(i + 1);
    r.prompt = prompts[i];
    r.sampling = sp;
    r.sampling.ignore_eos = true;
    REQUIRE(core.submit(std::move(r)).status == 0);
  }
  std::map<request_id, std::vector<sample_result>> out;
  double now = 0;
  while (core.num_running() + core.num_waiting() > 0) {
    const auto step = core.schedule(now += 1);
    const auto result = ex.execute(step);
    for (const auto& u : core.update(step, result))
      if (u.token) out[u.id].push_back(*u.token);
  }
  return out;
}

auto tokens_of(const std::map<request_id, std::vector<sample_result>>& m) -> std::map<request_id, std::vector<token_id>> {
  std::map<request_id, std::vector<token_id>> t;
  for (const auto& [id, v] : m)
    for (const auto& s : v) t[id].push_back(s.token);
  return t;
}

auto prompts_for(std::int64_t vocab, std::uint64_t seed) -> std::vector<std::vector<token_id>> {
  rng r(seed);
  std::vector<std::vector<token_id>> p(6);
  for (auto& q : p) {
    q.resize(1 + r.next() % 90);
    for (auto& t : q) t = static_cast<token_id>(r.next() % static_cast<std::uint64_t>(vocab));
  }
  return p;
}

auto make_config() -> model_config {
  auto c = llama_config(512, 128, 256, 3, 8, 2);
  c.head_dim = 16;
  c.bos_token_id.reset();
  c.eos_token_ids.clear();
  c.rms_norm_eps = 1e-5;
  c.rope_scaling = rope_scaling_config::llama3(8.0, 1.0, 4.0, 64);
  c.rope_theta = 500000.0;
  return c;
}

auto cuda_options(dtype act) -> cuda::cuda_executor_options {
  cuda::cuda_executor_options o;
  o.block_size = 16;
  o.num_kv_blocks = 256;
  o.act = act;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 64;
  o.max_model_len = 512;
  o.num_host_blocks = 64;
  return o;
}

} // namespace

TEST_CASE("fp32 mode: the tiny model's greedy text is the CPU backend's over 64 tokens, graphs or not, through NCCL or not") {
  testing::temp_dir tmp;
  make_model("tiny", tmp.path(), 1); // the built-in tiny model, as `troupe make-model` writes it
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(w.config.vocab_size, 5);
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 64;
  cpu_executor cpu(w, {16, 256, 2, 0, 0});
  const auto want = tokens_of(run(cpu, prompts, greedy, 64));
  REQUIRE(want.size() == prompts.size());
  for (const bool graphs : {true, false})
    for (const bool nccl : {false, true}) {
      CAPTURE(graphs);
      CAPTURE(nccl);
      auto o = cuda_options(dtype::f32);
      o.cuda_graphs = graphs;
      o.all_reduce_single_rank = nccl;
      const auto gpu = cuda::make_cuda_executor(w, o);
      CHECK(tokens_of(run(*gpu, prompts, greedy, 64)) == want);
    }
}

TEST_CASE("a tensor-parallel group over every device gives the single device's text") {
  int n = 0;
  cudaGetDeviceCount(&n);
  if (n < 2) {
    MESSAGE("one device: the group of two ranks awaits a machine with two");
    return;
  }
  testing::temp_dir tmp;
  write_random_model(tmp.path(), make_config(), {34, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(512, 8);
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 32;
  const auto one = cuda::make_cuda_executor(w, cuda_options(dtype::f32));
  const auto want = tokens_of(run(*one, prompts, greedy, 64));
  auto o = cuda_options(dtype::f32);
  o.devices = {0, 1};
  const auto group = cuda::make_cuda_executor(w, o);
  CHECK(tokens_of(run(*group, prompts, greedy, 64)) == want);
}

TEST_CASE("the logits match the CPU backend's: fp32 closely, bf16 within its precision") {
  testing::temp_dir tmp;
  write_random_model(tmp.path(), make_config(), {32, dtype::bf16, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(512, 6);
  sampling_params sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 8;
  sp.logprobs = 20; // the top 20 log-softmax values: the logits, up to a constant
  cpu_executor cpu(w, {16, 256, 2, 0, 0});
  const auto want = run(cpu, prompts, sp, 64);
  for (const auto& [act, bound] : {std::pair{dtype::f32, 1e-4}, std::pair{dtype::bf16, 5e-2}}) {
    CAPTURE(dtype_name(act));
    const auto gpu = cuda::make_cuda_executor(w, cuda_options(act));
    const auto got = run(*gpu, prompts, sp, 64);
    for (const auto& [id, steps] : want) {
      // Compare the first step's logits (later ones may follow other tokens in bf16).
      const auto& a = steps.front().top_logprobs;
      const auto& b = got.at(id).front().top_logprobs;
      REQUIRE(a.size() == b.size());
      double worst = 0, scale = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        scale = std::max(scale, std::abs(static_cast<double>(a[k].logprob)));
        // The same token at each rank, unless two are within the bound of each other.
        if (a[k].token != b[k].token) CHECK(std::abs(a[k].logprob - b[k].logprob) <= bound * (1 + scale));
        worst = std::max(worst, std::abs(static_cast<double>(a[k].logprob - b[k].logprob)));
      }
      CHECK(worst <= bound * (1 + scale));
    }
  }
}

TEST_CASE("seeded sampling on the device is reproducible") {
  testing::temp_dir tmp;
  write_random_model(tmp.path(), make_config(), {33, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(512, 7);
  sampling_params sp;
  sp.temperature = 0.9f;
  sp.top_k = 40;
  sp.top_p = 0.9f;
  sp.repetition_penalty = 1.1f;
  sp.seed = 1234;
  sp.max_tokens = 32;
  const auto a = cuda::make_cuda_executor(w, cuda_options(dtype::bf16));
  const auto first = tokens_of(run(*a, prompts, sp, 64));
  const auto b = cuda::make_cuda_executor(w, cuda_options(dtype::bf16));
  CHECK(tokens_of(run(*b, prompts, sp, 64)) == first);
}

TEST_CASE("swapped out and back in, a request's KV survives: the CPU backend's text on a pool too small for all") {
  testing::temp_dir tmp;
  write_random_model(tmp.path(), make_config(), {35, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(512, 9);
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 64;
  // 20 blocks of 16 tokens for six requests of up to 154 tokens: preemptions by swap.
  cpu_executor cpu(w, {16, 20, 2, 0, 64});
  const auto want = tokens_of(run(cpu, prompts, greedy, 64, 64));
  auto o = cuda_options(dtype::f32);
  o.num_kv_blocks = 20;
  o.num_host_blocks = 64;
  const auto gpu = cuda::make_cuda_executor(w, o);
  CHECK(tokens_of(run(*gpu, prompts, greedy, 64, 64)) == want);
}

TEST_CASE("a padded vocabulary: device and host sampling pick only the first num_sampled_ids") {
  testing::temp_dir tmp;
  write_random_model(tmp.path(), make_config(), {36, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto prompts = prompts_for(512, 10);
  constexpr std::int64_t spellable = 100; // of 512 rows: most of the mass lies past it
  const auto past = [&](const std::map<request_id, std::vector<sample_result>>& got) {
    int n = 0;
    for (const auto& [id, v] : got)
      for (const auto& r : v) {
        n += r.token >= spellable;
        for (const auto& t : r.top_logprobs) n += t.token >= spellable;
      }
    return n;
  };
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 32;
  auto o = cuda_options(dtype::f32);
  const auto whole = cuda::make_cuda_executor(w, o);
  CHECK(past(run(*whole, prompts, greedy, 64)) > 0); // without the limit the model does pick the padding
  o.num_sampled_ids = spellable;
  const auto gpu = cuda::make_cuda_executor(w, o);
  CHECK(past(run(*gpu, prompts, greedy, 64)) == 0);
  sampling_params sp;
  sp.temperature = 1.0f;
  sp.seed = 9;
  sp.max_tokens = 32;
  for (const auto& [top_k, top_p, logprobs] : {std::tuple{0, 1.0f, 0}, std::tuple{20, 1.0f, 0},
                                               std::tuple{0, 0.9f, 0}, std::tuple{0, 1.0f, 3}}) { // logprobs: on the host
    CAPTURE(top_k);
    CAPTURE(top_p);
    CAPTURE(logprobs);
    sp.top_k = top_k;
    sp.top_p = top_p;
    sp.logprobs = logprobs;
    CHECK(past(run(*gpu, prompts, sp, 64)) == 0);
  }
}

auto main(int argc, char** argv) -> int {
  if (const int skip = gpu_test::device_or_skip(); skip != 0) return skip;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
