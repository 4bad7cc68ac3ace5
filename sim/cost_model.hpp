#pragma once
// What a step costs, in place of running it: the simulator's executor.
//
// roofline: the step takes the longer of its FLOPs at the hardware's peak
// and its bytes (weights once, plus the KV it reads and writes) at the
// memory bandwidth, plus a fixed overhead. calibrated: a non-negative
// linear model over the step's features, fitted by least squares to the
// steps a real server logged (`troupe serve --step-log`), plus the mean gap
// the server left between back-to-back steps.

#include "engine/core/scheduler_output.hpp"
#include "sim/scenario.hpp"

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace troupe::sim {

/// What a step's cost depends on, from its scheduler_output.
struct step_features {
  double tokens = 0;           ///< computed this step
  double seqs = 0;             ///< chunks
  double decode_context = 0;   ///< KV positions read by decode tokens
  double prefill_pairs = 0;    ///< (query, key) pairs of the prefill chunks' attention
  double swapped_blocks = 0;   ///< blocks copied to or from host memory
};
/// Adds one chunk: num_tokens tokens from position num_computed; `sample`:
/// it asks for a token (a one-token sampled chunk is a decode).
inline void add_chunk(step_features& f, std::int64_t num_computed, std::int64_t num_tokens, bool sample) {
  const auto n = static_cast<double>(num_tokens), p = static_cast<double>(num_computed);
  f.tokens += n;
  f.seqs += 1;
  if (num_tokens == 1 && sample) f.decode_context += p + 1;
  else f.prefill_pairs += n * p + n * (n + 1) / 2;
}
auto features_of(const scheduler_output& step) -> step_features;

/// The weights of a model of this shape: attention, MLP (every expert), the embedding.
auto parameter_count(const model_shape& m) -> double;
/// The weights one token multiplies: its experts' alone where the model has experts.
auto active_parameter_count(const model_shape& m) -> double;

class cost_model {
public:
  virtual ~cost_model() = default;
  virtual auto step_seconds(const step_features& f) const -> double = 0;
  virtual auto describe() const -> std::string = 0;
};

class roofline_cost final : public cost_model {
public:
  roofline_cost(const model_shape& m, const hardware_spec& h, std::int32_t block_size);
  auto step_seconds(const step_features& f) const -> double override;
  auto describe() const -> std::string override;

private:
  hardware_spec h_;
  double params_ = 0;        ///< per token: the matmuls' weights (lm_head included; a token's experts)
  double weight_bytes_ = 0;  ///< read once per step (but for the experts)
  /// A mixture of experts: the step reads each distinct expert its tokens
  /// chose once (expected_distinct_experts), expert_bytes_ each, per layer.
  std::int64_t experts_ = 0, experts_per_token_ = 0;
  double expert_bytes_ = 0, layers_ = 0;
  double pair_flops_ = 0;    ///< attention FLOPs per (query, key) pair over every layer
  double kv_per_token_ = 0;  ///< bytes of K and V over every layer
  double block_bytes_ = 0;
};

/// One logged step: its features and measured duration.
struct logged_step {
  step_features features;
  double start = 0; ///< seconds since the replica started
  double seconds = 0;
};

class calibrated_cost final : public cost_model {
public:
  /// Fits to the steps (at least as many as there are coefficients).
  explicit calibrated_cost(const std::vector<logged_step>& steps);
  auto step_seconds(const step_features& f) const -> double override;
  auto describe() const -> std::string override;
  /// The fit's mean absolute error over its own steps, relative to their mean duration.
  auto relative_error() const -> double { return relative_error_; }

  /// 1, tokens, seqs, decode_context, prefill_pairs, whether the step has
  /// more than one token (a CPU backend's matrix-vector path makes a
  /// one-token step markedly cheaper than a two-token one), swapped blocks.
  /// A term constant over the log (besides the first) is left out.
  static constexpr std::size_t k_terms = 7;
private:
  std::array<double, k_terms> coef_{};
  double gap_ = 0; ///< between steps
  double relative_error_ = 0;
};

/// The steps of a `troupe serve --step-log` file: of its lines, those
/// reading `step <start s> <duration s> <swapped blocks> <chunk>...`, a
/// chunk being `<id>/<computed>/<tokens>/<sample 0|1>`. Throws
/// scenario_error naming the line of a malformed one.
auto read_step_log(const std::filesystem::path& file) -> std::vector<logged_step>;

/// The scenario's cost model.
auto make_cost_model(const scenario& sc) -> std::unique_ptr<cost_model>;

} // namespace troupe::sim
