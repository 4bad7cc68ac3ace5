#include "engine/model/model_config.hpp"

#include "engine/model/config_fields.hpp"
#include "engine/model/gguf_model.hpp"
#include "base/json_text.hpp"
#include "engine/formats/model_error.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>

namespace troupe {

using namespace config_fields;

namespace {

struct architecture_entry {
  std::string_view name;
  model_family family;
  std::string_view model_type; ///< written by save()
  std::string_view experts_key = {}; ///< a mixture of experts' name for the expert count
};

constexpr std::array architectures = {
    architecture_entry{"LlamaForCausalLM", model_family::llama, "llama"},
    architecture_entry{"MistralForCausalLM", model_family::llama, "mistral"},
    architecture_entry{"Qwen2ForCausalLM", model_family::qwen2, "qwen2"},
    architecture_entry{"Qwen3ForCausalLM", model_family::qwen3, "qwen3"},
    architecture_entry{"Gemma2ForCausalLM", model_family::gemma2, "gemma2"},
    architecture_entry{"Gemma3ForCausalLM", model_family::gemma3, "gemma3_text"},
    architecture_entry{"Phi3ForCausalLM", model_family::phi3, "phi3"},
    architecture_entry{"Qwen3MoeForCausalLM", model_family::qwen3, "qwen3_moe", "num_experts"},
    architecture_entry{"MixtralForCausalLM", model_family::llama, "mixtral", "num_local_experts"},
    architecture_entry{"OlmoeForCausalLM", model_family::olmoe, "olmoe", "num_experts"},
    architecture_entry{"GptOssForCausalLM", model_family::gpt_oss, "gpt_oss", "num_local_experts"},
};

auto find_architecture(std::string_view name) -> const architecture_entry* {
  for (const auto& a : architectures)
    if (a.name == name) return &a;
  return nullptr;
}

void check_positive(const std::string& file, std::string_view field, double v) {
  if (!(v > 0) || !std::isfinite(v))
    fail(file, "field '" + std::string(field) + "' must be positive, got " + format_number(v));
}

void check_token(const std::string& file, std::string_view field, token_id id, std::int64_t vocab_size) {
  if (id < 0 || id >= vocab_size)
    fail(file, std::string(field) + " " + std::to_string(id) + " is outside the vocabulary (vocab_size " +
                   std::to_string(vocab_size) + ")");
}

void append_field(std::string& out, std::string_view key) {
  out += out.size() > 1 ? ",\n  " : "\n  ";
  json_text::append_string(out, key);
  out += ": ";
}

void append_token_ids(std::string& out, std::string_view key, const std::vector<token_id>& ids) {
  append_field(out, key);
  if (ids.size() == 1) {
    json_text::append_number(out, ids[0]);
    return;
  }
  out += '[';
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    json_text::append_number(out, ids[i]);
  }
  out += ']';
}

void write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) fail(file.string(), "cannot write");
}

// The first of "architectures".
auto read_architecture(const std::string& file, const field_reader& root) -> std::string {
  const auto archs = root.find("architectures");
  if (!archs) fail(file, "missing field 'architectures'");
  dom::array arch_list;
  std::string_view arch;
  if (archs->get_array().get(arch_list) != simdjson::SUCCESS ||
      arch_list.at(0).get_string().get(arch) != simdjson::SUCCESS)
    root.bad("architectures", "must be a non-empty list of strings");
  return std::string(arch);
}

// The sizes, the context length, the norm's epsilon and the RoPE base.
void read_dimensions(const std::string& file, const field_reader& r, model_family family, model_config& c) {
  c.vocab_size = r.required(r.int64("vocab_size"), "vocab_size");
  c.hidden_size = r.required(r.int64("hidden_size"), "hidden_size");
  c.intermediate_size = r.required(r.int64("intermediate_size"), "intermediate_size");
  c.num_hidden_layers = r.required(r.int64("num_hidden_layers"), "num_hidden_layers");
  c.num_attention_heads = r.required(r.int64("num_attention_heads"), "num_attention_heads");
  c.num_key_value_heads = r.int64("num_key_value_heads").value_or(c.num_attention_heads);
  if (const auto head_dim = r.int64("head_dim")) {
    c.head_dim = *head_dim;
  } else if (c.num_attention_heads > 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(file, "hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
                     std::to_string(c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.max_position_embeddings = r.int64("max_position_embeddings").value_or(c.max_position_embeddings);
  // Where a family's transformers config has another default.
  c.rms_norm_eps = r.number("rms_norm_eps").value_or(family == model_family::phi3 ? 1e-5 : c.rms_norm_eps);
  c.rope_theta = r.number("rope_theta").value_or(family == model_family::gemma3 ? 1000000.0 : c.rope_theta);
}

// "rope_scaling", with what YaRN and longrope take from the other fields.
void read_rope(const std::string& file, const field_reader& r, model_config& c) {
  read_rope_scaling(file, r, c.rope_scaling);
  auto& rs = c.rope_scaling;
  if (rs.type == "yarn" && rs.original_max_position_embeddings == 0)
    rs.original_max_position_embeddings = c.max_position_embeddings;
  if (rs.type == "longrope") {
    // Phi-3 keeps original_max_position_embeddings at the top level; the
    // factor is then max_position_embeddings over it (transformers).
    if (const auto orig = r.int64("original_max_position_embeddings")) {
      rs.original_max_position_embeddings = *orig;
      rs.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(*orig);
    } else if (rs.original_max_position_embeddings == 0) {
      rs.original_max_position_embeddings = c.max_position_embeddings;
    }
    if (rs.factor == 0.0) rs.factor = 1.0;
  }
}

// The tied head, the activation and the sliding window, by family.
void read_family_fields(const field_reader& r, model_family family, model_config& c) {
  const bool gemma = family == model_family::gemma2 || family == model_family::gemma3;
  // Gemma ties its head by default; its MLP reads hidden_activation.
  c.tie_word_embeddings = r.boolean("tie_word_embeddings").value_or(gemma);
  if (gemma) {
    c.hidden_act = r.string("hidden_activation").value_or(r.string("hidden_act").value_or("gelu_pytorch_tanh"));
    read_gemma(r, c);
  } else {
    c.hidden_act = r.string("hidden_act").value_or("silu");
    // Mistral, Mixtral and Phi-3 slide on every layer; Llama has no window.
    if (c.architecture == "MistralForCausalLM" || c.architecture == "MixtralForCausalLM" ||
        family == model_family::phi3) {
      // MistralConfig's default window is 4096; null means none.
      const bool mistral_default = c.architecture == "MistralForCausalLM" && !r.present("sliding_window");
      c.sliding_window = mistral_default ? 4096 : r.int64("sliding_window").value_or(0);
    }
  }
}

// generation_config.json's token ids and sampling defaults, into c.
void read_generation_config(const std::filesystem::path& gen_path, model_config& c) {
  const auto gen_file = gen_path.string();
  simdjson::padded_string gen_text;
  dom::parser gen_parser;
  const field_reader g(gen_file, read_object(gen_path, gen_text, gen_parser));
  if (const auto bos = g.token_id_field("bos_token_id")) c.bos_token_id = bos;
  if (auto eos = g.token_ids("eos_token_id")) c.eos_token_ids = std::move(*eos);
  // As vLLM does, sampling defaults apply whether or not do_sample is set.
  if (const auto t = g.number("temperature")) c.default_temperature = static_cast<float>(*t);
  if (const auto p = g.number("top_p")) c.default_top_p = static_cast<float>(*p);
  if (const auto k = g.int64("top_k")) {
    if (*k < -1 || *k > std::numeric_limits<std::int32_t>::max()) g.bad("top_k", "must be -1 or more");
    c.default_top_k = static_cast<std::int32_t>(*k);
  }
  if (const auto m = g.number("min_p")) {
    if (!(*m >= 0 && *m <= 1)) g.bad("min_p", "must be between 0 and 1");
    c.default_min_p = static_cast<float>(*m);
  }
  if (const auto r = g.number("repetition_penalty")) {
    if (!(*r > 0)) g.bad("repetition_penalty", "must be greater than 0");
    c.default_repetition_penalty = static_cast<float>(*r);
  }
  if (const auto n = g.int64("max_new_tokens")) {
    if (*n < 1 || *n > std::numeric_limits<std::int32_t>::max()) g.bad("max_new_tokens", "must be 1 or more");
    c.default_max_tokens = static_cast<std::int32_t>(*n);
  }
  c.validate(gen_file); // config.json passed above, so a failure here is this file's
}

} // namespace

auto model_config::load(const std::filesystem::path& dir) -> model_config {
  if (gguf::is_gguf_file(dir)) return gguf_model_config(*gguf::file::open(dir));
  const auto config_path = dir / "config.json";
  const auto file = config_path.string();
  simdjson::padded_string text;
  dom::parser parser;
  const field_reader root(file, read_object(config_path, text, parser));

  model_config c;
  c.architecture = read_architecture(file, root);
  const auto* entry = find_architecture(c.architecture);
  if (entry == nullptr)
    fail(file, "unsupported architecture '" + c.architecture + "' (supported: " + supported_architectures() + ")");
  // Gemma 3 may nest the language model's fields in "text_config".
  std::optional<field_reader> nested;
  if (const auto tc = root.find("text_config")) {
    dom::object obj;
    if (tc->get_object().get(obj) != simdjson::SUCCESS) root.bad("text_config", "must be an object");
    nested.emplace(file, obj, "text_config.");
  }
  const field_reader& r = nested ? *nested : root;
  refuse_unimplemented(file, r, entry->family);
  if (nested) refuse_unimplemented(file, root, entry->family);
  read_dimensions(file, r, entry->family, c);
  read_rope(file, r, c);
  read_family_fields(r, entry->family, c);
  if (!entry->experts_key.empty()) read_experts(r, entry->experts_key, c);
  // transformers >= 4.56 writes "dtype" instead of "torch_dtype".
  c.torch_dtype = r.string("torch_dtype").value_or(
      r.string("dtype").value_or(root.string("torch_dtype").value_or(root.string("dtype").value_or(c.torch_dtype))));
  c.bos_token_id = r.token_id_field("bos_token_id");
  if (!c.bos_token_id) c.bos_token_id = root.token_id_field("bos_token_id");
  c.eos_token_ids = r.token_ids("eos_token_id").value_or(root.token_ids("eos_token_id").value_or(std::vector<token_id>{}));
  c.validate(file);

  const auto gen_path = dir / "generation_config.json";
  if (!std::filesystem::exists(gen_path)) return c;
  read_generation_config(gen_path, c);
  return c;
}

namespace {

// The integer sizes, by their config.json names: all must be positive.
auto size_fields(const model_config& c) -> std::array<std::pair<std::string_view, std::int64_t>, 8> {
  return {{{"vocab_size", c.vocab_size},
           {"hidden_size", c.hidden_size},
           {"intermediate_size", c.intermediate_size},
           {"num_hidden_layers", c.num_hidden_layers},
           {"num_attention_heads", c.num_attention_heads},
           {"num_key_value_heads", c.num_key_value_heads},
           {"head_dim", c.head_dim},
           {"max_position_embeddings", c.max_position_embeddings}}};
}

// The checks of rope_scaling's fields its type uses.
void validate_rope_scaling(const std::string& file, const rope_scaling_config& rs, std::int64_t head_dim) {
  if (rs.type != "llama3" && rs.type != "linear" && rs.type != "dynamic" && rs.type != "yarn" &&
      rs.type != "longrope" && rs.type != "freq_factors")
    fail(file, "unsupported rope_scaling type '" + rs.type + "' (supported: llama3, linear, dynamic, yarn, longrope)");
  check_positive(file, "rope_scaling.factor", rs.factor);
  if (rs.type == "llama3" || rs.type == "yarn" || rs.type == "longrope")
    check_positive(file, "rope_scaling.original_max_position_embeddings",
                   static_cast<double>(rs.original_max_position_embeddings));
  if (rs.type == "llama3") {
    check_positive(file, "rope_scaling.low_freq_factor", rs.low_freq_factor);
    // The llama3 ramp divides by high - low.
    if (!(rs.high_freq_factor > rs.low_freq_factor) || !std::isfinite(rs.high_freq_factor))
      fail(file, "rope_scaling.high_freq_factor must exceed rope_scaling.low_freq_factor");
  }
  if (rs.type == "dynamic" && rs.factor < 1.0)
    fail(file, "rope_scaling.factor must be at least 1 for dynamic scaling, got " + format_number(rs.factor));
  if (rs.type == "yarn" && !(rs.beta_fast > rs.beta_slow && rs.beta_slow > 0))
    fail(file, "rope_scaling.beta_fast must exceed rope_scaling.beta_slow > 0");
  if (rs.attention_factor < 0 || !std::isfinite(rs.attention_factor))
    fail(file, "field 'rope_scaling.attention_factor' must be positive, got " + format_number(rs.attention_factor));
  if (rs.type == "longrope" || rs.type == "freq_factors") {
    const auto half = static_cast<std::size_t>(head_dim / 2);
    for (const auto& [name, f] : {std::pair{"short_factor", &rs.short_factor}, std::pair{"long_factor", &rs.long_factor}}) {
      if (rs.type == "freq_factors" && f == &rs.long_factor) continue;
      if (f->size() != half)
        fail(file, "rope_scaling." + std::string(name) + " has " + std::to_string(f->size()) +
                       " numbers, expected head_dim / 2 = " + std::to_string(half));
      for (const double x : *f) check_positive(file, "rope_scaling." + std::string(name), x);
    }
  }
}

// A mixture of experts' sizes; none for a dense architecture.
void validate_experts(const std::string& file, const model_config& c, std::string_view experts_key) {
  if (experts_key.empty()) {
    if (c.num_experts != 0 || c.num_experts_per_tok != 0 || c.moe_intermediate_size != 0 || c.norm_topk_prob ||
        c.swiglu_limit != 0 || c.mxfp4_experts)
      fail(file, "experts set for " + c.architecture + ", which has none");
    return;
  }
  const auto expert_size = c.architecture == "Qwen3MoeForCausalLM" ? "moe_intermediate_size" : "intermediate_size";
  for (const auto& [name, v] : {std::pair<std::string_view, std::int64_t>{experts_key, c.num_experts},
                                {"num_experts_per_tok", c.num_experts_per_tok}, {expert_size, c.moe_intermediate_size}})
    if (v <= 0) fail(file, "field '" + std::string(name) + "' must be positive, got " + std::to_string(v));
  if (c.architecture != "Qwen3MoeForCausalLM" && c.moe_intermediate_size != c.intermediate_size)
    fail(file, c.architecture + "'s experts are of intermediate_size " + std::to_string(c.intermediate_size) +
                   ", not " + std::to_string(c.moe_intermediate_size));
  const bool gpt_oss = c.family() == model_family::gpt_oss;
  if (gpt_oss != (c.swiglu_limit > 0) || c.swiglu_limit < 0 || !std::isfinite(c.swiglu_limit))
    fail(file, gpt_oss ? "field 'swiglu_limit' must be positive" : "swiglu_limit set for " + c.architecture);
  if (c.mxfp4_experts && !gpt_oss) fail(file, "MXFP4 experts set for " + c.architecture);
  if (c.mxfp4_experts && (c.hidden_size % 32 != 0 || c.moe_intermediate_size % 32 != 0))
    fail(file, "MXFP4 experts need hidden_size and intermediate_size multiples of 32 (its blocks), got " +
                   std::to_string(c.hidden_size) + " and " + std::to_string(c.moe_intermediate_size));
  if (c.num_experts_per_tok > c.num_experts)
    fail(file, "num_experts_per_tok " + std::to_string(c.num_experts_per_tok) + " exceeds " +
                   std::string(experts_key) + " " + std::to_string(c.num_experts));
}

// "layer_types": each layer's attention.
void append_layer_types(std::string& out, const std::vector<bool>& sliding) {
  append_field(out, "layer_types");
  out += '[';
  for (std::size_t i = 0; i < sliding.size(); ++i) {
    if (i > 0) out += ", ";
    json_text::append_string(out, sliding[i] ? "sliding_attention" : "full_attention");
  }
  out += ']';
}

// gpt-oss's fields beside its experts.
void append_gpt_oss_fields(std::string& out, const model_config& c) {
  append_field(out, "swiglu_limit");
  json_text::append_number(out, c.swiglu_limit);
  out += ",\n  \"attention_bias\": true";
  append_layer_types(out, c.sliding_layers);
  if (c.mxfp4_experts) out += ",\n  \"quantization_config\": {\"quant_method\": \"mxfp4\"}";
}

// The expert fields under the architecture's names.
void append_expert_fields(std::string& out, const model_config& c, std::string_view experts_key) {
  append_field(out, experts_key);
  json_text::append_number(out, c.num_experts);
  append_field(out, "num_experts_per_tok");
  json_text::append_number(out, c.num_experts_per_tok);
  if (c.architecture == "MixtralForCausalLM") return;
  if (c.family() == model_family::gpt_oss) return append_gpt_oss_fields(out, c);
  if (c.architecture == "Qwen3MoeForCausalLM") {
    append_field(out, "moe_intermediate_size");
    json_text::append_number(out, c.moe_intermediate_size);
    out += ",\n  \"decoder_sparse_step\": 1,\n  \"mlp_only_layers\": []";
  }
  append_field(out, "norm_topk_prob");
  out += c.norm_topk_prob ? "true" : "false";
}

// Appends "key": v.
void append_number_field(std::string& out, std::string_view key, double v) {
  append_field(out, key);
  json_text::append_number(out, v);
}

// The "rope_scaling" field: null, or an object of its type's fields.
void append_rope_scaling(std::string& out, const rope_scaling_config& rs, bool top_level_original) {
  append_field(out, "rope_scaling");
  if (rs.type.empty()) {
    out += "null";
  } else {
    out += "{\"rope_type\": ";
    json_text::append_string(out, rs.type);
    const auto item = [&](std::string_view key, double v) {
      out += ", ";
      json_text::append_string(out, key);
      out += ": ";
      json_text::append_number(out, v);
    };
    if (!top_level_original) item("factor", rs.factor);
    if (rs.type == "llama3") {
      item("low_freq_factor", rs.low_freq_factor);
      item("high_freq_factor", rs.high_freq_factor);
    }
    if (rs.type == "llama3" || rs.type == "yarn" || (rs.type == "longrope" && !top_level_original))
      out += ", \"original_max_position_embeddings\": " + std::to_string(rs.original_max_position_embeddings);
    if (rs.type == "yarn") {
      item("beta_fast", rs.beta_fast);
      item("beta_slow", rs.beta_slow);
    }
    if (rs.type == "yarn" && !rs.truncate) out += ", \"truncate\": false";
    if ((rs.type == "yarn" || rs.type == "longrope") && rs.attention_factor != 0)
      item("attention_factor", rs.attention_factor);
    for (const auto& [key, f] : {std::pair{"short_factor", &rs.short_factor}, std::pair{"long_factor", &rs.long_factor}}) {
      if (rs.type != "longrope") break;
      out += ", ";
      json_text::append_string(out, key);
      out += ": [";
      for (std::size_t i = 0; i < f->size(); ++i) {
        if (i > 0) out += ", ";
        json_text::append_number(out, (*f)[i]);
      }
      out += ']';
    }
    out += '}';
  }
}

// Gemma's fields: layer types, query scaling, soft-caps, local RoPE base.
void append_gemma_fields(std::string& out, const model_config& c) {
  append_layer_types(out, c.sliding_layers);
  append_number_field(out, "query_pre_attn_scalar", c.query_pre_attn_scalar);
  append_field(out, "attn_logit_softcapping");
  if (c.attn_logit_softcapping > 0) json_text::append_number(out, c.attn_logit_softcapping); else out += "null";
  append_field(out, "final_logit_softcapping");
  if (c.final_logit_softcapping > 0) json_text::append_number(out, c.final_logit_softcapping); else out += "null";
  if (c.family() == model_family::gemma3) append_number_field(out, "rope_local_base_freq", c.rope_local_base_freq);
}

// generation_config.json's text: BOS/EOS ids and the sampling defaults set.
auto generation_config_text(const model_config& c) -> std::string {
  std::string gen = "{";
  if (c.bos_token_id) append_token_ids(gen, "bos_token_id", {*c.bos_token_id});
  if (!c.eos_token_ids.empty()) append_token_ids(gen, "eos_token_id", c.eos_token_ids);
  const auto put = [&gen](const char* key, const auto& value) { // the sampling defaults that are set
    if (!value) return;
    append_field(gen, key);
    json_text::append_number(gen, *value);
  };
  put("temperature", c.default_temperature);
  put("top_p", c.default_top_p);
  put("top_k", c.default_top_k);
  put("min_p", c.default_min_p);
  put("repetition_penalty", c.default_repetition_penalty);
  put("max_new_tokens", c.default_max_tokens);
  gen += gen.size() > 1 ? "\n}\n" : "}\n";
  return gen;
}

} // namespace

void model_config::validate(const std::string& file) const {
  if (find_architecture(architecture) == nullptr)
    fail(file, "unsupported architecture '" + architecture + "' (supported: " + supported_architectures() + ")");
  for (const auto& [name, v] : size_fields(*this))
    if (v <= 0) fail(file, "field '" + std::string(name) + "' must be positive, got " + std::to_string(v));
  if (head_dim % 2 != 0)
    fail(file, "head_dim must be even for rotary embeddings, got " + std::to_string(head_dim));
  if (num_attention_heads % num_key_value_heads != 0)
    fail(file, "num_attention_heads " + std::to_string(num_attention_heads) +
                   " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads));
  check_positive(file, "rms_norm_eps", rms_norm_eps);
  check_positive(file, "rope_theta", rope_theta);
  if (!rope_scaling.type.empty()) validate_rope_scaling(file, rope_scaling, head_dim);
  const auto fam = family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  const std::string_view act = gemma ? "gelu_pytorch_tanh" : "silu";
  if (hidden_act != act)
    fail(file, "field '" + std::string(gemma ? "hidden_activation" : "hidden_act") + "' '" + hidden_act +
                   "' is not supported for " + architecture + " (only " + std::string(act) + ")");
  if (sliding_window < 0) fail(file, "field 'sliding_window' must be positive, got " + std::to_string(sliding_window));
  if (!sliding_layers.empty() && static_cast<std::int64_t>(sliding_layers.size()) != num_hidden_layers)
    fail(file, "layer_types lists " + std::to_string(sliding_layers.size()) + " layers, not num_hidden_layers " +
                   std::to_string(num_hidden_layers));
  if (!gemma && (query_pre_attn_scalar != 0 || attn_logit_softcapping != 0 || final_logit_softcapping != 0 ||
                 rope_local_base_freq != 0 || (!sliding_layers.empty() && fam != model_family::gpt_oss)))
    fail(file, "Gemma's fields (query_pre_attn_scalar, soft-capping, rope_local_base_freq, layer_types) set for " +
                   architecture);
  if (gemma) check_positive(file, "query_pre_attn_scalar", query_pre_attn_scalar);
  if (attn_logit_softcapping < 0 || final_logit_softcapping < 0)
    fail(file, "soft-capping values must be positive");
  if (fam == model_family::gemma3) check_positive(file, "rope_local_base_freq", rope_local_base_freq);
  validate_experts(file, *this, find_architecture(architecture)->experts_key);
  if (bos_token_id) check_token(file, "bos_token_id", *bos_token_id, vocab_size);
  for (const auto id : eos_token_ids) check_token(file, "eos_token_id", id, vocab_size);
  if (default_temperature && (!(*default_temperature >= 0) || !std::isfinite(*default_temperature)))
    fail(file, "temperature must be 0 or more, got " + format_number(*default_temperature));
  if (default_top_p && !(*default_top_p > 0 && *default_top_p <= 1))
    fail(file, "top_p must be in (0, 1], got " + format_number(*default_top_p));
  if (default_top_k && *default_top_k < -1)
    fail(file, "top_k must be -1 or more, got " + std::to_string(*default_top_k));
}

void model_config::save(const std::filesystem::path& dir) const {
  const auto config_path = dir / "config.json";
  validate(config_path.string());
  std::string out = "{";
  append_field(out, "architectures");
  out += '[';
  json_text::append_string(out, architecture);
  out += ']';
  append_field(out, "model_type");
  json_text::append_string(out, find_architecture(architecture)->model_type);
  for (const auto& [name, v] : size_fields(*this)) {
    append_field(out, name);
    json_text::append_number(out, v);
  }
  const auto fam = family();
  const bool gemma = fam == model_family::gemma2 || fam == model_family::gemma3;
  append_number_field(out, "rms_norm_eps", rms_norm_eps);
  append_number_field(out, "rope_theta", rope_theta);
  const auto& rs = rope_scaling;
  // Phi-3 writes original_max_position_embeddings beside max_position_embeddings
  // and takes their ratio as the factor.
  const bool top_level_original =
      rs.type == "longrope" && rs.factor == static_cast<double>(max_position_embeddings) /
                                               static_cast<double>(rs.original_max_position_embeddings);
  append_rope_scaling(out, rs, top_level_original);
  if (top_level_original) {
    append_field(out, "original_max_position_embeddings");
    json_text::append_number(out, rs.original_max_position_embeddings);
  }
  append_field(out, gemma ? "hidden_activation" : "hidden_act");
  json_text::append_string(out, hidden_act);
  append_field(out, "sliding_window");
  if (sliding_window > 0)
    json_text::append_number(out, sliding_window);
  else
    out += "null";
  if (gemma) append_gemma_fields(out, *this);
  if (const auto key = find_architecture(architecture)->experts_key; !key.empty())
    append_expert_fields(out, *this, key);
  append_field(out, "tie_word_embeddings");
  out += tie_word_embeddings ? "true" : "false";
  append_field(out, "torch_dtype");
  json_text::append_string(out, torch_dtype);
  if (bos_token_id) append_token_ids(out, "bos_token_id", {*bos_token_id});
  if (!eos_token_ids.empty()) append_token_ids(out, "eos_token_id", eos_token_ids);
  out += "\n}\n";
  write_text_file(config_path, out);
  write_text_file(dir / "generation_config.json", generation_config_text(*this));
}

auto model_config::family() const -> model_family {
  const auto* a = find_architecture(architecture);
  return a != nullptr ? a->family : model_family::llama;
}

auto model_config::supported_architectures() -> std::string {
  std::string out;
  for (const auto& a : architectures) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

} // namespace troupe
