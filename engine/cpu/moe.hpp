#pragma once
// A mixture-of-experts MLP on the CPU. The router picks each token's
// experts; the batch's tokens are then grouped by expert, so each chosen
// expert's matrices are read once per step for all of its tokens (a
// matrix-matrix product over them), never once per token, and an expert no
// token chose is not read at all.
//
// Deterministic and bitwise batch-invariant: a token's routing depends on
// its own router logits only (ties break towards the lower expert index),
// every expert product is linear()'s (a row gives the same bits in any
// batch), and a token's output is the sum of its weighted experts' outputs
// in the router's order (largest weight first), as llama.cpp sums them.

#include "engine/model/model_weights.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

/// How a router's logits weigh the experts it picks.
enum class expert_gating : std::uint8_t {
  softmax_top_k, ///< softmax over all experts, their top k (Qwen3-MoE, Mixtral, OLMoE)
  top_k_softmax, ///< the top k logits, a softmax over those k (gpt-oss)
};

/// Each token's experts and their weights from its router logits [rows,
/// num_experts]: the `per_token` largest by `gating` (ties: the lower index
/// first), rescaled to sum to one when `normalize`. ids and weights receive
/// [rows, per_token], largest first.
void route_experts(const float* logits, std::int64_t rows, std::int64_t num_experts, std::int64_t per_token,
                   expert_gating gating, bool normalize, std::int32_t* ids, float* weights);

/// The MLP of a mixture-of-experts layer, with scratch kept across steps.
class moe_mlp {
public:
  /// out[t] = Σ over token t's experts e of weight · down_e(silu(gate_e · x) ⊙ (up_e · x)),
  /// x = xn[t], for num_tokens rows of hidden_size (gpt-oss: with its biases
  /// and clamped SwiGLU). out must not alias xn.
  void forward(const model_config& c, const expert_weights& w, const float* xn, std::int64_t num_tokens, float* out);

  /// The experts the last forward ran (distinct), for tests and metrics.
  auto experts_run() const -> std::int64_t { return experts_run_; }

private:
  std::vector<float> logits_, weights_, xg_, gate_, up_, y_, slots_;
  std::vector<std::int32_t> ids_, count_, start_, next_, order_;
  std::int64_t experts_run_ = 0;
};

} // namespace troupe
