#include "engine/model/config_fields.hpp"

#include <algorithm>
#include <functional>

namespace troupe::config_fields {

auto read_object(const std::filesystem::path& file, simdjson::padded_string& text, dom::parser& parser)
    -> dom::object {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) fail(file.string(), "file not found");
  if (simdjson::padded_string::load(file.string()).get(text) != simdjson::SUCCESS)
    fail(file.string(), "cannot read");
  dom::object root;
  dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) fail(file.string(), "not valid JSON");
  if (doc.get_object().get(root) != simdjson::SUCCESS) fail(file.string(), "not a JSON object");
  return root;
}

namespace {

auto read_numbers(const field_reader& r, std::string_view key) -> std::vector<double> {
  const auto e = r.find(key);
  if (!e) r.bad(key, "is missing");
  dom::array list;
  if (e->get_array().get(list) != simdjson::SUCCESS) r.bad(key, "must be a list of numbers");
  std::vector<double> out;
  for (const auto x : list) {
    double v = 0;
    if (x.get_double().get(v) != simdjson::SUCCESS) r.bad(key, "must be a list of numbers");
    out.push_back(v);
  }
  return out;
}

} // namespace

void read_rope_scaling(const std::string& file, const field_reader& config, rope_scaling_config& out) {
  const auto e = config.find("rope_scaling");
  if (!e) return;
  dom::object obj;
  if (e->get_object().get(obj) != simdjson::SUCCESS) config.bad("rope_scaling", "must be an object or null");
  const field_reader r(file, obj, "rope_scaling.");
  // transformers >= 4.43 writes "rope_type"; older configs "type".
  auto type = r.string("rope_type");
  if (!type) type = r.string("type");
  if (!type) fail(file, "missing field 'rope_scaling.rope_type'");
  if (*type == "default") return; // transformers' name for "no scaling"
  out.type = *type;
  // Phi-3's configuration renames its first names for LongRoPE ("su", and
  // "yarn" with short and long factors) to "longrope".
  if (out.type == "su" || (out.type == "yarn" && r.find("short_factor"))) out.type = "longrope";
  if (out.type == "llama3") {
    out.factor = r.required(r.number("factor"), "factor");
    out.low_freq_factor = r.required(r.number("low_freq_factor"), "low_freq_factor");
    out.high_freq_factor = r.required(r.number("high_freq_factor"), "high_freq_factor");
    out.original_max_position_embeddings =
        r.required(r.int64("original_max_position_embeddings"), "original_max_position_embeddings");
  } else if (out.type == "linear" || out.type == "dynamic") {
    out.factor = r.required(r.number("factor"), "factor");
    // transformers' dynamic NTK ignores rope_scaling.original_max_position_embeddings
    // and uses max_position_embeddings: a different value would be ambiguous.
    if (out.type == "dynamic" && r.find("original_max_position_embeddings"))
      fail(file, "rope_scaling.original_max_position_embeddings is not supported with dynamic scaling");
  } else if (out.type == "yarn") {
    out.factor = r.required(r.number("factor"), "factor");
    out.attention_factor = r.number("attention_factor").value_or(0.0);
    out.beta_fast = r.number("beta_fast").value_or(32.0);
    out.beta_slow = r.number("beta_slow").value_or(1.0);
    out.original_max_position_embeddings = r.int64("original_max_position_embeddings").value_or(0);
    for (const auto key : {"mscale", "mscale_all_dim"})
      if (r.find(key)) fail(file, "rope_scaling." + std::string(key) + " is not supported");
    // transformers' default rounds the correction range outwards; gpt-oss
    // does not (truncate false).
    out.truncate = r.boolean("truncate").value_or(true);
  } else if (out.type == "longrope") {
    out.short_factor = read_numbers(r, "short_factor");
    out.long_factor = read_numbers(r, "long_factor");
    out.factor = r.number("factor").value_or(0.0);
    out.attention_factor = r.number("attention_factor").value_or(0.0);
    out.original_max_position_embeddings = r.int64("original_max_position_embeddings").value_or(0);
  }
  // Other types are rejected by validate() with the list of supported ones.
}

void refuse_unimplemented(const std::string& file, const field_reader& r, model_family family) {
  const auto refuse = [&](std::string_view key, const std::string& why) {
    fail(file, "field '" + std::string(key) + "' " + why + " is not supported");
  };
  const bool gpt_oss = family == model_family::gpt_oss;
  // gpt-oss has q/k/v/o biases, and its official checkpoints' experts are MXFP4 (read_experts).
  if (!gpt_oss && r.boolean("attention_bias").value_or(false)) refuse("attention_bias", "true");
  if (r.boolean("mlp_bias").value_or(false)) refuse("mlp_bias", "true");
  if (!gpt_oss && r.find("quantization_config")) refuse("quantization_config", "(a quantized checkpoint)");
  if (const auto f = r.number("partial_rotary_factor"); f && *f != 1.0)
    refuse("partial_rotary_factor", format_number(*f));
  if (r.boolean("use_sliding_window").value_or(false)) refuse("use_sliding_window", "true");
  if (r.boolean("use_bidirectional_attention").value_or(false)) refuse("use_bidirectional_attention", "true");
  if (family != model_family::gemma2 && family != model_family::gemma3) {
    for (const auto key : {"attn_logit_softcapping", "final_logit_softcapping"})
      if (r.find(key)) refuse(key, "outside Gemma");
  }
}

void read_layer_types(const field_reader& r, model_config& c, const std::function<bool(std::size_t)>& sliding) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(c.num_hidden_layers, 0));
  c.sliding_layers.assign(n, false);
  const auto types = r.find("layer_types");
  if (!types) {
    for (std::size_t i = 0; i < n; ++i) c.sliding_layers[i] = sliding(i);
    return;
  }
  dom::array list;
  if (types->get_array().get(list) != simdjson::SUCCESS || list.size() != n)
    r.bad("layer_types", "must list num_hidden_layers layer types");
  std::size_t i = 0;
  for (const auto x : list) {
    std::string_view t;
    if (x.get_string().get(t) != simdjson::SUCCESS || (t != "sliding_attention" && t != "full_attention"))
      r.bad("layer_types", "must hold \"sliding_attention\" or \"full_attention\"");
    c.sliding_layers[i++] = t == "sliding_attention";
  }
}

void read_gemma(const field_reader& r, model_config& c) {
  // Absent fields take Gemma2Config's / Gemma3TextConfig's defaults.
  const bool gemma2 = c.family() == model_family::gemma2;
  const auto or_default = [&](std::string_view key, double fallback) {
    return r.present(key) ? r.number(key).value_or(0.0) : fallback;
  };
  c.query_pre_attn_scalar = r.number("query_pre_attn_scalar").value_or(256.0);
  c.attn_logit_softcapping = or_default("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
  c.final_logit_softcapping = or_default("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  c.sliding_window = r.present("sliding_window") ? r.int64("sliding_window").value_or(0) : 4096;
  if (c.family() == model_family::gemma2) {
    read_layer_types(r, c, [](std::size_t i) { return i % 2 == 0; }); // Gemma 2: even layers slide
  } else {
    // Gemma 3: every sliding_window_pattern-th layer is global.
    const auto pattern = r.int64("sliding_window_pattern").value_or(6);
    if (pattern <= 0) r.bad("sliding_window_pattern", "must be positive");
    read_layer_types(r, c, [&](std::size_t i) { return (static_cast<std::int64_t>(i) + 1) % pattern != 0; });
  }
  if (c.family() == model_family::gemma3) c.rope_local_base_freq = r.number("rope_local_base_freq").value_or(10000.0);
}

// gpt-oss: alternating sliding layers (layer_types), its clamped SwiGLU, and
// MXFP4 experts where quantization_config says so.
void read_gpt_oss(const field_reader& r, model_config& c) {
  if (!r.boolean("attention_bias").value_or(true)) r.bad("attention_bias", "false is not gpt-oss");
  c.sliding_window = r.int64("sliding_window").value_or(128);
  read_layer_types(r, c, [](std::size_t i) { return i % 2 == 0; });
  c.swiglu_limit = r.number("swiglu_limit").value_or(7.0);
  if (const auto q = r.find("quantization_config")) {
    dom::object obj;
    std::string_view method;
    if (q->get_object().get(obj) != simdjson::SUCCESS || obj["quant_method"].get_string().get(method) != simdjson::SUCCESS ||
        method != "mxfp4")
      r.bad("quantization_config", "is not gpt-oss's {\"quant_method\": \"mxfp4\"}");
    c.mxfp4_experts = true;
  }
}

void read_experts(const field_reader& r, std::string_view experts_key, model_config& c) {
  if (c.family() == model_family::gpt_oss) {
    c.num_experts = r.int64(experts_key).value_or(128);
    c.num_experts_per_tok = r.int64("num_experts_per_tok").value_or(r.int64("experts_per_token").value_or(4));
    c.moe_intermediate_size = c.intermediate_size;
    return read_gpt_oss(r, c);
  }
  // Qwen3MoeConfig's, MixtralConfig's and OlmoeConfig's defaults.
  const bool mixtral = c.architecture == "MixtralForCausalLM", qwen = c.architecture == "Qwen3MoeForCausalLM";
  c.num_experts = r.int64(experts_key).value_or(mixtral ? 8 : qwen ? 128 : 64);
  c.num_experts_per_tok = r.int64("num_experts_per_tok").value_or(mixtral ? 2 : 8);
  c.moe_intermediate_size = qwen ? r.int64("moe_intermediate_size").value_or(768) : c.intermediate_size;
  c.norm_topk_prob = mixtral || r.boolean("norm_topk_prob").value_or(false);
  if (qwen) {
    // Every layer sparse: Qwen3-MoE's published checkpoints.
    if (const auto step = r.int64("decoder_sparse_step"); step && *step != 1)
      r.bad("decoder_sparse_step", "is " + std::to_string(*step) + ": dense layers among the expert layers are not supported");
    if (const auto dense = r.find("mlp_only_layers")) {
      dom::array list;
      if (dense->get_array().get(list) != simdjson::SUCCESS || list.size() != 0)
        r.bad("mlp_only_layers", "lists dense layers among the expert layers, which are not supported");
    }
  }
  if (r.find("clip_qkv")) r.bad("clip_qkv", "(clamping q, k and v) is not supported");
  for (const auto key : {"shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts"})
    if (const auto n = r.int64(key); n && *n > 0) r.bad(key, "(shared experts) is not supported");
}

} // namespace troupe::config_fields
