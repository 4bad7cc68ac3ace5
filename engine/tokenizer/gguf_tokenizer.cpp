// A GGUF file's tokenizer, read as llama.cpp's llama_vocab::load reads the
// keys convert_hf_to_gguf.py writes, and run by troupe's two existing
// implementations: "llama" becomes a SentencePiece ModelProto (BPE over the
// pieces' scores, which is llama.cpp's SPM tokenizer), "gpt2" the
// byte-level BPE of engine/tokenizer/hf/.
//
// Left out, as troupe's decode is Hugging Face's: llama.cpp's clean_spaces.
// Not applied: its per-name token attributes (lstrip on a few models'
// <mask>), and its default BOS/EOS id 11 for a gpt2 vocabulary without
// bos_token_id (GPT-2's own, meaningless for others): absent means none.

#include "engine/formats/gguf.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace troupe {
namespace {

// tokenizer.ggml.token_type, llama.cpp's llama_token_type (0: undefined).
constexpr std::int64_t type_undefined = 0, type_normal = 1, type_unknown = 2, type_control = 3, type_user_defined = 4,
                       type_byte = 6;

// The regexes of llama.cpp's BPE pre-tokenizers, spelled as the models'
// tokenizer.json files spell them: llama.cpp rewrites some ((?i:...), the
// \p{Lu}-style classes) only because its own regex engine lacks them.
constexpr auto gpt2_regex = std::string_view{R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};
constexpr auto llama3_regex = std::string_view{
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto qwen2_regex = std::string_view{
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto gpt4o_regex = std::string_view{
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr auto tekken_regex = std::string_view{
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};

struct pre_tokenizer_entry {
  std::vector<std::string_view> names;   ///< tokenizer.ggml.pre values
  std::vector<std::string_view> regexes; ///< each cuts what the one before left
  bool ignore_merges = false;            ///< llama.cpp's per-name defaults
  bool add_bos = false;
};

auto pre_tokenizers() -> const std::vector<pre_tokenizer_entry>& {
  static const auto table = std::vector<pre_tokenizer_entry>{
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {llama3_regex},
       true,
       true},
      {{"dbrx", "smaug-bpe"}, {llama3_regex}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {qwen2_regex}},
      {{"deepseek-v3"},
       {R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"gpt-4o", "llama4"}, {gpt4o_regex}},
      {{"tekken"}, {tekken_regex}, true, true},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat"}, {gpt2_regex}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", gpt2_regex}},
  };
  return table;
}

auto known_pre_names() -> std::string {
  auto out = std::string{};
  for (const auto& e : pre_tokenizers())
    for (const auto n : e.names) out.append(out.empty() ? "" : ", ").append(n);
  return out;
}

[[noreturn]] void wrong_type(const gguf::file& f, std::string_view key, const gguf::value& v, std::string_view want) {
  fail(f.path(), "metadata " + std::string(key) + " is " + gguf::describe(v) + ", not " + std::string(want));
}

auto strings_of(const gguf::file& f, std::string_view key) -> std::vector<std::string_view> {
  const auto& a = f.require_array(key);
  if (a.type != gguf::value_type::string) wrong_type(f, key, *f.find(key), "an array of strings");
  auto out = std::vector<std::string_view>{};
  out.reserve(a.items.size());
  for (const auto& item : a.items) out.push_back(*item.as_string());
  return out;
}

/// An optional per-token array of numbers; its length must be the tokens'.
auto numbers_of(const gguf::file& f, std::string_view key, std::size_t num_tokens) -> std::optional<std::vector<double>> {
  const auto* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  const auto* a = v->as_array();
  if (a == nullptr || a->type == gguf::value_type::string || a->type == gguf::value_type::array ||
      a->type == gguf::value_type::boolean)
    wrong_type(f, key, *v, "an array of numbers");
  if (a->items.size() != num_tokens)
    fail(f.path(), "metadata " + std::string(key) + " has " + std::to_string(a->items.size()) + " entries for " +
                       std::to_string(num_tokens) + " tokens");
  auto out = std::vector<double>{};
  out.reserve(a->items.size());
  for (const auto& item : a->items) out.push_back(*item.as_double());
  return out;
}

auto optional_bool(const gguf::file& f, std::string_view key) -> std::optional<bool> {
  const auto* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (const auto b = v->as_bool()) return b;
  wrong_type(f, key, *v, "a boolean");
}

auto optional_id(const gguf::file& f, std::string_view key, std::size_t num_tokens) -> std::optional<token_id> {
  const auto* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  const auto id = v->as_uint();
  if (!id) wrong_type(f, key, *v, "a non-negative integer");
  if (*id >= num_tokens)
    fail(f.path(), "metadata " + std::string(key) + " is " + std::to_string(*id) + ", past the " +
                       std::to_string(num_tokens) + " tokens");
  return static_cast<token_id>(*id);
}

/// Per-token types (normal where the file has none); each must be 0 to 6.
auto types_of(const gguf::file& f, std::size_t num_tokens) -> std::vector<std::int64_t> {
  const auto numbers = numbers_of(f, "tokenizer.ggml.token_type", num_tokens);
  auto out = std::vector<std::int64_t>(num_tokens, type_normal);
  if (!numbers) return out;
  for (std::size_t id = 0; id < num_tokens; ++id) {
    const auto t = (*numbers)[id];
    if (t != static_cast<double>(static_cast<std::int64_t>(t)) || t < type_undefined || t > type_byte)
      fail(f.path(), "metadata tokenizer.ggml.token_type of id " + std::to_string(id) + " is " + std::to_string(t) +
                         ", not a token type (0 to 6)");
    out[id] = static_cast<std::int64_t>(t);
  }
  return out;
}

/// llama.cpp refuses a vocabulary that spells one token twice: text could
/// not name it.
auto check_unique(const gguf::file& f, const std::vector<std::string_view>& tokens) -> void {
  auto seen = std::unordered_map<std::string_view, std::size_t>{};
  seen.reserve(tokens.size());
  for (std::size_t id = 0; id < tokens.size(); ++id)
    if (const auto [it, fresh] = seen.emplace(tokens[id], id); !fresh)
      fail(f.path(), "metadata tokenizer.ggml.tokens holds \"" + std::string(tokens[id]) + "\" twice (ids " +
                         std::to_string(it->second) + " and " + std::to_string(id) + ")");
}

// The protobuf wire format of the few ModelProto fields we write. No
// protobuf library: Debian's libsentencepiece-dev ships neither
// sentencepiece_model.pb.h nor a .proto to generate it from, and the
// fields are a handful of varints, floats and strings.
auto put_varint(std::string& out, std::uint64_t v) -> void {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7F) | 0x80));
  out.push_back(static_cast<char>(v));
}
auto put_varint_field(std::string& out, std::uint32_t field, std::uint64_t v) -> void {
  put_varint(out, std::uint64_t{field} << 3 | 0);
  put_varint(out, v);
}
auto put_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) -> void {
  put_varint(out, std::uint64_t{field} << 3 | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
auto put_float_field(std::string& out, std::uint32_t field, float v) -> void {
  put_varint(out, std::uint64_t{field} << 3 | 5);
  char bytes[4];
  std::memcpy(bytes, &v, 4); // little-endian, as protobuf's fixed32
  out.append(bytes, 4);
}

/// "llama": the vocabulary as a SentencePiece BPE ModelProto (pieces with
/// scores and types; trainer_spec: BPE, byte fallback where byte pieces
/// exist; normalizer_spec: identity, the dummy prefix as add_space_prefix
/// says, whitespace as ▁), loaded through the tokenizer.model path.
auto load_llama(const gguf::file& f) -> std::unique_ptr<tokenizer_impl> {
  const auto tokens = strings_of(f, "tokenizer.ggml.tokens");
  const auto n = tokens.size();
  check_unique(f, tokens);
  const auto scores = numbers_of(f, "tokenizer.ggml.scores", n);
  const auto types = types_of(f, n);
  auto proto = std::string{};
  auto piece = std::string{};
  auto has_unknown = false, has_byte = false;
  for (std::size_t id = 0; id < n; ++id) {
    piece.clear();
    put_bytes_field(piece, 1, tokens[id]);
    put_float_field(piece, 2, scores ? static_cast<float>((*scores)[id]) : 0.0f);
    put_varint_field(piece, 3, types[id] == type_undefined ? type_normal : types[id]);
    put_bytes_field(proto, 1, piece);
    has_unknown |= types[id] == type_unknown;
    has_byte |= types[id] == type_byte;
  }
  if (!has_unknown) fail(f.path(), "metadata tokenizer.ggml.token_type marks no unknown token (type 2)");
  auto trainer = std::string{};
  put_varint_field(trainer, 3, 2); // model_type: BPE
  put_varint_field(trainer, 4, n); // vocab_size
  put_varint_field(trainer, 35, has_byte ? 1 : 0); // byte_fallback
  put_bytes_field(proto, 2, trainer);
  auto normalizer = std::string{};
  put_bytes_field(normalizer, 1, "identity");
  put_varint_field(normalizer, 3, optional_bool(f, "tokenizer.ggml.add_space_prefix").value_or(true) ? 1 : 0);
  put_varint_field(normalizer, 4, optional_bool(f, "tokenizer.ggml.remove_extra_whitespaces").value_or(false) ? 1 : 0);
  put_varint_field(normalizer, 5, 1); // escape_whitespaces
  put_bytes_field(proto, 3, normalizer);

  // llama.cpp's SPM defaults: <s> = 1, </s> = 2, BOS added, EOS not.
  auto options = sentencepiece_options{};
  options.bos = optional_id(f, "tokenizer.ggml.bos_token_id", n).value_or(n > 1 ? 1 : -1);
  options.eos = optional_id(f, "tokenizer.ggml.eos_token_id", n).value_or(n > 2 ? 2 : -1);
  options.add_bos = optional_bool(f, "tokenizer.ggml.add_bos_token").value_or(true);
  options.add_eos = optional_bool(f, "tokenizer.ggml.add_eos_token").value_or(false);
  return load_sentencepiece_proto(std::move(proto), f.path(), options);
}

/// "gpt2": the byte-level BPE, its pre-tokenizer named by tokenizer.ggml.pre
/// ("default" where absent, as llama.cpp falls back).
auto load_gpt2(const gguf::file& f) -> std::unique_ptr<tokenizer_impl> {
  const auto* pre_value = f.find("tokenizer.ggml.pre");
  auto pre = std::string_view{"default"};
  if (pre_value != nullptr) pre = f.require_string("tokenizer.ggml.pre");
  const pre_tokenizer_entry* entry = nullptr;
  for (const auto& e : pre_tokenizers())
    if (std::find(e.names.begin(), e.names.end(), pre) != e.names.end()) entry = &e;
  if (entry == nullptr)
    fail(f.path(), "tokenizer.ggml.pre \"" + std::string(pre) + "\" is not supported (supported: " + known_pre_names() + ")");

  const auto tokens = strings_of(f, "tokenizer.ggml.tokens");
  const auto n = tokens.size();
  check_unique(f, tokens);
  const auto types = types_of(f, n);
  auto parts = byte_level_bpe_parts{};
  parts.tokens.assign(tokens.begin(), tokens.end());
  parts.kinds.resize(n, token_kind::normal);
  for (std::size_t id = 0; id < n; ++id) {
    if (types[id] == type_control) parts.kinds[id] = token_kind::control;
    if (types[id] == type_user_defined) parts.kinds[id] = token_kind::user_defined;
  }
  const auto merges = strings_of(f, "tokenizer.ggml.merges");
  parts.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    // As llama.cpp splits: at the first space after the first byte.
    const auto space = merges[i].find(' ', 1);
    if (space == std::string_view::npos)
      fail(f.path(), "metadata tokenizer.ggml.merges entry " + std::to_string(i) + " \"" + std::string(merges[i]) +
                         "\" is not two tokens");
    parts.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
  }
  parts.split_regexes.assign(entry->regexes.begin(), entry->regexes.end());
  parts.ignore_merges = entry->ignore_merges;
  parts.bos = optional_id(f, "tokenizer.ggml.bos_token_id", n).value_or(-1);
  parts.eos = optional_id(f, "tokenizer.ggml.eos_token_id", n).value_or(-1);
  parts.add_bos = optional_bool(f, "tokenizer.ggml.add_bos_token").value_or(entry->add_bos);
  parts.add_eos = optional_bool(f, "tokenizer.ggml.add_eos_token").value_or(false);
  if (parts.add_bos && parts.bos < 0)
    fail(f.path(), "BOS is to be added (tokenizer.ggml.add_bos_token, or the pre-tokenizer's default) but the "
                   "metadata has no tokenizer.ggml.bos_token_id");
  if (parts.add_eos && parts.eos < 0)
    fail(f.path(), "tokenizer.ggml.add_eos_token is true but the metadata has no tokenizer.ggml.eos_token_id");
  return load_byte_level_bpe(std::move(parts), f.path());
}

} // namespace

auto tokenizer::load_gguf(const gguf::file& f) -> tokenizer {
  const auto model = f.require_string("tokenizer.ggml.model");
  if (model == "llama") return tokenizer{load_llama(f)};
  if (model == "gpt2") return tokenizer{load_gpt2(f)};
  fail(f.path(), "tokenizer.ggml.model \"" + std::string(model) + "\" is not supported (supported: llama, gpt2)");
}

} // namespace troupe
