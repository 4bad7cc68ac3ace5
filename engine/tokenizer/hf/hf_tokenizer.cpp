// The Hugging Face implementation of tokenizer: tokenizer.json (with
// tokenizer_config.json's BOS/EOS settings), run as HF tokenizers' encode:
// added tokens on the raw text, normalizer, added tokens on the normalized
// text, pre-tokenizer, BPE, post-processor.
//
// Left out on purpose, as transformers leaves them: the file's "truncation"
// and "padding". Not applied: transformers 5's fix_mistral_regex patch and
// clean_up_tokenization_spaces (decode is HF tokenizers' decode).

#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/hf/added_vocabulary.hpp"
#include "engine/tokenizer/hf/bpe.hpp"
#include "engine/tokenizer/hf/decoder.hpp"
#include "engine/tokenizer/hf/json.hpp"
#include "engine/tokenizer/hf/normalizer.hpp"
#include "engine/tokenizer/hf/pre_tokenizer.hpp"
#include "engine/tokenizer/hf/unicode.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"
#include "base/utf8.hpp"

#include <algorithm>
#include <system_error>

namespace troupe {
namespace {

using namespace troupe::hf;

/// The ids a post-processor puts around a single sequence.
struct template_ids {
  std::vector<token_id> prefix, suffix;
};

auto parse_post_processor(dom::element json, template_ids& out) -> void {
  const auto type = type_of(json, "post_processor");
  if (type == "Sequence") {
    auto list = dom::array{};
    if (json["processors"].get_array().get(list) != simdjson::SUCCESS)
      throw hf_error("post_processor Sequence has no \"processors\" list");
    for (const auto item : list) parse_post_processor(item, out);
    return;
  }
  if (type == "ByteLevel") return; // offsets only
  auto inner = template_ids{};
  if (type == "TemplateProcessing") {
    auto specials = dom::object{};
    if (json["special_tokens"].get_object().get(specials) != simdjson::SUCCESS)
      throw hf_error("post_processor TemplateProcessing has no \"special_tokens\"");
    auto single = dom::array{};
    if (json["single"].get_array().get(single) != simdjson::SUCCESS)
      throw hf_error("post_processor TemplateProcessing has no \"single\" template");
    auto seen_sequence = false;
    for (const auto item : single) {
      if (const auto s = field(item, "Sequence")) {
        if (string_field(*s, "id", "template Sequence") != "A")
          throw hf_error("post_processor TemplateProcessing: single template names sequence B");
        seen_sequence = true;
        continue;
      }
      const auto sp = field(item, "SpecialToken");
      if (!sp) throw hf_error("post_processor TemplateProcessing: a template item is neither Sequence nor SpecialToken");
      const auto name = string_field(*sp, "id", "template SpecialToken");
      auto entry = dom::element{};
      auto ids = dom::array{};
      if (specials.at_key(name).get(entry) != simdjson::SUCCESS || entry["ids"].get_array().get(ids) != simdjson::SUCCESS)
        throw hf_error("post_processor TemplateProcessing: special token \"" + std::string(name) + "\" has no ids");
      auto& dest = seen_sequence ? inner.suffix : inner.prefix;
      for (const auto id : ids) {
        auto v = std::int64_t{0};
        if (id.get_int64().get(v) != simdjson::SUCCESS) throw hf_error("post_processor: an id is not an integer");
        dest.push_back(static_cast<token_id>(v));
      }
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    const auto id_of = [&](std::string_view key) {
      auto pair = dom::array{};
      auto v = std::int64_t{0};
      if (json[key].get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
          pair.at(1).get_int64().get(v) != simdjson::SUCCESS)
        throw hf_error("post_processor " + std::string(type) + ": no \"" + std::string(key) + "\" [token, id]");
      return static_cast<token_id>(v);
    };
    inner.prefix.push_back(id_of("cls"));
    inner.suffix.push_back(id_of("sep"));
  } else {
    unsupported("post_processor", type);
  }
  // A later processor wraps what the earlier ones made.
  inner.prefix.insert(inner.prefix.end(), out.prefix.begin(), out.prefix.end());
  out.suffix.insert(out.suffix.end(), inner.suffix.begin(), inner.suffix.end());
  out.prefix = std::move(inner.prefix);
}

/// tokenizer_config.json's settings that change encoding.
struct config_settings {
  std::optional<bool> add_bos, add_eos;
  std::optional<std::string> bos_token, eos_token;
  bool split_special_tokens = false;
};

/// A token setting's content: a string, or an AddedToken object's
/// "content"; nullopt when absent or null.
auto token_content(simdjson::ondemand::object& obj, std::string_view key) -> std::optional<std::string> {
  auto value = simdjson::ondemand::value{};
  if (obj.find_field_unordered(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  auto type = simdjson::ondemand::json_type{};
  if (value.type().get(type) != simdjson::SUCCESS || type == simdjson::ondemand::json_type::null) return std::nullopt;
  auto s = std::string_view{};
  if (type == simdjson::ondemand::json_type::string && value.get_string().get(s) == simdjson::SUCCESS)
    return std::string(s);
  auto inner = simdjson::ondemand::object{};
  if (type == simdjson::ondemand::json_type::object && value.get_object().get(inner) == simdjson::SUCCESS &&
      inner.find_field_unordered("content").get_string().get(s) == simdjson::SUCCESS)
    return std::string(s);
  throw hf_error("\"" + std::string(key) + "\" is neither a string nor a token object");
}

auto optional_bool(simdjson::ondemand::object& obj, std::string_view key) -> std::optional<bool> {
  auto value = simdjson::ondemand::value{};
  if (obj.find_field_unordered(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  auto type = simdjson::ondemand::json_type{};
  if (value.type().get(type) != simdjson::SUCCESS || type == simdjson::ondemand::json_type::null) return std::nullopt;
  auto b = false;
  if (value.get_bool().get(b) != simdjson::SUCCESS) throw hf_error("\"" + std::string(key) + "\" is not a boolean");
  return b;
}

/// Read with On-Demand: these files hold integers past 64 bits
/// (model_max_length 1e30), which the DOM parser refuses.
auto read_config(const std::filesystem::path& file) -> config_settings {
  auto out = config_settings{};
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(file, ec)) return out;
  auto json = simdjson::padded_string{};
  if (simdjson::padded_string::load(file.string()).get(json) != simdjson::SUCCESS) fail(file, "cannot read");
  auto parser = simdjson::ondemand::parser{};
  auto doc = simdjson::ondemand::document{};
  auto obj = simdjson::ondemand::object{};
  if (const auto err = parser.iterate(json).get(doc); err) fail(file, simdjson::error_message(err));
  if (const auto err = doc.get_object().get(obj); err) fail(file, std::string("not a JSON object: ") + simdjson::error_message(err));
  try {
    out.add_bos = optional_bool(obj, "add_bos_token");
    out.add_eos = optional_bool(obj, "add_eos_token");
    out.bos_token = token_content(obj, "bos_token");
    out.eos_token = token_content(obj, "eos_token");
    out.split_special_tokens = optional_bool(obj, "split_special_tokens").value_or(false);
  } catch (const hf_error& e) {
    fail(file, e.what());
  }
  return out;
}

class hf_tokenizer final : public tokenizer_impl {
public:
  auto load(const std::filesystem::path& file, const std::filesystem::path& config_file) -> void;

  auto encode(std::string_view text, bool add_special, bool match_special) const -> std::vector<token_id> override;
  auto decode(std::span<const token_id> ids) const -> std::string override;
  auto piece(token_id id) const -> std::string_view override {
    return table.in_range(id) ? std::string_view{pieces_[id]} : std::string_view{};
  }
  auto id_of(std::string_view piece) const -> token_id override {
    const auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }

  /// A GGUF gpt2 vocabulary: the parts llama.cpp builds from it.
  auto load_parts(byte_level_bpe_parts parts) -> void;

private:
  auto load_json(dom::element doc, const config_settings& config) -> void;
  /// What both loaders share once the model is built: ids and pieces, the
  /// token table, the added tokens' matcher, BOS/EOS and what encode adds.
  auto finish(std::vector<added_token> added, template_ids tmpl, const config_settings& config) -> void;
  auto encode_segment(std::string_view segment, bool at_start, bool skip_special, std::vector<token_id>& out) const
      -> void;

  std::unique_ptr<normalizer> normalizer_;
  std::unique_ptr<pre_tokenizer> pre_tokenizer_;
  std::unique_ptr<bpe> model_;
  std::unique_ptr<added_vocabulary> added_;
  std::unique_ptr<decoder> decoder_;
  template_ids template_;
  bool split_special_tokens_ = false;
  std::vector<std::string> pieces_; ///< per id, as in the file
  std::unordered_map<std::string, token_id, string_hash, std::equal_to<>> ids_;
};

auto hf_tokenizer::load(const std::filesystem::path& file, const std::filesystem::path& config_file) -> void {
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(file, ec)) fail(file, "no such file");
  const auto config = read_config(config_file);
  auto parser = dom::parser{};
  auto doc = dom::element{};
  if (const auto err = parser.load(file.string()).get(doc); err)
    fail(file, std::string("not valid JSON: ") + simdjson::error_message(err));
  try {
    load_json(doc, config);
  } catch (const hf_error& e) {
    fail(file, e.what());
  }
}

auto hf_tokenizer::load_json(dom::element doc, const config_settings& config) -> void {
  const auto model = field(doc, "model");
  if (!model) throw hf_error("no \"model\"");
  const auto type = opt_string(*model, "type").value_or(field(*model, "merges") ? "BPE" : "");
  if (type != "BPE") unsupported("model", type.empty() ? "(none)" : type);
  normalizer_ = std::make_unique<normalizer>(field(doc, "normalizer"));
  pre_tokenizer_ = std::make_unique<pre_tokenizer>(field(doc, "pre_tokenizer"));
  decoder_ = std::make_unique<decoder>(field(doc, "decoder"));
  model_ = std::make_unique<bpe>(parse_bpe_spec(*model), pre_tokenizer_->byte_level());

  auto added = std::vector<added_token>{};
  if (const auto list = field(doc, "added_tokens")) {
    auto items = dom::array{};
    if (list->get_array().get(items) != simdjson::SUCCESS) throw hf_error("\"added_tokens\" is not a list");
    for (const auto item : items) {
      auto t = added_token{};
      t.id = static_cast<token_id>(int_field(item, "id", -1));
      if (t.id < 0) throw hf_error("an added token has no id");
      t.content = std::string(string_field(item, "content", "an added token"));
      t.special = bool_field(item, "special", false);
      t.lstrip = bool_field(item, "lstrip", false);
      t.rstrip = bool_field(item, "rstrip", false);
      t.normalized = bool_field(item, "normalized", !t.special);
      t.single_word = bool_field(item, "single_word", false);
      added.push_back(std::move(t));
    }
  }

  auto tmpl = template_ids{};
  if (const auto pp = field(doc, "post_processor")) parse_post_processor(*pp, tmpl);
  finish(std::move(added), std::move(tmpl), config);
}

auto hf_tokenizer::load_parts(byte_level_bpe_parts parts) -> void {
  normalizer_ = std::make_unique<normalizer>(std::nullopt);
  pre_tokenizer_ = std::make_unique<pre_tokenizer>(parts.split_regexes);
  decoder_ = std::make_unique<decoder>(decoder::byte_level());
  auto spec = bpe_spec{};
  spec.ignore_merges = parts.ignore_merges;
  spec.merges = std::move(parts.merges);
  auto added = std::vector<added_token>{};
  spec.vocab.reserve(parts.tokens.size());
  for (token_id id = 0; id < static_cast<token_id>(parts.tokens.size()); ++id) {
    const auto kind = parts.kinds[id];
    // Control and user-defined tokens are matched whole on the raw text, as
    // llama.cpp matches them (its converter wrote them pre-normalized).
    if (kind == token_kind::control || kind == token_kind::user_defined)
      added.push_back({parts.tokens[id], id, kind == token_kind::control, false, false, false, false});
    spec.vocab.emplace_back(std::move(parts.tokens[id]), id);
  }
  model_ = std::make_unique<bpe>(std::move(spec), true);
  auto config = config_settings{};
  config.add_bos = parts.add_bos;
  config.add_eos = parts.add_eos;
  if (parts.bos >= 0) config.bos_token = model_->vocab()[parts.bos].first;
  if (parts.eos >= 0) config.eos_token = model_->vocab()[parts.eos].first;
  finish(std::move(added), {}, config);
}

auto hf_tokenizer::finish(std::vector<added_token> added, template_ids tmpl, const config_settings& config) -> void {
  template_ = std::move(tmpl);
  // Ids: the model's vocabulary, then added tokens (which may repeat them).
  auto size = token_id{0};
  for (const auto& [text, id] : model_->vocab()) size = std::max(size, id + 1);
  for (const auto& t : added) size = std::max(size, t.id + 1);
  pieces_.assign(static_cast<std::size_t>(size), std::string{});
  for (const auto& [text, id] : model_->vocab()) pieces_[id] = text;
  for (const auto& t : added) pieces_[t.id] = t.content;
  for (token_id id = 0; id < size; ++id)
    if (!pieces_[id].empty()) ids_.emplace(pieces_[id], id);

  auto& tb = table;
  tb.kinds.assign(pieces_.size(), token_kind::normal);
  tb.byte_values.assign(pieces_.size(), 0);
  tb.surfaces.assign(pieces_.size(), std::string{});
  if (model_->unk_id() >= 0) tb.kinds[model_->unk_id()] = token_kind::unknown;
  for (const auto& t : added) tb.kinds[t.id] = t.special ? token_kind::control : token_kind::user_defined;
  for (token_id id = 0; id < size; ++id) {
    if (tb.kinds[id] == token_kind::control) continue; // decode skips it: no surface
    auto is_byte = false;
    auto byte = static_cast<unsigned char>(0);
    tb.surfaces[id] = decoder_->surface(pieces_[id], is_byte, byte);
    if (is_byte && tb.kinds[id] == token_kind::normal) {
      tb.kinds[id] = token_kind::byte;
      tb.byte_values[id] = byte;
    }
  }
  tb.leading = decoder_->leading();

  added_ = std::make_unique<added_vocabulary>(std::move(added),
                                              [&](const std::string& s) { return normalizer_->apply(s); });

  split_special_tokens_ = config.split_special_tokens;
  const auto token_id_of = [&](const std::optional<std::string>& content, std::string_view key) -> token_id {
    if (!content) return -1;
    const auto id = id_of(*content);
    if (id < 0) throw hf_error("tokenizer_config.json's " + std::string(key) + " \"" + *content + "\" is not a token");
    return id;
  };
  tb.bos = token_id_of(config.bos_token, "bos_token");
  tb.eos = token_id_of(config.eos_token, "eos_token");
  // PreTrainedTokenizerFast's update_post_processor: where the config sets
  // add_bos_token or add_eos_token, they replace the file's template.
  if (config.add_bos || config.add_eos) {
    template_ = {};
    if (config.add_bos.value_or(false)) {
      if (tb.bos < 0) throw hf_error("tokenizer_config.json sets add_bos_token but no bos_token");
      template_.prefix.push_back(tb.bos);
    }
    if (config.add_eos.value_or(false)) {
      if (tb.eos < 0) throw hf_error("tokenizer_config.json sets add_eos_token but no eos_token");
      template_.suffix.push_back(tb.eos);
    }
  }
  if (tb.bos < 0 && !template_.prefix.empty()) tb.bos = template_.prefix.front();
  for (const auto id : template_.prefix)
    if (!tb.in_range(id)) throw hf_error("post_processor names id " + std::to_string(id) + ", not in the vocabulary");
  for (const auto id : template_.suffix)
    if (!tb.in_range(id)) throw hf_error("post_processor names id " + std::to_string(id) + ", not in the vocabulary");
}

auto hf_tokenizer::encode_segment(std::string_view segment, bool at_start, bool skip_special,
                                  std::vector<token_id>& out) const -> void {
  thread_local std::vector<pre_token> words, scratch;
  const auto normalized = normalizer_->empty() ? std::string(segment) : normalizer_->apply(segment);
  auto spans = std::vector<text_span>{};
  added_->split(normalized, true, skip_special, spans);
  for (const auto& s : spans) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    words.clear();
    pre_tokenizer_->split(std::string_view{normalized}.substr(s.begin, s.end - s.begin), at_start && s.begin == 0,
                          words, scratch);
    for (const auto& w : words) model_->tokenize(w.text, out);
  }
}

auto hf_tokenizer::encode(std::string_view text, bool add_special, bool match_special) const
    -> std::vector<token_id> {
  auto fixed = std::string{};
  if (!is_valid_utf8(text)) { // HF takes Rust strings, always UTF-8
    fixed = utf8_lossy(text);
    text = fixed;
  }
  const auto skip_special = !match_special && split_special_tokens_;
  auto out = std::vector<token_id>{};
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), template_.prefix.begin(), template_.prefix.end());
  auto spans = std::vector<text_span>{};
  added_->split(text, false, skip_special, spans);
  for (const auto& s : spans) {
    if (s.id >= 0) out.push_back(s.id);
    else encode_segment(text.substr(s.begin, s.end - s.begin), s.begin == 0, skip_special, out);
  }
  if (add_special) out.insert(out.end(), template_.suffix.begin(), template_.suffix.end());
  return out;
}

auto hf_tokenizer::decode(std::span<const token_id> ids) const -> std::string {
  auto tokens = std::vector<std::string>{};
  tokens.reserve(ids.size());
  for (const auto id : ids)
    if (table.in_range(id) && table.kinds[id] != token_kind::control) tokens.push_back(pieces_[id]);
  return decoder_->decode(std::move(tokens));
}

} // namespace

auto load_byte_level_bpe(byte_level_bpe_parts parts, const std::filesystem::path& source)
    -> std::unique_ptr<tokenizer_impl> {
  auto tok = std::make_unique<hf_tokenizer>();
  try {
    tok->load_parts(std::move(parts));
  } catch (const hf_error& e) {
    fail(source, e.what());
  }
  return tok;
}

auto load_hf_tokenizer(const std::filesystem::path& json_file, const std::filesystem::path& config_file)
    -> std::unique_ptr<tokenizer_impl> {
  auto tok = std::make_unique<hf_tokenizer>();
  tok->load(json_file, config_file);
  return tok;
}

} // namespace troupe
