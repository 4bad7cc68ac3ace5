#include "engine/model/model_config.hpp"

#include "engine/model/json_text.hpp"
#include "engine/model/model_error.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>

namespace troupe {

namespace {

namespace dom = simdjson::dom;

constexpr std::array supported_architectures = {std::string_view{"LlamaForCausalLM"},
                                                std::string_view{"MistralForCausalLM"}};

/// Parses file into parser's document; the root must be an object. text and
/// parser own the memory the returned object points into.
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

/// Reads fields of one JSON object; a null value counts as absent, as HF
/// writes "rope_scaling": null or "head_dim": null for "use the default".
class field_reader {
public:
  field_reader(std::string file, dom::object obj, std::string prefix = "")
      : file_(std::move(file)), obj_(obj), prefix_(std::move(prefix)) {}

  auto find(std::string_view key) const -> std::optional<dom::element> {
    dom::element e;
    if (obj_[key].get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
    return e;
  }

  auto int64(std::string_view key) const -> std::optional<std::int64_t> {
    const auto e = find(key);
    if (!e) return std::nullopt;
    std::int64_t v = 0;
    if (e->get_int64().get(v) != simdjson::SUCCESS) bad(key, "must be an integer");
    return v;
  }
  auto number(std::string_view key) const -> std::optional<double> {
    const auto e = find(key);
    if (!e) return std::nullopt;
    double v = 0;
    if (e->get_double().get(v) != simdjson::SUCCESS) bad(key, "must be a number");
    return v;
  }
  auto boolean(std::string_view key) const -> std::optional<bool> {
    const auto e = find(key);
    if (!e) return std::nullopt;
    bool v = false;
    if (e->get_bool().get(v) != simdjson::SUCCESS) bad(key, "must be true or false");
    return v;
  }
  auto string(std::string_view key) const -> std::optional<std::string> {
    const auto e = find(key);
    if (!e) return std::nullopt;
    std::string_view v;
    if (e->get_string().get(v) != simdjson::SUCCESS) bad(key, "must be a string");
    return std::string(v);
  }
  /// An int or a list of ints, as HF writes eos_token_id.
  /// A field that must hold one token id (bos_token_id).
  auto token_id_field(std::string_view key) const -> std::optional<token_id> {
    const auto ids = token_ids(key);
    if (!ids) return std::nullopt;
    if (ids->size() != 1) bad(key, "must be a single token id");
    return ids->front();
  }

  auto token_ids(std::string_view key) const -> std::optional<std::vector<token_id>> {
    const auto e = find(key);
    if (!e) return std::nullopt;
    std::vector<token_id> ids;
    const auto add = [&](dom::element x) {
      std::int64_t v = 0;
      if (x.get_int64().get(v) != simdjson::SUCCESS || v < std::numeric_limits<token_id>::min() ||
          v > std::numeric_limits<token_id>::max())
        bad(key, "must be a token id or a list of token ids");
      ids.push_back(static_cast<token_id>(v));
    };
    dom::array list;
    if (e->get_array().get(list) == simdjson::SUCCESS) {
      for (const auto x : list) add(x);
    } else {
      add(*e);
    }
    return ids;
  }

  template <class T>
  auto required(std::optional<T> v, std::string_view key) const -> T {
    if (!v) fail(file_, "missing field '" + prefix_ + std::string(key) + "'");
    return *v;
  }

  [[noreturn]] void bad(std::string_view key, const std::string& what) const {
    fail(file_, "field '" + prefix_ + std::string(key) + "' " + what);
  }

private:
  std::string file_;
  dom::object obj_;
  std::string prefix_;
};

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
  if (out.type == "llama3") {
    out.factor = r.required(r.number("factor"), "factor");
    out.low_freq_factor = r.required(r.number("low_freq_factor"), "low_freq_factor");
    out.high_freq_factor = r.required(r.number("high_freq_factor"), "high_freq_factor");
    out.original_max_position_embeddings =
        r.required(r.int64("original_max_position_embeddings"), "original_max_position_embeddings");
  } else if (out.type == "linear") {
    out.factor = r.required(r.number("factor"), "factor");
  }
  // Other types are rejected by validate() with the list of supported ones.
}

/// Shortest round-trip text: 0.9f prints "0.9", not "0.900000".
template <class Number>
auto format_number(Number v) -> std::string {
  char buf[32];
  return {buf, std::to_chars(buf, buf + sizeof buf, v).ptr};
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

} // namespace

auto model_config::load(const std::filesystem::path& dir) -> model_config {
  const auto config_path = dir / "config.json";
  const auto file = config_path.string();
  simdjson::padded_string text;
  dom::parser parser;
  const field_reader r(file, read_object(config_path, text, parser));

  model_config c;
  const auto archs = r.find("architectures");
  if (!archs) fail(file, "missing field 'architectures'");
  dom::array arch_list;
  std::string_view arch;
  if (archs->get_array().get(arch_list) != simdjson::SUCCESS ||
      arch_list.at(0).get_string().get(arch) != simdjson::SUCCESS)
    r.bad("architectures", "must be a non-empty list of strings");
  c.architecture = std::string(arch);
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
  c.rms_norm_eps = r.number("rms_norm_eps").value_or(c.rms_norm_eps);
  c.rope_theta = r.number("rope_theta").value_or(c.rope_theta);
  read_rope_scaling(file, r, c.rope_scaling);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings").value_or(false);
  // transformers >= 4.56 writes "dtype" instead of "torch_dtype".
  c.torch_dtype = r.string("torch_dtype").value_or(r.string("dtype").value_or(c.torch_dtype));
  c.bos_token_id = r.token_id_field("bos_token_id");
  c.eos_token_ids = r.token_ids("eos_token_id").value_or(std::vector<token_id>{});
  // sliding_window (Mistral) and other fields are ignored.
  c.validate(file);

  const auto gen_path = dir / "generation_config.json";
  if (!std::filesystem::exists(gen_path)) return c;
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
  c.validate(gen_file); // config.json passed above, so a failure here is this file's
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

} // namespace

void model_config::validate(const std::string& file) const {
  if (std::find(supported_architectures.begin(), supported_architectures.end(), architecture) ==
      supported_architectures.end())
    fail(file, "unsupported architecture '" + architecture + "' (supported: LlamaForCausalLM, MistralForCausalLM)");
  for (const auto& [name, v] : size_fields(*this))
    if (v <= 0) fail(file, "field '" + std::string(name) + "' must be positive, got " + std::to_string(v));
  if (head_dim % 2 != 0)
    fail(file, "head_dim must be even for rotary embeddings, got " + std::to_string(head_dim));
  if (num_attention_heads % num_key_value_heads != 0)
    fail(file, "num_attention_heads " + std::to_string(num_attention_heads) +
                   " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads));
  check_positive(file, "rms_norm_eps", rms_norm_eps);
  check_positive(file, "rope_theta", rope_theta);
  if (!rope_scaling.type.empty()) {
    if (rope_scaling.type != "llama3" && rope_scaling.type != "linear")
      fail(file, "unsupported rope_scaling type '" + rope_scaling.type + "' (supported: llama3, linear)");
    check_positive(file, "rope_scaling.factor", rope_scaling.factor);
    if (rope_scaling.type == "llama3") {
      check_positive(file, "rope_scaling.low_freq_factor", rope_scaling.low_freq_factor);
      check_positive(file, "rope_scaling.original_max_position_embeddings",
                     static_cast<double>(rope_scaling.original_max_position_embeddings));
      // The llama3 ramp divides by high - low.
      if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
          !std::isfinite(rope_scaling.high_freq_factor))
        fail(file, "rope_scaling.high_freq_factor must exceed rope_scaling.low_freq_factor");
    }
  }
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
  json_text::append_string(out, architecture == "MistralForCausalLM" ? "mistral" : "llama");
  for (const auto& [name, v] : size_fields(*this)) {
    append_field(out, name);
    json_text::append_number(out, v);
  }
  append_field(out, "rms_norm_eps");
  json_text::append_number(out, rms_norm_eps);
  append_field(out, "rope_theta");
  json_text::append_number(out, rope_theta);
  append_field(out, "rope_scaling");
  if (rope_scaling.type.empty()) {
    out += "null";
  } else {
    out += "{\"rope_type\": ";
    json_text::append_string(out, rope_scaling.type);
    out += ", \"factor\": ";
    json_text::append_number(out, rope_scaling.factor);
    if (rope_scaling.type == "llama3") {
      out += ", \"low_freq_factor\": ";
      json_text::append_number(out, rope_scaling.low_freq_factor);
      out += ", \"high_freq_factor\": ";
      json_text::append_number(out, rope_scaling.high_freq_factor);
      out += ", \"original_max_position_embeddings\": ";
      json_text::append_number(out, rope_scaling.original_max_position_embeddings);
    }
    out += '}';
  }
  append_field(out, "tie_word_embeddings");
  out += tie_word_embeddings ? "true" : "false";
  append_field(out, "torch_dtype");
  json_text::append_string(out, torch_dtype);
  if (bos_token_id) append_token_ids(out, "bos_token_id", {*bos_token_id});
  if (!eos_token_ids.empty()) append_token_ids(out, "eos_token_id", eos_token_ids);
  out += "\n}\n";
  write_text_file(config_path, out);

  std::string gen = "{";
  if (bos_token_id) append_token_ids(gen, "bos_token_id", {*bos_token_id});
  if (!eos_token_ids.empty()) append_token_ids(gen, "eos_token_id", eos_token_ids);
  if (default_temperature) {
    append_field(gen, "temperature");
    json_text::append_number(gen, *default_temperature);
  }
  if (default_top_p) {
    append_field(gen, "top_p");
    json_text::append_number(gen, *default_top_p);
  }
  if (default_top_k) {
    append_field(gen, "top_k");
    json_text::append_number(gen, *default_top_k);
  }
  gen += gen.size() > 1 ? "\n}\n" : "}\n";
  write_text_file(dir / "generation_config.json", gen);
}

} // namespace troupe
