#pragma once
// What tokenizer's two implementations (SentencePiece's tokenizer.model and
// Hugging Face's tokenizer.json) provide. Internal to engine/tokenizer/.

#include "engine/tokenizer/tokenizer.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

/// What encode's add_bos adds to a SentencePiece model: a tokenizer.model
/// says BOS alone; a GGUF file says either, and its own BOS/EOS ids.
struct sentencepiece_options {
  bool add_bos = true;
  bool add_eos = false;
  std::optional<token_id> bos, eos; ///< over the model's own <s> and </s>
};

/// A serialized SentencePiece ModelProto; `source` names it in errors.
auto load_sentencepiece_proto(std::string proto, const std::filesystem::path& source,
                              const sentencepiece_options& options) -> std::unique_ptr<tokenizer_impl>;

/// A byte-level BPE given as parts, not as a tokenizer.json: a GGUF gpt2
/// vocabulary. Matches tokenizer.json's semantics (special tokens matched
/// by both encode entry points, ByteLevel decoding).
struct byte_level_bpe_parts {
  std::vector<std::string> tokens;  ///< per id, in GPT-2's byte alphabet; unique
  std::vector<token_kind> kinds;    ///< per id; control and user_defined ones are matched whole
  std::vector<std::pair<std::string, std::string>> merges; ///< by rank
  std::vector<std::string_view> split_regexes; ///< each cuts what the one before left; read while loading
  bool ignore_merges = false;
  token_id bos = -1, eos = -1;      ///< -1: none; else < tokens.size()
  bool add_bos = false, add_eos = false;
};

/// engine/tokenizer/hf/hf_tokenizer.cpp; `source` names it in errors;
/// throws model_error.
auto load_byte_level_bpe(byte_level_bpe_parts parts, const std::filesystem::path& source)
    -> std::unique_ptr<tokenizer_impl>;
/// engine/tokenizer/hf/hf_tokenizer.cpp: tokenizer.json, with
/// `config_file` (tokenizer_config.json) when it exists; throws model_error.
auto load_hf_tokenizer(const std::filesystem::path& json_file, const std::filesystem::path& config_file)
    -> std::unique_ptr<tokenizer_impl>;

} // namespace troupe
