#include "tests/support/gguf_special_vocab.hpp"

#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace troupe::testing::vocab {
namespace {

namespace fs = std::filesystem;
namespace dom = simdjson::dom;

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

} // namespace

[[noreturn]] void fail(const fs::path& file, const std::string& problem) {
  throw std::runtime_error(file.string() + ": " + problem);
}

auto read_text(const fs::path& file) -> std::string {
  auto in = std::ifstream(file, std::ios::binary);
  if (!in) fail(file, "cannot read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

namespace {

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

} // namespace

void add_special_vocab(gguf_writer& w, const fs::path& dir, std::optional<dom::element> tokenizer_json,
                       std::optional<std::int64_t> n_vocab) {
  special_vocab(dir, tokenizer_json, n_vocab).add_to(w);
}

} // namespace troupe::testing::vocab
