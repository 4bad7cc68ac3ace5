#pragma once
// Reading config.json, inside model_config.cpp and config_fields.cpp only:
// a field reader that names the file and the field in every error, and the
// readers of the fields one family or RoPE type adds.

#include "engine/model/model_config.hpp"
#include "engine/formats/model_error.hpp"

#include <simdjson.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::config_fields {

namespace dom = simdjson::dom;

/// Parses file into parser's document; the root must be an object. text and
/// parser own the memory the returned object points into.
auto read_object(const std::filesystem::path& file, simdjson::padded_string& text, dom::parser& parser)
    -> dom::object;

/// Reads fields of one JSON object; a null value counts as absent, as HF
/// writes "rope_scaling": null or "head_dim": null for "use the default".
class field_reader {
public:
  field_reader(std::string file, dom::object obj, std::string prefix = "")
      : file_(std::move(file)), obj_(obj), prefix_(std::move(prefix)) {}

  /// Whether the key is written at all, null included: where transformers
  /// has a default, absence means it and null means "none".
  auto present(std::string_view key) const -> bool {
    dom::element e;
    return obj_[key].get(e) == simdjson::SUCCESS;
  }

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

/// Shortest round-trip text: 0.9f prints "0.9", not "0.900000".
template <class Number>
auto format_number(Number v) -> std::string {
  char buf[32];
  return {buf, std::to_chars(buf, buf + sizeof buf, v).ptr};
}

/// Reads "rope_scaling" (null, or one of the types validate() accepts).
void read_rope_scaling(const std::string& file, const field_reader& config, rope_scaling_config& out);

/// Fails when a flag the config sets is one troupe does not implement.
void refuse_unimplemented(const std::string& file, const field_reader& r, model_family family);

/// c.sliding_layers from "layer_types", else sliding(i) for each layer i.
void read_layer_types(const field_reader& r, model_config& c, const std::function<bool(std::size_t)>& sliding);

/// Fills the Gemma fields: soft-caps, query scaling, which layers slide.
void read_gemma(const field_reader& r, model_config& c);

/// Fills the mixture-of-experts fields of Qwen3-MoE, Mixtral, OLMoE and
/// gpt-oss (with its window, sliding layers, SwiGLU limit and MXFP4), with
/// transformers' defaults; experts_key is the architecture's name for the
/// expert count. Refuses dense layers among the expert layers and OLMoE's
/// clip_qkv.
void read_experts(const field_reader& r, std::string_view experts_key, model_config& c);

} // namespace troupe::config_fields
