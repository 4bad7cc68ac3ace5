#include "engine/make_model/train_tokenizer.hpp"

#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace troupe {
namespace {

auto read_bytes(const std::filesystem::path& file) -> std::string {
  auto in = std::ifstream(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

auto train_error(const std::vector<std::filesystem::path>& inputs, int vocab_size,
                 const std::filesystem::path& out) -> std::string {
  try {
    train_tokenizer(inputs, vocab_size, out);
  } catch (const model_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("train_tokenizer: the same inputs give a byte-identical model") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  train_tokenizer(license_corpus_files(), 2000, dir / "a.model");
  train_tokenizer(license_corpus_files(), 2000, dir / "b.model");
  const auto a = read_bytes(dir / "a.model");
  REQUIRE(a.size() > 10000);
  CHECK(a == read_bytes(dir / "b.model"));
  CHECK(a == read_bytes(testing::test_tokenizer_file()));
  // ...and different settings a different one.
  train_tokenizer(license_corpus_files(), 1000, dir / "c.model");
  const auto c = read_bytes(dir / "c.model");
  CHECK(c != a);
  CHECK(tokenizer::load(dir / "c.model").vocab_size() == 1000);
}

TEST_CASE("train_tokenizer: failures name the file") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  const auto absent = dir / "absent.txt";
  CHECK(train_error({absent}, 500, dir / "x.model") == absent.string() + ": cannot read");
  CHECK(train_error(license_corpus_files(), 500, dir / "no-dir" / "x.model")
        == (dir / "no-dir" / "x.model").string() + ": cannot write");
  const auto message = train_error(license_corpus_files(), 1000000, dir / "y.model");
  CHECK(message.starts_with((dir / "y.model").string() + ": training failed: "));
}

} // namespace troupe
