#include "tests/support/test_tokenizer.hpp"

#include "engine/tokenizer/train_tokenizer.hpp"
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

} // namespace troupe::testing
