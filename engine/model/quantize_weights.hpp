#pragma once
// Quantize on load (engine.weight_dtype): a float checkpoint's matrices
// turned into ggml blocks at start-up, so a Hugging Face directory runs the
// quantized kernels as the GGUF file of that type would.

#include "engine/formats/gguf.hpp"
#include "engine/model/model_weights.hpp"

namespace troupe {

/// Replaces every F32/F16/BF16 matrix of w (the attention and MLP
/// projections, the embedding and the head) by a copy in `type` (Q8_0 or
/// Q4_K; gguf::quantize_row, deterministic), owned by w.storage; matrices
/// already quantized and the norm vectors stay. As llama-quantize does, a
/// Q4_K matrix whose rows are not whole 256-value blocks takes Q8_0. Throws
/// model_error naming the first matrix whose rows are not whole blocks.
void quantize_weights(model_weights& w, gguf::tensor_type type);

} // namespace troupe
