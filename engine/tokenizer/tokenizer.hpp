#pragma once
// SentencePiece tokenizer of a Llama-family model (tokenizer.model).

#include "engine/types.hpp"

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// What decode does with a "▁" opening the text: `keep` it; drop the one a
/// dummy prefix put there (`drop_first`, Llama); or, with
/// remove_extra_whitespaces, drop one per piece until some text appears
/// (`drop_while_empty`).
enum class leading_space_rule { keep, drop_first, drop_while_empty };

class tokenizer {
public:
  /// Loads a sentencepiece model file; throws model_error("<path>: <problem>").
  static auto load(const std::filesystem::path& model_file) -> tokenizer;

  tokenizer(tokenizer&&) noexcept;
  auto operator=(tokenizer&&) noexcept -> tokenizer&;
  ~tokenizer();

  /// Plain text to ids; special-token spellings ("<s>") are ordinary text here.
  auto encode(std::string_view text, bool add_bos) const -> std::vector<token_id>;

  /// Like encode, but the spellings of control/user-defined pieces ("<s>",
  /// "</s>", "<|im_start|>" when the vocabulary has them) become their ids, as
  /// HF tokenizers do for chat-template output.
  auto encode_with_special(std::string_view text, bool add_bos) const -> std::vector<token_id>;

  /// Ids to text, control tokens dropped, leading space of the text removed
  /// (see leading_space()). Ids outside [0, vocab_size()) are skipped.
  auto decode(std::span<const token_id> ids) const -> std::string;

  auto vocab_size() const -> int;
  auto bos_id() const -> token_id; ///< -1 when the model has none
  auto eos_id() const -> token_id; ///< -1 when the model has none
  auto piece(token_id id) const -> std::string_view; ///< "▁the", "<0x0A>", "<s>"
  auto is_byte(token_id id) const -> bool;    ///< a byte-fallback piece <0xNN>
  auto byte_value(token_id id) const -> unsigned char; ///< requires is_byte(id)
  auto is_control(token_id id) const -> bool; ///< <s>, </s>; not <unk>
  auto is_unknown(token_id id) const -> bool;
  auto is_user_defined(token_id id) const -> bool; ///< always matched whole by encode
  auto leading_space() const -> leading_space_rule;
  auto id_of(std::string_view piece) const -> token_id; ///< -1 when absent


private:
  tokenizer();
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe
