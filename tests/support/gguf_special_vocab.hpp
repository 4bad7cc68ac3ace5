#pragma once
// Inside the tests' GGUF tokenizer writer (gguf_vocab.cpp): reading the small
// JSON files of a model directory, tokenizer.json's added tokens, and gguf-py's
// SpecialVocab (special token ids, add_* flags, chat template).

#include "tests/support/gguf_writer.hpp"

#include <simdjson.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::testing::vocab {

/// Throws std::runtime_error("<file>: <problem>").
[[noreturn]] void fail(const std::filesystem::path& file, const std::string& problem);

auto read_text(const std::filesystem::path& file) -> std::string;

/// A JSON value of a small file (tokenizer_config.json, config.json), read
/// with On-Demand: they hold integers past 64 bits (model_max_length), which
/// the DOM parser refuses. Such numbers are kept as not-an-integer.
struct json {
  enum class kind { null, boolean, number, string, array, object } k = kind::null;
  bool b = false;
  std::optional<std::int64_t> integer;
  std::string s;
  std::vector<json> items;
  std::vector<std::pair<std::string, json>> fields;

  auto get(std::string_view key) const -> const json* {
    if (k != kind::object) return nullptr;
    for (const auto& [name, v] : fields)
      if (name == key) return &v;
    return nullptr;
  }
  auto is_string() const -> bool { return k == kind::string; }
  /// Python's truthiness, as SpecialVocab tests these values.
  auto truthy() const -> bool {
    switch (k) {
    case kind::null: return false;
    case kind::boolean: return b;
    case kind::number: return !integer || *integer != 0;
    case kind::string: return !s.empty();
    case kind::array: return !items.empty();
    case kind::object: return !fields.empty();
    }
    return false;
  }
};

/// The file's JSON object, or nullopt when the file is absent.
auto read_json(const std::filesystem::path& file) -> std::optional<json>;

auto string_of(const json* v) -> std::optional<std::string>;

auto bool_or(simdjson::dom::element e, std::string_view key, bool fallback) -> bool;

/// An added token of tokenizer.json, as SpecialVocab and get_vocab_base read it.
struct added_token {
  std::string content;
  std::int64_t id = -1;
  bool special = false;
};

auto added_tokens_of(std::optional<simdjson::dom::element> tokenizer_json) -> std::vector<added_token>;

/// gguf-py's SpecialVocab over dir (tokenizer.json's post-processor,
/// tokenizer_config.json, config.json, the chat template), then its
/// add_to_gguf into w; ids past n_vocab, where given, are left out.
void add_special_vocab(gguf_writer& w, const std::filesystem::path& dir,
                       std::optional<simdjson::dom::element> tokenizer_json, std::optional<std::int64_t> n_vocab);

} // namespace troupe::testing::vocab
