// Device sampling against a double-precision reference: the CPU sampler's
// rules for what is kept (penalties, greedy, temperature, top-k, top-p,
// min-p), then the device's inverse-CDF draw in id order; greedy against the
// CPU sampler itself; a tie at the top-k boundary that top-p cuts; and the
// draw's frequencies.
// Skips (77) where no CUDA device can be used.

#define DOCTEST_CONFIG_IMPLEMENT
#include "base/rng.hpp"
#include "engine/sampling/sampler.hpp"
#include "kernels/sampling.hpp"
#include "tests/gpu/gpu_test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

using namespace troupe;
using namespace troupe::gpu_test;

namespace {

struct case_params {
  kernels::sampling_row row;
  std::vector<std::int32_t> tokens, counts; // penalty list
};

// The kept tokens and their weights, by the CPU sampler's rules, in double.
auto reference_weights(std::vector<double> l, const case_params& c) -> std::vector<double> {
  const auto n = static_cast<std::int32_t>(l.size());
  const auto& r = c.row;
  for (std::size_t j = 0; j < c.tokens.size(); ++j) {
    double& x = l[static_cast<std::size_t>(c.tokens[j])];
    if (r.repetition_penalty != 1.0f) x = x > 0 ? x / r.repetition_penalty : x * r.repetition_penalty;
    if (c.counts[j] > 0) x -= r.presence_penalty + r.frequency_penalty * c.counts[j];
  }
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) p[i] = std::exp((l[i] - mx) / r.temperature);
  std::vector<std::int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return l[static_cast<std::size_t>(a)] > l[static_cast<std::size_t>(b)]; });
  std::int32_t keep = n;
  if (r.top_k > 0 && r.top_k < n) keep = r.top_k;
  if (r.top_p < 1.0f) {
    double total = 0;
    for (std::int32_t j = 0; j < keep; ++j) total += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
    double mass = 0;
    for (std::int32_t j = 0; j < keep; ++j) {
      mass += p[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])];
      if (mass >= r.top_p * total) {
        keep = j + 1;
        break;
      }
    }
  }
  std::vector<double> w(l.size(), 0.0);
  for (std::int32_t j = 0; j < keep; ++j) {
    const auto i = static_cast<std::size_t>(order[static_cast<std::size_t>(j)]);
    if (p[i] >= r.min_p) w[i] = p[i];
  }
  return w;
}

auto inverse_cdf(const std::vector<double>& w, double u, double* margin) -> std::int32_t {
  const double total = std::accumulate(w.begin(), w.end(), 0.0), target = u * total;
  double mass = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    const double before = mass;
    mass += w[i];
    if (mass > target) {
      *margin = std::min(target - before, mass - target) / total;
      return static_cast<std::int32_t>(i);
    }
  }
  *margin = 0;
  return -1;
}

} // namespace

TEST_CASE("device sampling keeps the CPU sampler's rules") {
  rng r(11);
  for (const std::int64_t vocab : {1000, 32000, 128256}) {
    std::vector<case_params> cases;
    const auto add = [&](float t, int k, float p, float mp, float rep, float pres, float freq) {
      case_params c;
      c.row = {t, k, p, mp, rep, pres, freq, static_cast<float>(r.uniform()), 0, 0};
      if (rep != 1.0f || pres != 0.0f || freq != 0.0f)
        for (int j = 0; j < 20; ++j) {
          c.tokens.push_back(static_cast<std::int32_t>(r.next() % static_cast<std::uint64_t>(vocab)));
          c.counts.push_back(static_cast<std::int32_t>(r.next() % 3));
        }
      std::sort(c.tokens.begin(), c.tokens.end());
      c.tokens.erase(std::unique(c.tokens.begin(), c.tokens.end()), c.tokens.end());
      c.counts.resize(c.tokens.size());
      cases.push_back(c);
    };
    add(0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);  // greedy
    add(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);  // plain
    add(0.7f, 50, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f); // top-k
    add(0.7f, 1, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);  // top-1
    add(1.3f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f);  // top-p
    add(1.0f, 40, 0.5f, 0.0f, 1.0f, 0.0f, 0.0f); // top-k then top-p
    add(1.0f, 0, 1.0f, 0.2f, 1.0f, 0.0f, 0.0f);  // min-p
    add(0.8f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.2f);  // penalties
    add(0.0f, 0, 1.0f, 0.0f, 2.0f, 1.0f, 1.0f);  // greedy after penalties
    const auto rows = static_cast<std::int64_t>(cases.size());
    std::vector<float> logits(static_cast<std::size_t>(rows * vocab));
    for (auto& x : logits) x = static_cast<float>(4.0 * r.normal());
    logits[5] = logits[9] = 30.0f; // a tie at the top in the first row
    std::vector<kernels::sampling_row> params;
    std::vector<std::int32_t> ptok, pcnt;
    for (auto& c : cases) {
      c.row.penalty_first = static_cast<std::int32_t>(ptok.size());
      c.row.penalty_count = static_cast<std::int32_t>(c.tokens.size());
      ptok.insert(ptok.end(), c.tokens.begin(), c.tokens.end());
      pcnt.insert(pcnt.end(), c.counts.begin(), c.counts.end());
      params.push_back(c.row);
    }
    device_buffer dl(dtype::f32, rows * vocab), raw(dtype::f32, rows * vocab), dpt(dtype::f32, std::max<std::int64_t>(1, static_cast<std::int64_t>(ptok.size()))),
        dpc(dtype::f32, std::max<std::int64_t>(1, static_cast<std::int64_t>(pcnt.size()))), tok(dtype::f32, rows), lp(dtype::f32, rows);
    dl.upload(logits);
    if (!ptok.empty()) {
      dpt.upload_ints(ptok);
      dpc.upload_ints(pcnt);
    }
    void* dparams = nullptr;
    check_cuda(cudaMalloc(&dparams, params.size() * sizeof(kernels::sampling_row)), "cudaMalloc");
    check_cuda(cudaMemcpy(dparams, params.data(), params.size() * sizeof(kernels::sampling_row), cudaMemcpyHostToDevice), "params");
    kernels::sampling_params sp;
    sp.logits = dl.as<float>();
    sp.rows = rows;
    sp.vocab = vocab;
    sp.row_params = static_cast<const kernels::sampling_row*>(dparams);
    sp.penalty_tokens = dpt.as<std::int32_t>();
    sp.penalty_counts = dpc.as<std::int32_t>();
    sp.raw = raw.as<float>();
    sp.tokens = tok.as<std::int32_t>();
    sp.logprobs = lp.as<float>();
    kernels::sample(sp, nullptr);
    check_launch("sample");
    cudaFree(dparams);
    const auto got = tok.download_ints();
    const auto got_lp = lp.download();
    for (std::size_t i = 0; i < cases.size(); ++i) {
      CAPTURE(vocab);
      CAPTURE(i);
      const auto& c = cases[i];
      std::vector<double> row(logits.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(vocab)),
                              logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * static_cast<std::size_t>(vocab)));
      // The logprob: log_softmax of the raw logits.
      const double mx = *std::max_element(row.begin(), row.end());
      double se = 0;
      for (const double x : row) se += std::exp(x - mx);
      REQUIRE(got[i] >= 0);
      REQUIRE(got[i] < vocab);
      CHECK(std::abs(got_lp[i] - (row[static_cast<std::size_t>(got[i])] - mx - std::log(se))) <= 1e-3);
      if (c.row.temperature < 1e-5f) {
        // Greedy: the CPU sampler's own choice.
        sampling_params cp;
        cp.temperature = 0.0f;
        cp.repetition_penalty = c.row.repetition_penalty;
        cp.presence_penalty = c.row.presence_penalty;
        cp.frequency_penalty = c.row.frequency_penalty;
        std::vector<token_id> prompt;
        for (std::size_t j = 0; j < c.tokens.size(); ++j) prompt.push_back(c.tokens[j]);
        if (c.row.presence_penalty == 0.0f && c.row.frequency_penalty == 0.0f) {
          request_sampler cpu(cp, prompt, 1);
          std::vector<float> l(row.begin(), row.end());
          CHECK(cpu.sample(l).token == got[i]);
        }
        std::vector<double> pen = row;
        for (std::size_t j = 0; j < c.tokens.size(); ++j) {
          double& x = pen[static_cast<std::size_t>(c.tokens[j])];
          if (c.row.repetition_penalty != 1.0f) x = x > 0 ? x / c.row.repetition_penalty : x * c.row.repetition_penalty;
          if (c.counts[j] > 0) x -= c.row.presence_penalty + c.row.frequency_penalty * c.counts[j];
        }
        CHECK(std::max_element(pen.begin(), pen.end()) - pen.begin() == got[i]); // lowest id on ties
        continue;
      }
      const auto w = reference_weights(row, c);
      CHECK(w[static_cast<std::size_t>(got[i])] > 0); // a kept token
      double margin = 0;
      const auto want = inverse_cdf(w, c.row.uniform, &margin);
      if (margin > 1e-4) CHECK(got[i] == want); // (else float and double may round to either side)
    }
  }
}

TEST_CASE("top-p cuts inside the ties top-k kept, lowest ids first") {
  // Probabilities 1, .5, .5, .5, .5 (logits 0, -ln 2 x4): top-k 3 keeps ids 0-2,
  // top-p 0.6 of their mass (1.2) keeps ids 0 and 1 only.
  const std::vector<float> logits{0.0f, -0.6931472f, -0.6931472f, -0.6931472f, -0.6931472f};
  std::vector<kernels::sampling_row> params;
  rng r(13);
  const std::int64_t rows = 400;
  std::vector<float> all;
  for (std::int64_t i = 0; i < rows; ++i) {
    all.insert(all.end(), logits.begin(), logits.end());
    params.push_back({1.0f, 3, 0.6f, 0.0f, 1.0f, 0.0f, 0.0f, static_cast<float>(r.uniform()), 0, 0});
  }
  device_buffer dl(dtype::f32, rows * 5), raw(dtype::f32, rows * 5), tok(dtype::f32, rows), lp(dtype::f32, rows),
      none(dtype::f32, 1);
  dl.upload(all);
  void* dparams = nullptr;
  check_cuda(cudaMalloc(&dparams, params.size() * sizeof(kernels::sampling_row)), "cudaMalloc");
  check_cuda(cudaMemcpy(dparams, params.data(), params.size() * sizeof(kernels::sampling_row), cudaMemcpyHostToDevice), "params");
  kernels::sampling_params sp{dl.as<float>(), rows, 5, static_cast<const kernels::sampling_row*>(dparams),
                              none.as<std::int32_t>(), none.as<std::int32_t>(), raw.as<float>(), tok.as<std::int32_t>(),
                              lp.as<float>()};
  kernels::sample(sp, nullptr);
  check_launch("sample");
  cudaFree(dparams);
  std::vector<int> seen(5);
  for (const auto t : tok.download_ints()) ++seen[static_cast<std::size_t>(t)];
  CHECK(seen[0] > 0);
  CHECK(seen[1] > 0);
  CHECK(seen[2] + seen[3] + seen[4] == 0);
}

TEST_CASE("with the same uniforms the device draws tokens with the CPU sampler's frequencies") {
  // 4000 rows of one small distribution: the counts of each token against its probability.
  rng r(12);
  const std::int64_t vocab = 8, rows = 4000;
  const std::vector<float> base{1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -3.0f};
  std::vector<float> logits;
  std::vector<kernels::sampling_row> params;
  for (std::int64_t i = 0; i < rows; ++i) {
    logits.insert(logits.end(), base.begin(), base.end());
    params.push_back({1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, static_cast<float>(r.uniform()), 0, 0});
  }
  device_buffer dl(dtype::f32, rows * vocab), raw(dtype::f32, rows * vocab), tok(dtype::f32, rows), lp(dtype::f32, rows),
      none(dtype::f32, 1);
  dl.upload(logits);
  void* dparams = nullptr;
  check_cuda(cudaMalloc(&dparams, params.size() * sizeof(kernels::sampling_row)), "cudaMalloc");
  check_cuda(cudaMemcpy(dparams, params.data(), params.size() * sizeof(kernels::sampling_row), cudaMemcpyHostToDevice), "params");
  kernels::sampling_params sp{dl.as<float>(), rows, vocab, static_cast<const kernels::sampling_row*>(dparams),
                              none.as<std::int32_t>(), none.as<std::int32_t>(), raw.as<float>(), tok.as<std::int32_t>(),
                              lp.as<float>()};
  kernels::sample(sp, nullptr);
  check_launch("sample");
  cudaFree(dparams);
  std::vector<int> counts(static_cast<std::size_t>(vocab));
  for (const auto t : tok.download_ints()) ++counts[static_cast<std::size_t>(t)];
  double se = 0;
  for (const float x : base) se += std::exp(x);
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double expect = static_cast<double>(rows) * std::exp(base[i]) / se;
    CHECK(std::abs(counts[i] - expect) <= 5 * std::sqrt(expect) + 2); // five sigma
  }
}

TEST_CASE("a padded vocabulary: only the first vocab ids of rows row_stride apart are drawn") {
  // 8 ids the tokenizer spells, 4 padding rows holding by far the largest logits.
  const std::int64_t vocab = 8, stride = 12, per_mode = 40;
  const std::vector<float> base{1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 2.5f, -3.0f};
  const std::vector<float> padding{100.0f, 90.0f, 100.0f, 80.0f};
  const std::vector<kernels::sampling_row> modes{
      {0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0, 0},  // greedy
      {1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0, 0},  // temperature
      {1.0f, 3, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0, 0},  // top-k
      {1.0f, 0, 0.8f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0, 0},  // top-p
      {1.0f, 0, 1.0f, 0.1f, 1.0f, 0.0f, 0.0f, 0.0f, 0, 0},  // min-p
      {0.7f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.2f, 0.0f, 0, 2}}; // penalties on ids 9 (padding: ignored) and 4
  rng r(14);
  std::vector<float> logits;
  std::vector<kernels::sampling_row> params;
  for (const auto& m : modes)
    for (std::int64_t i = 0; i < per_mode; ++i) {
      logits.insert(logits.end(), base.begin(), base.end());
      logits.insert(logits.end(), padding.begin(), padding.end());
      params.push_back(m);
      params.back().uniform = static_cast<float>(r.uniform());
    }
  const auto rows = static_cast<std::int64_t>(params.size());
  device_buffer dl(dtype::f32, rows * stride), raw(dtype::f32, rows * stride), tok(dtype::f32, rows),
      lp(dtype::f32, rows), ptok(dtype::f32, 2), pcnt(dtype::f32, 2);
  dl.upload(logits);
  ptok.upload_ints({9, 4});
  pcnt.upload_ints({1, 1});
  void* dparams = nullptr;
  check_cuda(cudaMalloc(&dparams, params.size() * sizeof(kernels::sampling_row)), "cudaMalloc");
  check_cuda(cudaMemcpy(dparams, params.data(), params.size() * sizeof(kernels::sampling_row), cudaMemcpyHostToDevice), "params");
  kernels::sampling_params sp{dl.as<float>(), rows, vocab, static_cast<const kernels::sampling_row*>(dparams),
                              ptok.as<std::int32_t>(), pcnt.as<std::int32_t>(), raw.as<float>(), tok.as<std::int32_t>(),
                              lp.as<float>(), stride};
  kernels::sample(sp, nullptr);
  check_launch("sample");
  cudaFree(dparams);
  double se = 0;
  for (const float x : base) se += std::exp(x);
  const auto tokens = tok.download_ints();
  const auto logprobs = lp.download();
  for (std::int64_t i = 0; i < rows; ++i) {
    CAPTURE(i);
    const auto t = tokens[static_cast<std::size_t>(i)];
    REQUIRE(t >= 0);
    REQUIRE(t < vocab);
    if (i < per_mode) CHECK(t == 4); // greedy: the best of the first 8
    // Logprobs over the first 8 ids: the padding has probability 0.
    CHECK(std::abs(logprobs[static_cast<std::size_t>(i)] - (base[static_cast<std::size_t>(t)] - std::log(se))) < 1e-3);
  }
  // Nothing past a row's first 8 ids is touched.
  const auto after = dl.download();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = vocab; j < stride; ++j)
      CHECK(after[static_cast<std::size_t>(i * stride + j)] == padding[static_cast<std::size_t>(j - vocab)]);
}

auto main(int argc, char** argv) -> int {
  if (const int skip = gpu_test::device_or_skip(); skip != 0) return skip;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
