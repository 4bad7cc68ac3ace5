#pragma once
// A model's tokenizer: SentencePiece (tokenizer.model), Hugging Face
// (tokenizer.json) or a GGUF file's metadata, behind one facade. Each is
// loaded at start-up and then only read: one tokenizer may serve many
// threads at once.

#include "base/types.hpp"

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

namespace gguf {
class file;
}
class tokenizer_impl;

/// What decode does with a space opening the text: `keep` it; drop the one a
/// dummy prefix put there (`drop_first`: SentencePiece's Llama, and
/// tokenizer.json's Strip and Metaspace decoders); or, with
/// remove_extra_whitespaces, drop one per piece until some text appears
/// (`drop_while_empty`).
enum class leading_space_rule { keep, drop_first, drop_while_empty };

/// Special tokens and the two encode entry points.
///
/// SentencePiece: `encode` treats every spelling as text ("<s>" is four
/// characters); `encode_with_special` turns the spellings of control and
/// user-defined pieces into their ids.
///
/// tokenizer.json: both match the added tokens (special or not) before the
/// model, as Hugging Face's AddedVocabulary does; `encode` leaves special
/// ones as text only where tokenizer_config.json sets split_special_tokens,
/// `encode_with_special` matches them always. add_bos = true applies what
/// AutoTokenizer's encode adds: tokenizer_config.json's add_bos_token /
/// add_eos_token (with bos_token / eos_token) where it sets either, else the
/// post-processor's template (BOS, and EOS if the template has one).
class tokenizer {
public:
  /// Loads `file`: a tokenizer.json (by its .json name, with the
  /// tokenizer_config.json beside it) or a SentencePiece model; throws
  /// model_error("<path>: <problem>") naming what is not supported.
  static auto load(const std::filesystem::path& file) -> tokenizer;

  /// A model directory's tokenizer: dir/tokenizer.json where present (as HF
  /// transformers' fast tokenizer and vLLM choose), else dir/tokenizer.model;
  /// neither is one model_error line. A GGUF file instead of a directory:
  /// its metadata's (load_gguf).
  static auto load_dir(const std::filesystem::path& dir) -> tokenizer;

  /// The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*),
  /// as llama.cpp reads it. "llama": a SentencePiece BPE over the pieces'
  /// scores (byte fallback, add_space_prefix's dummy prefix), BOS added
  /// unless add_bos_token says not. "gpt2": a byte-level BPE with the
  /// merges, pre-tokenized by the regexes llama.cpp maps tokenizer.ggml.pre
  /// to, control and user-defined tokens matched whole (as tokenizer.json's
  /// added tokens), BOS/EOS as add_bos_token / add_eos_token or the
  /// pre-tokenizer's default say. Throws model_error("<file>: <problem>")
  /// naming another tokenizer model or pre-tokenizer, a missing or mistyped
  /// key, or arrays whose lengths disagree.
  static auto load_gguf(const gguf::file& f) -> tokenizer;

  /// The file load_dir would read (for error messages), existing or not.
  static auto file_in_dir(const std::filesystem::path& dir) -> std::filesystem::path;

  tokenizer(tokenizer&&) noexcept;
  auto operator=(tokenizer&&) noexcept -> tokenizer&;
  ~tokenizer();

  /// Plain text to ids (see the class comment for special tokens and BOS).
  auto encode(std::string_view text, bool add_bos) const -> std::vector<token_id>;

  /// Like encode, but special-token spellings ("<s>", "<|im_start|>")
  /// always become their ids, as HF tokenizers do for chat-template output.
  auto encode_with_special(std::string_view text, bool add_bos) const -> std::vector<token_id>;

  /// Ids to text, control (special) tokens skipped: SentencePiece's Decode, or
  /// HF's decode(ids, skip_special_tokens=true). Ids outside [0,
  /// vocab_size()) are skipped.
  auto decode(std::span<const token_id> ids) const -> std::string;

  auto vocab_size() const -> int;
  auto bos_id() const -> token_id; ///< -1 when the model has none
  auto eos_id() const -> token_id; ///< -1 when the model has none
  auto piece(token_id id) const -> std::string_view; ///< "▁the", "<0x0A>", "Ġthe", "<s>"
  auto is_byte(token_id id) const -> bool;    ///< a byte-fallback piece <0xNN>
  auto byte_value(token_id id) const -> unsigned char; ///< requires is_byte(id)
  auto is_control(token_id id) const -> bool; ///< <s>, </s>, HF special tokens; not SP's <unk>
  auto is_unknown(token_id id) const -> bool;
  auto is_user_defined(token_id id) const -> bool; ///< always matched whole by encode
  auto leading_space() const -> leading_space_rule;
  auto id_of(std::string_view piece) const -> token_id; ///< -1 when absent

  /// The bytes `id` adds to decoded text mid-stream, before any leading-space
  /// rule: "▁the" and "Ġthe" give " the", a byte piece its byte, SP's unknown
  /// piece " ⁇ "; "" for control tokens and ids outside the vocabulary. A
  /// byte-level token's bytes need not be UTF-8 alone. O(1).
  auto token_surface(token_id id) const -> std::string_view;

private:
  explicit tokenizer(std::unique_ptr<tokenizer_impl> impl);
  std::unique_ptr<tokenizer_impl> impl_;
};

} // namespace troupe
