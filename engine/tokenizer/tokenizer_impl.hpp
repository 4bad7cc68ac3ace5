#pragma once
// What tokenizer's two implementations (SentencePiece's tokenizer.model and
// Hugging Face's tokenizer.json) provide. Internal to engine/tokenizer/.

#include "engine/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

/// A token's role, as the facade's is_byte() / is_control() / ... tell it.
enum class token_kind : std::uint8_t { normal, byte, control, unknown, user_defined };

/// The per-id facts both implementations fill at load and the facade reads:
/// one entry per id in [0, vocab_size).
struct token_table {
  std::vector<token_kind> kinds;
  std::vector<unsigned char> byte_values; ///< meaningful for byte tokens only
  std::vector<std::string> surfaces;      ///< see tokenizer::token_surface
  leading_space_rule leading = leading_space_rule::keep;
  token_id bos = -1;
  token_id eos = -1;

  /// An id outside the vocabulary reads as control (no text, never a byte).
  auto kind(token_id id) const -> token_kind {
    return id >= 0 && static_cast<std::size_t>(id) < kinds.size() ? kinds[id] : token_kind::control;
  }
  auto in_range(token_id id) const -> bool { return id >= 0 && static_cast<std::size_t>(id) < kinds.size(); }
};

class tokenizer_impl {
public:
  virtual ~tokenizer_impl() = default;

  /// `add_special`: what encode's add_bos asks for; `match_special`: whether
  /// special-token spellings become their ids (see tokenizer.hpp).
  virtual auto encode(std::string_view text, bool add_special, bool match_special) const
      -> std::vector<token_id> = 0;
  virtual auto decode(std::span<const token_id> ids) const -> std::string = 0;
  virtual auto piece(token_id id) const -> std::string_view = 0;
  virtual auto id_of(std::string_view piece) const -> token_id = 0;

  token_table table;
};

/// engine/tokenizer/sentencepiece_tokenizer.cpp; throws model_error.
auto load_sentencepiece(const std::filesystem::path& model_file) -> std::unique_ptr<tokenizer_impl>;
/// engine/tokenizer/hf/hf_tokenizer.cpp: tokenizer.json, with
/// `config_file` (tokenizer_config.json) when it exists; throws model_error.
auto load_hf_tokenizer(const std::filesystem::path& json_file, const std::filesystem::path& config_file)
    -> std::unique_ptr<tokenizer_impl>;

} // namespace troupe
