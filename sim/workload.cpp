#include "sim/workload.hpp"

#include "sim/trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace troupe::sim {
namespace {

// ShareGPT-like token counts as (quantile, tokens), interpolated
// log-linearly: chat prompts with a long tail, answers of a few hundred
// tokens (the shape of the ShareGPT conversations serving papers benchmark on).
constexpr std::array<std::pair<double, double>, 9> k_sharegpt_prompt = {
    {{0.0, 4}, {0.1, 14}, {0.25, 40}, {0.5, 110}, {0.75, 300}, {0.9, 650}, {0.95, 1000}, {0.99, 1800}, {1.0, 4000}}};
constexpr std::array<std::pair<double, double>, 9> k_sharegpt_output = {
    {{0.0, 1}, {0.1, 20}, {0.25, 60}, {0.5, 170}, {0.75, 330}, {0.9, 520}, {0.95, 680}, {0.99, 1000}, {1.0, 2000}}};

template <std::size_t N>
auto from_quantiles(const std::array<std::pair<double, double>, N>& q, double u) -> double {
  for (std::size_t i = 1; i < N; ++i)
    if (u <= q[i].first) {
      const double f = (u - q[i - 1].first) / (q[i].first - q[i - 1].first);
      return std::exp(std::log(q[i - 1].second) + f * (std::log(q[i].second) - std::log(q[i - 1].second)));
    }
  return q[N - 1].second;
}

auto clamp_len(double x, const length_dist& d) -> std::int64_t {
  const auto n = static_cast<std::int64_t>(std::llround(std::min(x, 1e15)));
  return std::clamp(n, d.min, d.max);
}

} // namespace

length_sampler::length_sampler(const length_dist& d) : d_(d) {
  if (d.type != length_dist::kind::zipf) return;
  double sum = 0;
  for (std::int64_t n = d.min; n <= d.max; ++n) cdf_.push_back(sum += std::pow(static_cast<double>(n), -d.s));
  for (auto& c : cdf_) c /= sum;
}

auto length_sampler::operator()(rng& g) const -> std::int64_t {
  switch (d_.type) {
    case length_dist::kind::fixed: return std::clamp(d_.value, d_.min, d_.max);
    case length_dist::kind::uniform:
      return d_.min + static_cast<std::int64_t>(g.next() % static_cast<std::uint64_t>(d_.max - d_.min + 1));
    case length_dist::kind::lognormal: return clamp_len(d_.median * std::exp(d_.sigma * g.normal()), d_);
    case length_dist::kind::zipf: {
      const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), g.uniform());
      return d_.min + std::min<std::int64_t>(it - cdf_.begin(), static_cast<std::int64_t>(cdf_.size()) - 1);
    }
    case length_dist::kind::sharegpt_prompt: return clamp_len(from_quantiles(k_sharegpt_prompt, g.uniform()), d_);
    case length_dist::kind::sharegpt_output: return clamp_len(from_quantiles(k_sharegpt_output, g.uniform()), d_);
  }
  return 1;
}

workload::workload(const scenario& sc)
  : sc_(sc), g_(sc.seed), prompt_(sc.prompt), output_(sc.output), turns_(sc.turns) {
  double sum = 0;
  for (const auto& t : sc.tenants) {
    tenant_cdf_.push_back(sum += t.share);
    tenant_names_.push_back(t.name);
    tenant_priority_.push_back(t.priority);
  }
  if (sc.process == "trace") {
    trace_options o;
    o.format = sc.trace_format;
    o.time_scale = sc.time_scale;
    o.max_rows = sc.max_rows;
    o.block_tokens = sc.trace_block_tokens;
    o.prefix_tokens = sc.prefix_tokens;
    auto t = read_trace(sc.trace, o, tenant_names_);
    tenant_priority_.resize(tenant_names_.size(), 0);
    trace_ = std::move(t.requests);
    trace_blocks_ = std::move(t.blocks);
    trace_format_ = t.format;
    trace_skipped_ = t.skipped;
    total_ = static_cast<std::int64_t>(trace_.size());
  } else {
    total_ = sc.num_requests;
  }
}

auto workload::draw(std::int64_t index) -> sim_request {
  sim_request r;
  r.index = index;
  if (sc_.process == "poisson") t_ += g_.exponential() / sc_.rate;
  else if (sc_.process == "gamma") t_ += g_.gamma(1.0 / (sc_.cv * sc_.cv)) * sc_.cv * sc_.cv / sc_.rate;
  else if (sc_.process == "constant") t_ += 1.0 / sc_.rate;
  r.arrival_s = t_;
  r.prompt_tokens = static_cast<std::int32_t>(prompt_(g_));
  r.output_tokens = static_cast<std::int32_t>(output_(g_));
  const double u = g_.uniform() * tenant_cdf_.back();
  r.tenant = static_cast<std::int32_t>(std::upper_bound(tenant_cdf_.begin(), tenant_cdf_.end(), u) - tenant_cdf_.begin());
  r.tenant = std::min<std::int32_t>(r.tenant, static_cast<std::int32_t>(tenant_cdf_.size()) - 1);
  r.priority = tenant_priority_[static_cast<std::size_t>(r.tenant)];
  if (sc_.prefix_groups > 0 && sc_.prefix_tokens > 0 && g_.uniform() < sc_.prefix_fraction) {
    r.prefix_group = static_cast<std::int32_t>(g_.next() % static_cast<std::uint64_t>(sc_.prefix_groups));
    // The group's prefix comes on top of the drawn prompt.
    r.prefix_tokens = sc_.prefix_tokens;
    r.prompt_tokens += sc_.prefix_tokens;
  }
  r.turns = static_cast<std::int32_t>(turns_(g_));
  if (r.turns > 1) r.conversation = index;
  return r;
}

auto workload::follow_up(const sim_request& prev, double finish_s, std::int64_t index,
                         std::vector<token_id>& history) const -> sim_request {
  rng g(sc_.seed ^ (0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(prev.conversation) + 1)) ^
        (static_cast<std::uint64_t>(prev.turn) << 48));
  sim_request r = prev;
  r.index = index;
  r.turn = prev.turn + 1;
  r.arrival_s = finish_s + (sc_.think_s > 0 ? g.exponential() * sc_.think_s : 0.0);
  const auto message = static_cast<std::int32_t>(prompt_(g));
  r.output_tokens = static_cast<std::int32_t>(output_(g));
  const auto base = history.size();
  history.resize(base + static_cast<std::size_t>(message));
  for (std::int32_t i = 0; i < message; ++i)
    history[base + static_cast<std::size_t>(i)] =
        token_at(sc_.seed, message_stream + static_cast<std::uint64_t>(index), static_cast<std::uint64_t>(i),
                 sc_.cost.model.vocab);
  r.prompt_tokens = static_cast<std::int32_t>(history.size());
  return r;
}

auto workload::next() -> std::optional<sim_request> {
  if (issued_ >= total_) return std::nullopt;
  const auto i = issued_++;
  if (!trace_.empty()) return trace_[static_cast<std::size_t>(i)];
  return draw(i);
}

void workload::prompt_of(const sim_request& r, std::vector<token_id>& out) const {
  out.resize(static_cast<std::size_t>(r.prompt_tokens));
  const auto vocab = sc_.cost.model.vocab;
  if (!trace_blocks_.empty()) { // Mooncake: block b's tokens from its hash id's stream
    const auto& ids = trace_blocks_[static_cast<std::size_t>(r.index)];
    const auto n = static_cast<std::size_t>(sc_.trace_block_tokens);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = token_at(sc_.seed, hash_stream + ids[i / n], i % n, vocab);
    return;
  }
  const auto shared = static_cast<std::size_t>(std::clamp(r.prefix_tokens, 0, r.prompt_tokens));
  // Two plain loops (the group's prefix, then its own tokens): they vectorise.
  const std::uint64_t group = 1 + static_cast<std::uint64_t>(r.prefix_group);
  for (std::size_t i = 0; i < shared; ++i) out[i] = token_at(sc_.seed, group, i, vocab);
  const std::uint64_t own = prompt_stream + static_cast<std::uint64_t>(r.index);
  for (std::size_t i = shared; i < out.size(); ++i) out[i] = token_at(sc_.seed, own, i, vocab);
}

} // namespace troupe::sim
