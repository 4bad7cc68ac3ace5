#include "engine/tokenizer/tokenizer.hpp"

#include "engine/formats/gguf.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/tokenizer_impl.hpp"

#include <system_error>

namespace troupe {

tokenizer::tokenizer(std::unique_ptr<tokenizer_impl> impl) : impl_(std::move(impl)) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
auto tokenizer::operator=(tokenizer&&) noexcept -> tokenizer& = default;
tokenizer::~tokenizer() = default;

auto tokenizer::load(const std::filesystem::path& file) -> tokenizer {
  if (file.extension() == ".json")
    return tokenizer{load_hf_tokenizer(file, file.parent_path() / "tokenizer_config.json")};
  return tokenizer{load_sentencepiece(file)};
}

auto tokenizer::file_in_dir(const std::filesystem::path& dir) -> std::filesystem::path {
  if (gguf::is_gguf_file(dir)) return dir;
  auto ec = std::error_code{};
  if (std::filesystem::is_regular_file(dir / "tokenizer.json", ec)) return dir / "tokenizer.json";
  return dir / "tokenizer.model";
}

auto tokenizer::load_dir(const std::filesystem::path& dir) -> tokenizer {
  if (gguf::is_gguf_file(dir)) return load_gguf(*gguf::file::open(dir));
  const auto file = file_in_dir(dir);
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(file, ec))
    fail(dir, "no tokenizer.json or tokenizer.model (a tokenizer saved only for PyTorch, or none, "
              "cannot be read: save it with AutoTokenizer's save_pretrained)");
  return load(file);
}

auto tokenizer::encode(std::string_view text, bool add_bos) const -> std::vector<token_id> {
  return impl_->encode(text, add_bos, false);
}

auto tokenizer::encode_with_special(std::string_view text, bool add_bos) const -> std::vector<token_id> {
  return impl_->encode(text, add_bos, true);
}

auto tokenizer::decode(std::span<const token_id> ids) const -> std::string { return impl_->decode(ids); }
auto tokenizer::vocab_size() const -> int { return static_cast<int>(impl_->table.kinds.size()); }
auto tokenizer::bos_id() const -> token_id { return impl_->table.bos; }
auto tokenizer::eos_id() const -> token_id { return impl_->table.eos; }
auto tokenizer::piece(token_id id) const -> std::string_view { return impl_->piece(id); }
auto tokenizer::is_byte(token_id id) const -> bool { return impl_->table.kind(id) == token_kind::byte; }

auto tokenizer::byte_value(token_id id) const -> unsigned char {
  return is_byte(id) ? impl_->table.byte_values[id] : 0;
}

auto tokenizer::is_control(token_id id) const -> bool {
  return impl_->table.in_range(id) && impl_->table.kinds[id] == token_kind::control;
}

auto tokenizer::is_unknown(token_id id) const -> bool { return impl_->table.kind(id) == token_kind::unknown; }
auto tokenizer::is_user_defined(token_id id) const -> bool {
  return impl_->table.kind(id) == token_kind::user_defined;
}
auto tokenizer::leading_space() const -> leading_space_rule { return impl_->table.leading; }
auto tokenizer::id_of(std::string_view piece) const -> token_id { return impl_->id_of(piece); }

auto tokenizer::token_surface(token_id id) const -> std::string_view {
  return impl_->table.in_range(id) ? std::string_view{impl_->table.surfaces[id]} : std::string_view{};
}

} // namespace troupe
