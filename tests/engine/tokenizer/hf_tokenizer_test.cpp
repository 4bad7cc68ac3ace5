// tokenizer.json: what the loader refuses (one line naming it), which file
// a model directory's tokenizer comes from, and the incremental detokenizer
// on real byte-level and byte-fallback tokenizers. Encoding and decoding
// are judged against Hugging Face itself in hf_tokenizer_test.mjs.

#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/detokenizer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "base/utf8.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace troupe {
namespace {

// A byte-level BPE small enough to write out: the 256 byte characters of
// GPT-2's alphabet for the ASCII letters used, two merges. Each test swaps
// one part for something the loader must refuse.
auto tiny_json(const std::string& model_type = "BPE", const std::string& normalizer = "null",
               const std::string& pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
               const std::string& post_processor = "null", const std::string& decoder = R"({"type": "ByteLevel"})")
    -> std::string {
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [
    {"id": 7, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(, "post_processor": )" + post_processor +
         R"(, "decoder": )" + decoder + R"(,
  "model": {"type": ")" + model_type + R"(", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
    "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 5, "Ġab": 6},
    "merges": ["a b", "ab c", "Ġ ab"]}})";
}

auto write(const std::filesystem::path& file, const std::string& text) -> void {
  std::ofstream(file, std::ios::binary) << text;
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

TEST_CASE("hf tokenizer: a small byte-level BPE loads, merges and decodes") {
  const auto dir = testing::temp_dir{};
  write(dir / "tokenizer.json", tiny_json());
  const auto tok = tokenizer::load(dir / "tokenizer.json");
  CHECK(tok.vocab_size() == 8);
  CHECK(tok.encode("abc", true) == std::vector<token_id>{4});
  CHECK(tok.encode("ab ab", false) == std::vector<token_id>{3, 6});
  CHECK(tok.encode("ab<|end|>c", false) == std::vector<token_id>{3, 7, 2});
  CHECK(tok.decode(std::vector<token_id>{3, 6, 7, 2}) == "ab abc");
  CHECK(tok.is_control(7));
  CHECK(tok.token_surface(6) == " ab");
  CHECK(tok.piece(6) == "Ġab");
  CHECK(tok.id_of("Ġab") == 6);
  CHECK(tok.id_of("nope") == -1);
  CHECK(tok.bos_id() == -1);
  CHECK(tok.leading_space() == leading_space_rule::keep);
}

TEST_CASE("hf tokenizer: what is not implemented stops loading with one line naming it") {
  const auto dir = testing::temp_dir{};
  const auto file = dir / "tokenizer.json";
  const auto refused = [&](const std::string& json, const std::string& expected) {
    write(file, json);
    const auto error = load_error(file);
    CAPTURE(error);
    CHECK(error == file.string() + ": " + expected);
  };
  refused(tiny_json("WordPiece"), R"(model type "WordPiece" is not supported)");
  refused(tiny_json("Unigram"), R"(model type "Unigram" is not supported)");
  refused(tiny_json("BPE", R"({"type": "Precompiled", "precompiled_charsmap": ""})"),
          R"(normalizer type "Precompiled" is not supported)");
  refused(tiny_json("BPE", "null", R"({"type": "Punctuation", "behavior": "Isolated"})"),
          R"(pre_tokenizer type "Punctuation" is not supported)");
  refused(tiny_json("BPE", "null", R"({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]})"),
          R"(pre_tokenizer type "Whitespace" is not supported)");
  refused(tiny_json("BPE", "null", "null", R"({"type": "Foo"})"), R"(post_processor type "Foo" is not supported)");
  refused(tiny_json("BPE", "null", "null", "null", R"({"type": "WordPiece", "prefix": "##"})"),
          R"(decoder type "WordPiece" is not supported)");
  refused(tiny_json("BPE", "null", R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})"),
          R"(regex "(unclosed": missing closing parenthesis at offset 9)");
  write(file, "{\"model\": 3");
  CHECK(load_error(file).starts_with(file.string() + ": not valid JSON: "));
}

TEST_CASE("hf tokenizer: a model directory's tokenizer.json comes first, then tokenizer.model") {
  const auto dir = testing::temp_dir{};
  const auto none = load_error(dir.path() / "x.json"); // (any missing file)
  CHECK(none.find("no such file") != std::string::npos);
  write(dir / "pytorch_model.bin", "");
  try {
    (void)tokenizer::load_dir(dir.path());
    FAIL("loaded a directory without a tokenizer");
  } catch (const model_error& e) {
    CHECK(std::string(e.what()) == dir.path().string() +
                                       ": no tokenizer.json or tokenizer.model (a tokenizer saved only for "
                                       "PyTorch, or none, cannot be read: save it with AutoTokenizer's save_pretrained)");
  }
  std::filesystem::copy_file(testing::test_tokenizer_file(), dir / "tokenizer.model");
  CHECK(tokenizer::load_dir(dir.path()).vocab_size() == 2000);
  CHECK(tokenizer::file_in_dir(dir.path()) == dir / "tokenizer.model");
  write(dir / "tokenizer.json", tiny_json());
  CHECK(tokenizer::load_dir(dir.path()).vocab_size() == 8);
  CHECK(tokenizer::file_in_dir(dir.path()) == dir / "tokenizer.json");
}

TEST_CASE("hf tokenizer: the incremental detokenizer on real tokenizers equals decode, valid at every step") {
  const auto texts = std::vector<std::string>{
      "Hello world", "café naïve façade", "日本語のテキスト、漢字", "emoji 😀🎉 👨‍👩‍👧‍👦 👍🏽 done", "a  b\n\tc",
      "mixed: Ωμέγα, Привет, مرحبا, नमस्ते, สวัสดี", "12345 and 67", "  indented", "x", "𝐀𝐁𝐂 𢬦𩗎",
  };
  for (const auto* name : {"llama3_1", "qwen3", "gemma3", "llama2", "deepseek_v3", "mistral_nemo"}) {
    const auto dir = testing::real_tokenizer_dir(name);
    if (!dir) {
      MESSAGE("tests/tools/node_modules is absent: real tokenizers not checked");
      return;
    }
    const auto tok = tokenizer::load_dir(*dir);
    auto num_partial = 0; // pushes that returned nothing mid-character
    for (const auto& text : texts) {
      CAPTURE(name);
      CAPTURE(text);
      const auto ids = tok.encode(text, true);
      auto detok = incremental_detokenizer(tok, true);
      auto joined = std::string{};
      auto settled = std::vector<std::string>{};
      for (const auto id : ids) {
        CHECK(detok.token_bytes(id).size() <= tok.token_surface(id).size());
        const auto part = detok.push(id);
        CHECK(is_valid_utf8(part));
        num_partial += part.empty() && !tok.is_control(id);
        joined += part;
        for (auto& s : detok.take_settled()) settled.push_back(std::move(s));
      }
      joined += detok.flush();
      for (auto& s : detok.take_settled()) settled.push_back(std::move(s));
      CHECK(joined == tok.decode(ids));
      CHECK(joined == text);
      CHECK(settled.size() == ids.size());
      auto settled_text = std::string{};
      for (const auto& s : settled) settled_text += s;
      CHECK(settled_text == joined);
    }
    CHECK(num_partial > 0); // rare characters are split into bytes: held back
  }
}

TEST_CASE("hf tokenizer: one tokenizer encodes on four threads at once exactly as on one") {
  // The tokenizer actors share one tokenizer: its word cache and per-thread
  // scratch must not mix threads' words.
  const auto dir = testing::real_tokenizer_dir("llama3_1");
  if (!dir) {
    MESSAGE("tests/tools/node_modules is absent: not checked");
    return;
  }
  auto texts = std::vector<std::string>{};
  auto in = std::ifstream("/usr/share/common-licenses/GPL-3");
  for (auto line = std::string{}; std::getline(in, line);) texts.push_back(line + " 日本語 😀 " + std::to_string(texts.size()));
  const auto expected = [&] {
    const auto fresh = tokenizer::load_dir(*dir);
    auto out = std::vector<std::vector<token_id>>{};
    for (const auto& t : texts) out.push_back(fresh.encode(t, true));
    return out;
  }();
  const auto shared = tokenizer::load_dir(*dir);
  auto results = std::vector<std::vector<std::vector<token_id>>>(4, std::vector<std::vector<token_id>>(texts.size()));
  auto threads = std::vector<std::thread>{};
  for (std::size_t k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (std::size_t j = 0; j < texts.size(); ++j) {
        const auto i = k % 2 == 0 ? j : texts.size() - 1 - j; // two orders
        results[k][i] = shared.encode(texts[i], true);
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < 4; ++k) CHECK(results[k] == expected);
}

} // namespace troupe
