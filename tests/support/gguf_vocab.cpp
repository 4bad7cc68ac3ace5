#include "tests/support/gguf_vocab.hpp"

#include "tests/support/gguf_special_vocab.hpp"

#include <sentencepiece_processor.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;
namespace dom = simdjson::dom;

using vocab::added_token;
using vocab::added_tokens_of;
using vocab::bool_or;
using vocab::fail;
using vocab::json;
using vocab::read_json;
using vocab::string_of;

// gguf-py's TokenType.
enum token_type : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

/// convert_hf_to_gguf.py's does_token_look_special.
auto looks_special(std::string_view t) -> bool {
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (t.starts_with("<|") && t.ends_with("|>")) ||
         (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) || // <｜...｜>
         (t.starts_with("<unused") && t.ends_with(">"));
}

auto replace_all(std::string s, std::string_view from, std::string_view to) -> std::string {
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

/// The vocabulary size convert_hf_to_gguf.py pads to: config.json's
/// vocab_size where it gives one.
auto config_vocab_size(const fs::path& dir) -> std::optional<std::int64_t> {
  const auto config = read_json(dir / "config.json");
  if (!config) return std::nullopt;
  const auto* v = config->get("vocab_size");
  if (v == nullptr || v->k != json::kind::number || !v->integer) return std::nullopt;
  return *v->integer;
}

/// _set_vocab_sentencepiece: every piece with its score and type, then
/// added_tokens.json and tokenizer_config.json's added_tokens_decoder over
/// them, padded to config.json's vocab_size with unused [PADn] pieces.
void write_sentencepiece(gguf_writer& w, const fs::path& dir) {
  const auto model_file = dir / "tokenizer.model";
  auto sp = sentencepiece::SentencePieceProcessor{};
  if (const auto status = sp.Load(model_file.string()); !status.ok()) fail(model_file, status.ToString());
  const auto num_pieces = static_cast<std::int64_t>(sp.GetPieceSize());
  const auto vocab_size = config_vocab_size(dir).value_or(num_pieces);
  auto tokens = std::vector<std::string>{};
  auto scores = std::vector<float>(static_cast<std::size_t>(vocab_size), -10000.0f);
  auto types = std::vector<std::int32_t>(static_cast<std::size_t>(vocab_size), unused);
  for (std::int64_t i = 0; i < vocab_size; ++i) tokens.push_back("[PAD" + std::to_string(i) + "]");
  for (auto id = 0; id < std::min<std::int64_t>(num_pieces, vocab_size); ++id) {
    tokens[id] = sp.IdToPiece(id);
    scores[id] = sp.GetScore(id);
    types[id] = sp.IsUnknown(id) ? unknown : sp.IsControl(id) ? control : sp.IsUnused(id) ? unused
                : sp.IsByte(id)  ? byte
                                 : normal;
  }
  if (const auto added = read_json(dir / "added_tokens.json")) {
    for (const auto& [text, v] : added->fields) {
      if (!v.integer || *v.integer < 0 || *v.integer >= vocab_size) continue;
      tokens[*v.integer] = text;
      scores[*v.integer] = -1000.0f;
      types[*v.integer] = user_defined;
    }
  }
  if (const auto config = read_json(dir / "tokenizer_config.json")) {
    if (const auto* decoder = config->get("added_tokens_decoder")) {
      for (const auto& [key, data] : decoder->fields) {
        const auto id = std::stoll(key);
        auto content = string_of(data.get("content"));
        if (id < 0 || id >= vocab_size || !content) continue;
        const auto* special = data.get("special");
        if ((special != nullptr && special->truthy()) || looks_special(*content)) {
          types[id] = control;
        } else {
          *content = replace_all(*content, "\xE2\x96\x81", " "); // pre-normalize user-defined spaces
          types[id] = user_defined;
        }
        scores[id] = -1000.0f;
        tokens[id] = *content;
      }
    }
  }
  w.kv_string("tokenizer.ggml.model", "llama");
  w.kv_string("tokenizer.ggml.pre", "default");
  w.kv_strings("tokenizer.ggml.tokens", tokens);
  w.kv_f32s("tokenizer.ggml.scores", scores);
  w.kv_i32s("tokenizer.ggml.token_type", types);
  auto parser = dom::parser{};
  auto tokenizer_json = std::optional<dom::element>{};
  auto ec = std::error_code{};
  if (fs::is_regular_file(dir / "tokenizer.json", ec)) tokenizer_json = parser.load((dir / "tokenizer.json").string()).value();
  vocab::add_special_vocab(w, dir, tokenizer_json, vocab_size);
}

// The pre-tokenizers' regexes as their tokenizer.json files spell them.
constexpr auto llama3_regex = std::string_view{
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto qwen2_regex = std::string_view{
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto gpt4o_regex = std::string_view{
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto tekken_regex = std::string_view{
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
// DeepSeek-V3's third regex holds raw CR and LF characters.
const auto deepseek_v3_regexes = std::vector<std::string>{
    R"(\p{N}{1,3})", "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};

/// The llama.cpp name of tokenizer.json's pre-tokenizer, read off its
/// regexes (convert_hf_to_gguf.py hashes the ids of a probe text instead).
auto pre_name(dom::element tokenizer_json, const fs::path& file) -> std::string {
  auto regexes = std::vector<std::string>{};
  auto byte_level_regex = false;
  auto collect = [&](auto&& self, dom::element e) -> void {
    const auto type = std::string_view(e["type"].get_string().value());
    if (type == "Sequence") {
      const dom::array list = e["pretokenizers"].get_array().value();
      for (const auto item : list) self(self, item);
    } else if (type == "Split") {
      auto r = std::string_view{};
      if (e["pattern"]["Regex"].get_string().get(r) != simdjson::SUCCESS) fail(file, "a Split pre-tokenizer without a regex");
      regexes.emplace_back(r);
    } else if (type == "ByteLevel") {
      byte_level_regex = bool_or(e, "use_regex", true);
    } else {
      fail(file, "pre-tokenizer " + std::string(type) + " has no llama.cpp name here");
    }
  };
  collect(collect, tokenizer_json["pre_tokenizer"].value());
  if (regexes.size() == 1 && !byte_level_regex) {
    if (regexes[0] == llama3_regex) return "llama-bpe";
    if (regexes[0] == qwen2_regex) return "qwen2";
    if (regexes[0] == gpt4o_regex) return "gpt-4o";
    if (regexes[0] == tekken_regex) return "tekken";
  }
  if (regexes == deepseek_v3_regexes && !byte_level_regex) return "deepseek-v3";
  if (regexes.empty() && byte_level_regex) return "gpt-2";
  fail(file, "a pre-tokenizer whose llama.cpp name is not known here");
}

/// get_vocab_base and _set_vocab_gpt2: ids in order (holes as unused
/// [PADn]), added tokens as control (special, or looking special) or
/// user-defined, the merges (pairs joined by a space, a space inside one
/// written as U+0120), then SpecialVocab.
void write_gpt2(gguf_writer& w, const fs::path& dir) {
  const auto file = dir / "tokenizer.json";
  auto parser = dom::parser{};
  const auto tj = parser.load(file.string()).value();
  const auto model = tj["model"].value();
  auto decoder_type = std::string_view{};
  const auto has_decoder = tj["decoder"]["type"].get_string().get(decoder_type) == simdjson::SUCCESS;
  if (std::string_view(model["type"].get_string().value()) != "BPE" || bool_or(model, "byte_fallback", false) ||
      !has_decoder || decoder_type != "ByteLevel")
    fail(file, "neither a tokenizer.model beside it nor a byte-level BPE (convert_hf_to_gguf.py's gpt2 vocabulary)");
  auto vocab = std::unordered_map<std::string, std::int64_t>{};
  const dom::object model_vocab = model["vocab"].get_object().value();
  for (const auto [key, value] : model_vocab) vocab[std::string(key)] = value.get_int64().value();
  const auto added = added_tokens_of(tj);
  auto added_by_content = std::unordered_map<std::string, const added_token*>{};
  for (const auto& t : added) {
    vocab[t.content] = t.id;
    added_by_content[t.content] = &t;
  }
  const auto vocab_size = config_vocab_size(dir).value_or(static_cast<std::int64_t>(vocab.size()));
  auto by_id = std::map<std::int64_t, std::string>{};
  for (const auto& [text, id] : vocab) {
    if (id >= vocab_size) fail(file, "id " + std::to_string(id) + " is past the vocabulary size");
    by_id[id] = text;
  }
  auto tokens = std::vector<std::string>{};
  auto types = std::vector<std::int32_t>{};
  for (std::int64_t i = 0; i < vocab_size; ++i) {
    const auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.push_back(unused);
      continue;
    }
    auto token = it->second;
    // An added token that is not normalized goes through HF's encode and
    // decode first; matched whole, it comes back as its own text.
    if (const auto a = added_by_content.find(token); a != added_by_content.end()) {
      if (a->second->special || looks_special(token)) {
        types.push_back(control);
      } else {
        token = replace_all(token, "\xE2\x96\x81", " ");
        types.push_back(user_defined);
      }
    } else {
      types.push_back(normal);
    }
    tokens.push_back(std::move(token));
  }
  auto merges = std::vector<std::string>{};
  const dom::array model_merges = model["merges"].get_array().value();
  for (const auto m : model_merges) {
    auto text = std::string_view{};
    if (m.get_string().get(text) == simdjson::SUCCESS) {
      merges.emplace_back(text);
      continue;
    }
    const dom::array pair = m.get_array().value();
    const auto part = [&](std::size_t i) {
      return replace_all(std::string(pair.at(i).get_string().value()), " ", "\xC4\xA0");
    };
    merges.push_back(part(0) + " " + part(1));
  }
  w.kv_string("tokenizer.ggml.model", "gpt2");
  w.kv_string("tokenizer.ggml.pre", pre_name(tj, file));
  w.kv_strings("tokenizer.ggml.tokens", tokens);
  w.kv_i32s("tokenizer.ggml.token_type", types);
  w.kv_strings("tokenizer.ggml.merges", merges);
  vocab::add_special_vocab(w, dir, tj, std::nullopt);
}

} // namespace

void write_tokenizer_metadata(gguf_writer& w, const std::filesystem::path& model_dir) {
  auto ec = std::error_code{};
  if (fs::is_regular_file(model_dir / "tokenizer.model", ec)) return write_sentencepiece(w, model_dir);
  if (fs::is_regular_file(model_dir / "tokenizer.json", ec)) return write_gpt2(w, model_dir);
  fail(model_dir, "neither tokenizer.model nor tokenizer.json");
}

} // namespace troupe::testing
