#include "engine/tokenizer/tokenizer.hpp"

#include "engine/formats/model_error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace troupe {
namespace {

auto concat(std::vector<token_id> a, const std::vector<token_id>& b) -> std::vector<token_id> {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

auto load_error(const std::filesystem::path& file) -> std::string {
  try {
    (void)tokenizer::load(file);
  } catch (const model_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("tokenizer: the trained model has Llama's special pieces") {
  const auto& tok = testing::test_tokenizer();
  CHECK(tok.vocab_size() == 2000);
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.piece(0) == "<unk>");
  CHECK(tok.piece(1) == "<s>");
  CHECK(tok.piece(2) == "</s>");
  CHECK(tok.is_unknown(0));
  CHECK_FALSE(tok.is_control(0));
  CHECK(tok.is_control(1));
  CHECK(tok.is_control(2));
  CHECK_FALSE(tok.is_control(3));
  // 256 byte pieces follow, <0x00> at 3: newline is <0x0A> = 13 as in Llama.
  for (int b = 0; b < 256; ++b) {
    CHECK(tok.is_byte(3 + b));
    CHECK(tok.byte_value(3 + b) == b);
  }
  CHECK(tok.piece(13) == "<0x0A>");
  CHECK_FALSE(tok.is_byte(259));
  CHECK(tok.id_of("<s>") == 1);
  CHECK(tok.id_of("<unk>") == 0);
  CHECK(tok.id_of("<0xFF>") == 258);
  CHECK(tok.id_of("no such piece") == -1);
  CHECK(tok.id_of(tok.piece(1234)) == 1234);
  CHECK(tok.piece(-1).empty());
  CHECK(tok.piece(2000).empty());
  CHECK_FALSE(tok.is_control(2000));
  CHECK(tok.leading_space() == leading_space_rule::drop_first);
  for (token_id id = 0; id < tok.vocab_size(); ++id) CHECK_FALSE(tok.is_user_defined(id));
}

TEST_CASE("tokenizer: load errors name the file") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  CHECK(load_error(dir / "absent.model") == (dir / "absent.model").string() + ": no such file");
  CHECK(load_error(dir) == dir.string() + ": no such file");
  std::ofstream(dir / "garbage.model") << "this is not a protobuf";
  const auto message = load_error(dir / "garbage.model");
  CHECK(message.starts_with((dir / "garbage.model").string() + ": not a sentencepiece model"));
}

TEST_CASE("tokenizer: encode then decode gives the text back") {
  const auto& tok = testing::test_tokenizer();
  auto texts = std::vector<std::string>{
      "Hello world", "The GNU General Public License", "  two  spaces", " leading space",
      "trailing space ", "tab\tand\ttabs", "12345", "version 2.1 of 1999", "line1\nline2\n",
      "\n\n\nthree newlines", "café naïve façade", "日本語のテキスト", "emoji 😀🎉 done",
      "mixed: Ωμέγα, Привет, عربى", "<s> not special </s>", "a\r\nb", "x", "",
  };
  // Every line of a licence, including blank and indented ones.
  auto in = std::ifstream("/usr/share/common-licenses/GPL-3");
  for (auto line = std::string{}; std::getline(in, line);) texts.push_back(line);
  REQUIRE(texts.size() > 600);
  for (const auto& text : texts) {
    CAPTURE(text);
    const auto ids = tok.encode(text, false);
    CHECK(tok.decode(ids) == text);
    const auto with_bos = tok.encode(text, true);
    REQUIRE(!with_bos.empty());
    CHECK(with_bos.front() == 1);
    CHECK(tok.decode(with_bos) == text);
  }
  CHECK(tok.encode("", false).empty());
}

TEST_CASE("tokenizer: digits are split, unknown bytes fall back, spellings are text") {
  const auto& tok = testing::test_tokenizer();
  auto pieces = [&](std::string_view text) {
    auto out = std::vector<std::string>{};
    for (auto id : tok.encode(text, false)) out.emplace_back(tok.piece(id));
    return out;
  };
  CHECK(pieces("12345") == std::vector<std::string>{"▁", "1", "2", "3", "4", "5"});
  CHECK(pieces("日") == std::vector<std::string>{"▁", "<0xE6>", "<0x97>", "<0xA5>"});
  CHECK(pieces("\n") == std::vector<std::string>{"▁", "<0x0A>"});
  for (auto id : tok.encode("<s></s>", false)) {
    CHECK_FALSE(tok.is_control(id));
    CHECK_FALSE(tok.is_unknown(id));
  }
}

TEST_CASE("tokenizer: encode_with_special maps <s> and </s> to their ids") {
  const auto& tok = testing::test_tokenizer();
  CHECK(tok.encode_with_special("<s>", false) == std::vector<token_id>{1});
  CHECK(tok.encode_with_special("</s>", false) == std::vector<token_id>{2});
  CHECK(tok.encode_with_special("<s>", true) == std::vector<token_id>{1, 1});
  // Each stretch between specials is encoded alone, as Meta's chat code does.
  CHECK(tok.encode_with_special("<s>[INST] hi [/INST] yes </s><s>[INST] more [/INST]", false)
        == concat(concat(concat({1}, tok.encode("[INST] hi [/INST] yes ", false)), {2, 1}),
                  tok.encode("[INST] more [/INST]", false)));
  CHECK(tok.encode_with_special("a</s>b", true)
        == concat(concat(concat({1}, tok.encode("a", false)), {2}), tok.encode("b", false)));
  CHECK(tok.encode_with_special("no specials", false) == tok.encode("no specials", false));
  CHECK(tok.encode_with_special("<s", false) == tok.encode("<s", false));
  CHECK(tok.encode_with_special("", false).empty());
  CHECK(tok.decode(tok.encode_with_special("<s>hello</s>", false)) == "hello");
}

TEST_CASE("tokenizer: decode drops control ids, skips foreign ids, shows <unk>") {
  const auto& tok = testing::test_tokenizer();
  const auto hi = tok.encode("hi there", false);
  CHECK(tok.decode(concat(concat({1}, hi), {2})) == "hi there");
  CHECK(tok.decode(concat(concat({-5}, hi), {2000, 99999})) == "hi there");
  CHECK(tok.decode(std::vector<token_id>{0}) == " \xE2\x81\x87 ");
  CHECK(tok.decode(std::vector<token_id>{}).empty());
  // A stray continuation byte decodes as U+FFFD.
  CHECK(tok.decode(std::vector<token_id>{tok.id_of("<0x97>")}) == "\xEF\xBF\xBD");
}

TEST_CASE("tokenizer: a moved-from tokenizer's successor still works") {
  auto a = tokenizer::load(testing::test_tokenizer_file());
  const auto ids = a.encode("moved text", true);
  auto b = std::move(a);
  CHECK(b.encode("moved text", true) == ids);
  auto c = tokenizer::load(testing::test_tokenizer_file());
  c = std::move(b);
  CHECK(c.decode(ids) == "moved text");
  CHECK(c.piece(1) == "<s>");
}

} // namespace troupe
