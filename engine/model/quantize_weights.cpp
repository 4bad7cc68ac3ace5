#include "engine/model/quantize_weights.hpp"

#include "engine/formats/gguf_quant.hpp"
#include "engine/formats/model_error.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

void quantize_weights(model_weights& w, gguf::tensor_type type) {
  const auto traits = gguf::traits(static_cast<std::uint32_t>(type));
  if (!traits || !gguf::can_quantize(type))
    throw model_error("engine.weight_dtype: troupe does not quantize to " + std::string(gguf::type_name(type)));
  std::vector<std::pair<std::string, weight_tensor*>> matrices{{"the embedding", &w.embed}};
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const auto at = " of layer " + std::to_string(i);
    for (const auto& [name, t] : {std::pair{"q_proj", &l.wq}, {"k_proj", &l.wk}, {"v_proj", &l.wv}, {"o_proj", &l.wo},
                                  {"gate_proj", &l.w_gate}, {"up_proj", &l.w_up}, {"down_proj", &l.w_down}})
      if (t->data != nullptr) matrices.emplace_back(name + at, t);
    // The experts, not their router (llama-quantize keeps it in F32 too).
    for (std::size_t e = 0; e < l.experts.gate.size(); ++e)
      for (const auto& [name, t] : {std::pair{"gate_proj", &l.experts.gate[e]}, {"up_proj", &l.experts.up[e]},
                                    {"down_proj", &l.experts.down[e]}})
        matrices.emplace_back("expert " + std::to_string(e) + "'s " + name + at, t);
  }
  const bool tied = w.lm_head.data == w.embed.data;
  if (!tied) matrices.emplace_back("lm_head", &w.lm_head);
  // A view shared by two fields (Phi-3's fused rows) is quantized once per
  // field: each field's rows are whole rows of the fused matrix.
  for (auto& [name, t] : matrices) {
    if (t->quant) continue;
    if (t->layout != weight_layout::row_major)
      throw model_error("engine.weight_dtype: " + name + " is already packed for the float kernels");
    // As llama-quantize does, a matrix whose rows are not whole K-quant
    // blocks (256 values) takes Q8_0 instead.
    auto as = type;
    if (type == gguf::tensor_type::q4_k && t->cols % traits->block_elements != 0 && t->cols % 32 == 0)
      as = gguf::tensor_type::q8_0;
    const auto block = gguf::traits(static_cast<std::uint32_t>(as))->block_elements;
    if (t->cols % block != 0)
      throw model_error("engine.weight_dtype " + std::string(traits->name) + ": " + name + " has rows of " +
                        std::to_string(t->cols) + " values, not whole blocks of " +
                        std::to_string(block));
    weight_tensor q;
    q.type = t->type; // the type it was quantized from (Gemma's embedding scale is rounded to it)
    q.quant = as;
    q.rows = t->rows;
    q.cols = t->cols;
    const auto row_bytes = q.row_bytes();
    auto bytes = std::shared_ptr<std::byte[]>(new std::byte[static_cast<std::size_t>(q.rows * row_bytes)]);
    const weight_tensor src = *t;
#pragma omp parallel
    {
      std::vector<float> row(static_cast<std::size_t>(src.cols));
#pragma omp for schedule(static)
      for (std::int64_t r = 0; r < src.rows; ++r) {
        for (std::int64_t c = 0; c < src.cols; ++c)
          row[static_cast<std::size_t>(c)] = load_as_f32(src.type, src.row(r), static_cast<std::size_t>(c));
        gguf::quantize_row(as, row.data(), bytes.get() + r * row_bytes, src.cols);
      }
    }
    q.data = bytes.get();
    w.storage.push_back(std::move(bytes));
    *t = q;
  }
  if (tied) w.lm_head = w.embed;
}

} // namespace troupe
