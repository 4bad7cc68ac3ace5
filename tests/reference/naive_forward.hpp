#pragma once
// An independent reference Llama forward: double precision, no KV cache, the
// whole sequence recomputed, loops straight from the paper's equations. It
// shares no code with the engine's backend beyond reading weights.

#include "engine/model/model_weights.hpp"
#include "base/types.hpp"

#include <span>
#include <vector>

namespace troupe::reference {

/// Logits of every position of `tokens`: [tokens.size(), vocab], row-major.
auto naive_forward(const model_weights& w, std::span<const token_id> tokens) -> std::vector<double>;

} // namespace troupe::reference
