#include "tests/support/gguf_vocab.hpp"

#include <sentencepiece_processor.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;
namespace dom = simdjson::dom;

// gguf-py's TokenType.
enum token_type : std::int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

[[noreturn]] void fail(const fs::path& file, const std::string& problem) {
  throw std::runtime_error(file.string() + ": " + problem);
}

auto read_text(const fs::path& file) -> std::string {
  auto in = std::ifstream(file, std::ios::binary);
  if (!in) fail(file, "cannot read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

auto to_json(simdjson::ondemand::value v) -> json {
  auto out = json{};
  switch (v.type().value()) {
  case simdjson::ondemand::json_type::null: break;
  case simdjson::ondemand::json_type::boolean:
    out.k = json::kind::boolean;
    out.b = v.get_bool().value();
    break;
  case simdjson::ondemand::json_type::number: {
    out.k = json::kind::number;
    auto i = std::int64_t{0};
    if (v.get_int64().get(i) == simdjson::SUCCESS) out.integer = i;
    break;
  }
  case simdjson::ondemand::json_type::string:
    out.k = json::kind::string;
    out.s = std::string(v.get_string().value());
    break;
  case simdjson::ondemand::json_type::array:
    out.k = json::kind::array;
    for (auto item : v.get_array()) out.items.push_back(to_json(item.value()));
    break;
  case simdjson::ondemand::json_type::object:
    out.k = json::kind::object;
    for (auto field : v.get_object()) {
      auto key = std::string(field.unescaped_key().value());
      out.fields.emplace_back(std::move(key), to_json(field.value().value()));
    }
    break;
  }
  return out;
}

/// The file's JSON object, or nullopt when the file is absent.
auto read_json(const fs::path& file) -> std::optional<json> {
  auto ec = std::error_code{};
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  try {
    const auto text = simdjson::padded_string(read_text(file));
    auto parser = simdjson::ondemand::parser{};
    auto doc = parser.iterate(text).value();
    auto out = to_json(doc.get_value().value());
    if (out.k != json::kind::object) fail(file, "not a JSON object");
    return out;
  } catch (const simdjson::simdjson_error& e) {
    fail(file, e.what());
  }
}

auto string_of(const json* v) -> std::optional<std::string> {
  if (v != nullptr && v->is_string()) return v->s;
  return std::nullopt;
}

auto bool_or(dom::element e, std::string_view key, bool fallback) -> bool {
  auto b = fallback;
  return e[key].get_bool().get(b) == simdjson::SUCCESS ? b : fallback;
}

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

/// An added token of tokenizer.json, as SpecialVocab and get_vocab_base read it.
struct added_token {
  std::string content;
  std::int64_t id = -1;
  bool special = false;
};

auto added_tokens_of(std::optional<dom::element> tokenizer_json) -> std::vector<added_token> {
  auto out = std::vector<added_token>{};
  if (!tokenizer_json) return out;
  auto list = dom::array{};
  if ((*tokenizer_json)["added_tokens"].get_array().get(list) != simdjson::SUCCESS) return out;
  for (const auto item : list) {
    auto t = added_token{};
    t.content = std::string(item["content"].get_string().value());
    t.id = item["id"].get_int64().value();
    t.special = bool_or(item, "special", false);
    out.push_back(std::move(t));
  }
  return out;
}

/// gguf-py's SpecialVocab: the special token ids and add_* flags from
/// tokenizer.json's post-processor, tokenizer_config.json and config.json,
/// and the chat template; then its add_to_gguf.
class special_vocab {
public:
  special_vocab(const fs::path& dir, std::optional<dom::element> tokenizer_json, std::optional<std::int64_t> n_vocab)
      : n_vocab_(n_vocab) {
    const auto config_file = dir / "tokenizer_config.json";
    auto config = read_json(config_file);
    const auto added = added_tokens_of(tokenizer_json);
    // Python's `if not tokenizer_config`: absent or empty.
    const auto has_config = config && config->truthy();
    if (has_config)
      for (const auto* typ : {"bos", "eos", "unk", "sep", "pad", "cls", "mask"})
        if (const auto* v = config->get(std::string(typ) + "_token")) token_setting_[typ] = *v;
    if (tokenizer_json) read_post_processor(*tokenizer_json, has_config);
    if (!has_config) {
      read_model_config(dir);
      return;
    }
    read_chat_template(dir, *config, config_file);
    for (const auto& typ : types_) {
      if (const auto* add = config->get("add_" + typ + "_token"); add != nullptr && add->k == json::kind::boolean)
        set_add(typ, add->b);
      const auto it = token_setting_.find(typ);
      if (it == token_setting_.end()) continue;
      auto content = string_of(&it->second);
      if (!content) content = string_of(it->second.get("content"));
      if (!content) continue;
      for (const auto& t : added)
        if (t.content == *content) {
          set_special(typ, t.id);
          break;
        }
    }
    read_model_config(dir);
  }

  void add_to(gguf_writer& w) const {
    static const auto id_keys = std::map<std::string, std::string>{
        {"bos", "tokenizer.ggml.bos_token_id"},        {"eos", "tokenizer.ggml.eos_token_id"},
        {"unk", "tokenizer.ggml.unknown_token_id"},    {"sep", "tokenizer.ggml.seperator_token_id"},
        {"pad", "tokenizer.ggml.padding_token_id"},    {"mask", "tokenizer.ggml.mask_token_id"},
        {"eot", "tokenizer.ggml.eot_token_id"},        {"eom", "tokenizer.ggml.eom_token_id"},
    };
    // gguf-py's writer has no handler for "cls": SpecialVocab skips it.
    for (const auto& [typ, id] : ids_)
      if (const auto it = id_keys.find(typ); it != id_keys.end()) w.kv_u32(it->second, static_cast<std::uint32_t>(id));
    for (const auto& [typ, value] : add_)
      if (typ == "bos" || typ == "eos" || typ == "sep") w.kv_bool("tokenizer.ggml.add_" + typ + "_token", value);
    for (const auto& [name, text] : chat_templates_)
      w.kv_string(name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name, text);
    auto names = std::vector<std::string>{};
    for (const auto& [name, text] : chat_templates_)
      if (!name.empty()) names.push_back(name);
    if (!names.empty()) w.kv_strings("tokenizer.chat_templates", names);
  }

private:
  void set_special(const std::string& typ, std::int64_t id) {
    if (id < 0) throw std::runtime_error("invalid value for special token type " + typ);
    if (n_vocab_ && id >= *n_vocab_) return;
    for (const auto& [t, existing] : ids_)
      if (t == typ) return; // the first source wins
    ids_.emplace_back(typ, id);
  }

  void set_add(const std::string& typ, bool value) {
    for (auto& [t, v] : add_)
      if (t == typ) {
        v = value;
        return;
      }
    add_.emplace_back(typ, value);
  }

  auto setting(const std::string& typ) const -> const json* {
    const auto it = token_setting_.find(typ);
    return it == token_setting_.end() ? nullptr : &it->second;
  }
  static auto truthy(const json* v) -> bool { return v != nullptr && v->truthy(); }
  /// Python's `a == b` between a template's token name and a setting (a
  /// string, or an AddedToken object that equals no string).
  static auto same(const std::optional<std::string>& name, const json* v) -> bool {
    return name && v != nullptr && v->is_string() && v->s == *name;
  }
  static auto special_token_id(dom::element item) -> std::optional<std::string> {
    auto s = std::string_view{};
    if (item["SpecialToken"]["id"].get_string().get(s) != simdjson::SUCCESS || s.empty()) return std::nullopt;
    return std::string(s);
  }
  static auto sequence_id(dom::element item) -> std::optional<std::string> {
    auto s = std::string_view{};
    if (item["Sequence"]["id"].get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
    return std::string(s);
  }
  static auto as_setting(const std::optional<std::string>& name) -> json {
    auto v = json{};
    if (name) v.k = json::kind::string, v.s = *name;
    return v;
  }

  /// SpecialVocab's crude reading of the post-processor: RobertaProcessing
  /// adds BOS, EOS and SEP; a TemplateProcessing's first and last special
  /// tokens of the single template say add_bos / add_eos (a last one other
  /// than eos_token becomes EOS, the old one EOT or EOM), its pair template
  /// a separator.
  void read_post_processor(dom::element tokenizer_json, bool has_config) {
    if (has_config) {
      if (!truthy(setting("bos")) && truthy(setting("cls"))) token_setting_["bos"] = token_setting_["cls"];
      if (!truthy(setting("eos")) && truthy(setting("sep"))) token_setting_["eos"] = token_setting_["sep"];
    }
    auto pp = dom::element{};
    if (tokenizer_json["post_processor"].get(pp) != simdjson::SUCCESS || pp.is_null()) return;
    auto processors = std::vector<dom::element>{};
    if (auto list = dom::array{}; pp["processors"].get_array().get(list) == simdjson::SUCCESS)
      processors.assign(list.begin(), list.end());
    else
      processors.push_back(pp);
    // Without a config, the template's own tokens stand for bos/eos.
    auto local_bos = setting("bos") ? *setting("bos") : json{};
    auto local_eos = setting("eos") ? *setting("eos") : json{};
    for (const auto proc : processors) {
      auto type = std::string_view{};
      if (proc["type"].get_string().get(type) != simdjson::SUCCESS) continue;
      if (type == "RobertaProcessing") {
        set_add("bos", true);
        set_add("eos", true);
        set_add("sep", true);
        if (has_config && !truthy(setting("sep"))) {
          auto sep = std::string_view{};
          if (proc["sep"].at(0).get_string().get(sep) == simdjson::SUCCESS) token_setting_["sep"] = as_setting(std::string(sep));
          else token_setting_["sep"] = local_eos;
        }
        continue;
      }
      if (type != "TemplateProcessing") continue;
      auto single = std::vector<dom::element>{}, pair = std::vector<dom::element>{};
      if (auto a = dom::array{}; proc["single"].get_array().get(a) == simdjson::SUCCESS) single.assign(a.begin(), a.end());
      if (auto a = dom::array{}; proc["pair"].get_array().get(a) == simdjson::SUCCESS) pair.assign(a.begin(), a.end());
      auto first = std::optional<std::string>{}, last = std::optional<std::string>{};
      if (single.size() > 1) {
        if ((first = special_token_id(single.front()))) {
          if (!has_config) local_bos = as_setting(first);
          set_add("bos", same(first, &local_bos) || same(first, setting("cls")));
        }
        if ((last = special_token_id(single.back()))) {
          if (!has_config) {
            local_eos = as_setting(last);
          } else if (!same(last, &local_eos)) {
            if (std::find(types_.begin(), types_.end(), "eot") == types_.end()) {
              types_.push_back("eot");
              token_setting_["eot"] = local_eos;
            } else if (std::find(types_.begin(), types_.end(), "eom") == types_.end()) {
              types_.push_back("eom");
              token_setting_["eom"] = local_eos;
            }
            local_eos = as_setting(last);
            token_setting_["eos"] = local_eos;
          }
          set_add("eos", same(last, &local_eos));
        }
      }
      if (pair.empty()) continue;
      const auto begin = first && special_token_id(pair.front()) == first ? 1u : 0u;
      auto end = pair.size();
      if (last && special_token_id(pair.back()) == last) --end;
      if (begin >= end) continue;
      const auto a = sequence_id(pair[begin]), b = sequence_id(pair[end - 1]);
      if (a != "A" || b != "B" || end - begin < 3) continue;
      const auto middle = std::vector<dom::element>(pair.begin() + begin + 1, pair.begin() + end - 1);
      auto add_sep = false;
      const auto is_separator = [&](const std::optional<std::string>& e) {
        return same(e, setting("sep")) || same(e, &local_eos);
      };
      if (const auto e = special_token_id(middle[0]); e && is_separator(e) && !last) add_sep = true;
      if (middle.size() == 2)
        if (const auto e = special_token_id(middle[1]); e && is_separator(e)) add_sep = true;
      set_add("sep", add_sep);
      if (add_sep && !truthy(setting("sep")) && has_config) token_setting_["sep"] = local_eos;
    }
  }

  /// tokenizer_config.json's chat_template (a string, or named templates),
  /// else chat_template.jinja, else chat_template.json's.
  void read_chat_template(const fs::path& dir, const json& config, const fs::path& config_file) {
    auto ec = std::error_code{};
    auto alt = std::optional<json>{};
    if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
      alt = json{};
      alt->k = json::kind::string;
      alt->s = read_text(dir / "chat_template.jinja");
    } else if (const auto j = read_json(dir / "chat_template.json")) {
      if (const auto* t = j->get("chat_template")) alt = *t;
    }
    const auto* t = config.get("chat_template");
    if (t == nullptr && alt) t = &*alt;
    if (t == nullptr || t->k == json::kind::null) return;
    if (t->is_string()) {
      chat_templates_.emplace_back("", t->s);
      return;
    }
    if (t->k != json::kind::array) fail(config_file, "chat_template is neither a string nor a list");
    // gguf-py's add_chat_template: "default" is tokenizer.chat_template,
    // the others tokenizer.chat_template.<name> (non-alphanumerics as '_').
    for (const auto& choice : t->items) {
      const auto name = string_of(choice.get("name")).value_or("");
      const auto text = string_of(choice.get("template"));
      if (name.empty() || !text) continue;
      auto clean = name;
      for (auto& c : clean)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      chat_templates_.emplace_back(clean == "default" ? "" : clean, *text);
    }
  }

  /// config.json's <type>_token_id (or its text_config's), where no earlier
  /// source set the type.
  void read_model_config(const fs::path& dir) {
    const auto config = read_json(dir / "config.json");
    if (!config) return;
    for (const auto& typ : types_) {
      const auto key = typ + "_token_id";
      const auto* v = config->get(key);
      if ((v == nullptr || v->k == json::kind::null) && config->get("text_config") != nullptr)
        v = config->get("text_config")->get(key);
      if (v != nullptr && v->k == json::kind::number && v->integer) set_special(typ, *v->integer);
    }
  }

  std::optional<std::int64_t> n_vocab_;
  std::vector<std::string> types_{"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  std::map<std::string, json> token_setting_; ///< tokenizer_config.json's <type>_token, as SpecialVocab edits it
  std::vector<std::pair<std::string, std::int64_t>> ids_;
  std::vector<std::pair<std::string, bool>> add_;
  std::vector<std::pair<std::string, std::string>> chat_templates_; ///< name ("" = default), text
};

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
  special_vocab(dir, tokenizer_json, vocab_size).add_to(w);
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
  special_vocab(dir, tj, std::nullopt).add_to(w);
}

} // namespace

void write_tokenizer_metadata(gguf_writer& w, const std::filesystem::path& model_dir) {
  auto ec = std::error_code{};
  if (fs::is_regular_file(model_dir / "tokenizer.model", ec)) return write_sentencepiece(w, model_dir);
  if (fs::is_regular_file(model_dir / "tokenizer.json", ec)) return write_gpt2(w, model_dir);
  fail(model_dir, "neither tokenizer.model nor tokenizer.json");
}

} // namespace troupe::testing
