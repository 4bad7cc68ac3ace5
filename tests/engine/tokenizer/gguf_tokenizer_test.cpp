// A GGUF file's tokenizer against the files it was converted from: the
// tests' own writer (tests/support/gguf_vocab, convert_hf_to_gguf.py's keys)
// turns a model directory into GGUF metadata; tokenizer::load_gguf must then
// give the ids and text that tokenizer::load gives on the originals, and
// the embedded chat template must render as tokenizer_config.json's.

#include "engine/formats/gguf.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/hf/unicode.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "tests/support/gguf_vocab.hpp"
#include "tests/support/gguf_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace troupe {
namespace {

namespace fs = std::filesystem;
using testing::gguf_writer;


/// Hand-written strings of every kind, then seeded mixes of their words and
/// of raw code points (Latin, CJK, emoji, marks, digits, whitespace runs).
auto corpus() -> std::vector<std::string> {
  auto out = std::vector<std::string>{
      "", " ", "  ", "\n", "\n\n\n", "\t", " \t\n ", "Hello world", "Hello, world!", " leading space",
      "trailing space ", "  two leading", "a  b   c    d", "line one\nline two\r\nline three",
      "I've been told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
      "3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3", "1234567890", "x=1+2*3/4-5%6",
      "café naïve façade résumé", "ΑΒΓ αβγ Ωμέγα", "Привет, мир! нещо на Български", "مرحبا بالعالم",
      "नमस्ते दुनिया", "สวัสดีชาวโลก", "日本語のテキスト、漢字とカタカナ", "我想在apple工作1314151天～", "한국어 텍스트",
      "emoji 😀🎉 👨‍👩‍👧‍👦 👍🏽 done", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙",
      "------======= ''''''```````\"\"\"\"......!!!!!!??????", "𝐀𝐁𝐂 𢬦𩗎", "ÀÉÎÕÜ àéîõü ÇçÑñ", "İstanbul ıi ǅ ǈ",
      "def f(x):\n    return x ** 2  # square\n", "int main() { return 0; }\n", "<html><body>hi</body></html>",
      "https://example.com/path?q=1&r=2#frag", "user@example.com", "CamelCaseWords and snake_case_words",
      "ALL CAPS SENTENCE. lower case sentence.", "$100 €200 £300 ¥400", "don't won't can't shouldn't",
      "   \n   \n", "a\u00A0b\u2009c\u3000d", "zero\u200Bwidth", "tab\tseparated\tvalues", "x",
      "<s>hello</s>", "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|>text<|eot_id|>", "[INST] hi [/INST]",
      "<｜begin▁of▁sentence｜>hi<｜end▁of▁sentence｜>", "<|endoftext|>", "<unk> <pad>", "▁already▁escaped",
  };
  auto words = std::vector<std::string>{};
  for (const auto& s : out) {
    auto start = std::size_t{0};
    for (auto pos = s.find(' '); pos != std::string::npos; pos = s.find(' ', start)) {
      if (pos > start) words.push_back(s.substr(start, pos - start));
      start = pos + 1;
    }
    if (start < s.size()) words.push_back(s.substr(start));
  }
  // Ranges of code points to draw from; no lone surrogates.
  const std::pair<char32_t, char32_t> ranges[] = {{0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0x24F},
                                                  {0x370, 0x3FF},   {0x400, 0x4FF},   {0x600, 0x6FF},
                                                  {0x900, 0x97F},   {0x3040, 0x30FF}, {0x4E00, 0x9FA5},
                                                  {0xAC00, 0xD7A3}, {0x1F300, 0x1F64F}, {0x2000, 0x206F}};
  auto rng = std::mt19937{20};
  for (auto i = 0; i < 600; ++i) {
    auto s = std::string{};
    const auto n = 1 + rng() % 12;
    for (auto k = 0u; k < n; ++k) {
      if (rng() % 3 == 0) {
        const auto& [lo, hi] = ranges[rng() % std::size(ranges)];
        for (auto m = 1 + rng() % 4; m > 0; --m) hf::append_utf8(s, lo + static_cast<char32_t>(rng() % (hi - lo + 1)));
      } else {
        s += words[rng() % words.size()];
      }
      s += std::string(rng() % 4 == 0 ? 2 + rng() % 3 : 1, rng() % 7 == 0 ? '\n' : ' ');
    }
    out.push_back(std::move(s));
  }
  return out;
}

auto write_gguf(const fs::path& model_dir, const fs::path& file) -> std::shared_ptr<const gguf::file> {
  auto w = gguf_writer{};
  testing::write_tokenizer_metadata(w, model_dir);
  w.write(file);
  return gguf::file::open(file);
}

/// The GGUF file of the real tokenizer `name` (its files in model_dir),
/// written once per process: two test cases read the same vocabularies.
auto real_gguf(const std::string& name, const fs::path& model_dir) -> std::shared_ptr<const gguf::file> {
  static const auto tmp = testing::temp_dir{};
  static auto files = std::map<std::string, std::shared_ptr<const gguf::file>>{};
  auto& f = files[name];
  if (!f) f = write_gguf(model_dir, tmp / (name + ".gguf"));
  return f;
}

/// The ids as text, for messages.
auto show(const std::vector<token_id>& ids) -> std::string {
  auto out = std::string{};
  for (const auto id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

/// Compares the two tokenizers over the corpus; returns the mismatches and
/// reports the first few. `bos_added` is what the GGUF file's encode puts
/// in front where the original's puts nothing (see the Llama 3 case).
auto mismatches(const std::string& name, const tokenizer& from_gguf, const tokenizer& original,
                const std::vector<std::string>& texts, std::optional<token_id> bos_added = std::nullopt) -> int {
  auto bad = 0;
  const auto report = [&](const std::string& what, const std::string& text, const std::string& a, const std::string& b) {
    if (++bad <= 5) MESSAGE(name << " " << what << " of \"" << text << "\": gguf [" << a << "] original [" << b << "]");
  };
  for (const auto& s : texts) {
    for (const auto special : {false, true}) {
      const auto a = special ? from_gguf.encode_with_special(s, false) : from_gguf.encode(s, false);
      const auto b = special ? original.encode_with_special(s, false) : original.encode(s, false);
      if (a != b) report(special ? "encode_with_special" : "encode", s, show(a), show(b));
      const auto a_bos = special ? from_gguf.encode_with_special(s, true) : from_gguf.encode(s, true);
      auto b_bos = special ? original.encode_with_special(s, true) : original.encode(s, true);
      if (bos_added) b_bos.insert(b_bos.begin(), *bos_added);
      if (a_bos != b_bos) report("encode with BOS", s, show(a_bos), show(b_bos));
      if (from_gguf.decode(b) != original.decode(b)) report("decode", s, from_gguf.decode(b), original.decode(b));
    }
  }
  return bad;
}

auto load_error(const gguf_writer& w, const fs::path& file) -> std::string {
  w.write(file);
  try {
    (void)tokenizer::load_gguf(*gguf::file::open(file));
  } catch (const model_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("gguf tokenizer: real byte-level vocabularies give tokenizer.json's ids and text") {
  struct model_case {
    std::string name, pre;
  };
  const auto texts = corpus();
  // Qwen's tokenizer.json composes its input (NFC); llama.cpp, and so a
  // GGUF file, does not: those strings are compared after composing them.
  auto composed = std::vector<std::string>{}, not_composed = std::vector<std::string>{};
  for (const auto& s : texts) (hf::normalize(s, hf::normal_form::nfc) == s ? composed : not_composed).push_back(s);
  REQUIRE(not_composed.size() >= 10);
  for (const auto& [name, pre] : std::vector<model_case>{{"llama3", "llama-bpe"},
                                                         {"llama3_1", "llama-bpe"},
                                                         {"qwen3", "qwen2"},
                                                         {"qwen2_5", "qwen2"},
                                                         {"deepseek_v3", "deepseek-v3"},
                                                         {"gpt4o", "gpt-4o"},
                                                         {"mistral_nemo", "tekken"}}) {
    const auto dir = testing::real_tokenizer_dir(name);
    if (!dir) {
      MESSAGE("tests/tools/node_modules is absent (npm ci --prefix tests/tools): real vocabularies not checked");
      return;
    }
    CAPTURE(name);
    const auto tmp = testing::temp_dir{};
    auto model_dir = *dir;
    if (name == "gpt4o") {
      // Its ids have holes (200000 to 200017): convert_hf_to_gguf.py takes
      // the padded size from config.json, as a model directory has one.
      model_dir = tmp / "model";
      fs::create_directory(model_dir);
      fs::copy_file(*dir / "tokenizer.json", model_dir / "tokenizer.json");
      fs::copy_file(*dir / "tokenizer_config.json", model_dir / "tokenizer_config.json");
      std::ofstream(model_dir / "config.json") << R"({"vocab_size": 200019})";
    }
    const auto file = real_gguf(name, model_dir);
    CHECK(file->require_string("tokenizer.ggml.model") == "gpt2");
    CHECK(file->require_string("tokenizer.ggml.pre") == pre);
    const auto from_gguf = tokenizer::load_gguf(*file);
    const auto original = tokenizer::load(*dir / "tokenizer.json");
    CHECK(from_gguf.vocab_size() == original.vocab_size());
    CHECK(from_gguf.bos_id() == original.bos_id());
    CHECK(from_gguf.eos_id() == original.eos_id());
    for (auto id = 0; id < original.vocab_size(); id += 997) {
      if (original.piece(id).empty()) CHECK(from_gguf.piece(id) == "[PAD" + std::to_string(id) + "]");
      else CHECK(from_gguf.piece(id) == original.piece(id));
      CHECK(from_gguf.token_surface(id) == original.token_surface(id));
      CHECK(from_gguf.is_control(id) == original.is_control(id));
    }
    // This package's Llama 3 tokenizer.json predates the post-processor that
    // adds <|begin_of_text|>; llama.cpp adds it for every "llama-bpe" file
    // whose metadata does not say otherwise, and its converter writes nothing
    // to say so.
    const auto bos_added = name == "llama3" ? std::optional<token_id>{original.bos_id()} : std::nullopt;
    if (bos_added) CHECK(original.encode("hi", true) == original.encode("hi", false));
    const auto nfc = pre == "qwen2";
    CHECK(mismatches(name, from_gguf, original, nfc ? composed : texts, bos_added) == 0);
    if (!nfc) continue;
    auto differ = 0;
    for (const auto& s : not_composed) {
      CHECK(from_gguf.encode(hf::normalize(s, hf::normal_form::nfc), false) == original.encode(s, false));
      differ += from_gguf.encode(s, false) != original.encode(s, false);
    }
    CHECK(differ > 0);
  }
}

TEST_CASE("gguf tokenizer: a llama (SentencePiece) vocabulary gives tokenizer.model's ids and text") {
  const auto tmp = testing::temp_dir{};
  fs::create_directory(tmp / "model");
  fs::copy_file(testing::test_tokenizer_file(), tmp / "model" / "tokenizer.model");
  const auto file = write_gguf(tmp / "model", tmp / "vocab.gguf");
  CHECK(file->require_string("tokenizer.ggml.model") == "llama");
  const auto from_gguf = tokenizer::load_gguf(*file);
  const auto& original = testing::test_tokenizer();
  CHECK(from_gguf.vocab_size() == original.vocab_size());
  CHECK(from_gguf.bos_id() == original.bos_id());
  CHECK(from_gguf.eos_id() == original.eos_id());
  CHECK(from_gguf.leading_space() == original.leading_space());
  for (auto id = 0; id < original.vocab_size(); ++id) {
    CHECK(from_gguf.piece(id) == original.piece(id));
    CHECK(from_gguf.is_byte(id) == original.is_byte(id));
    CHECK(from_gguf.is_control(id) == original.is_control(id));
    CHECK(from_gguf.is_unknown(id) == original.is_unknown(id));
    CHECK(from_gguf.token_surface(id) == original.token_surface(id));
  }
  CHECK(mismatches("test tokenizer.model", from_gguf, original, corpus()) == 0);

  // add_bos_token / add_eos_token over llama.cpp's defaults (BOS, no EOS).
  auto w = gguf_writer{};
  testing::write_tokenizer_metadata(w, tmp / "model");
  w.kv_bool("tokenizer.ggml.add_bos_token", false);
  w.kv_bool("tokenizer.ggml.add_eos_token", true);
  w.write(tmp / "eos.gguf");
  const auto eos_only = tokenizer::load_gguf(*gguf::file::open(tmp / "eos.gguf"));
  for (const auto* text : {"Hello world", "<s>x</s>", ""}) {
    auto expected = original.encode_with_special(text, false);
    expected.push_back(original.eos_id());
    CHECK(eos_only.encode_with_special(text, true) == expected);
    CHECK(eos_only.encode(text, false) == original.encode(text, false));
  }
}

TEST_CASE("gguf tokenizer: the embedded chat template renders as tokenizer_config.json's") {
  auto options = jinja::render_options{};
  options.now = [] {
    auto t = std::tm{};
    t.tm_year = 124, t.tm_mon = 6, t.tm_mday = 26;
    return t;
  };
  const auto messages = std::vector<chat_message>{
      {"system", "You are terse."}, {"user", "Hello there"}, {"assistant", "Hi."}, {"user", "2+2?"}};
  auto request = chat_request{};
  request.messages = messages_value(messages);
  for (const auto* name : {"llama3_1", "qwen3", "deepseek_v3", "mistral_nemo"}) {
    const auto dir = testing::real_tokenizer_dir(name);
    if (!dir) {
      MESSAGE("tests/tools/node_modules is absent: embedded chat templates not checked");
      return;
    }
    CAPTURE(name);
    const auto file = real_gguf(name, *dir);
    const auto embedded = gguf_chat_template(*file);
    const auto original = model_chat_template(dir->string());
    REQUIRE(embedded);
    REQUIRE(original);
    CHECK(embedded->source == file->path().string() + " tokenizer.chat_template");
    for (const auto* key : {"bos_token", "eos_token"}) {
      const auto* a = embedded->special_tokens.find(key);
      const auto* b = original->special_tokens.find(key);
      CHECK((a == nullptr) == (b == nullptr || b->is_none()));
      if (a != nullptr && b != nullptr) CHECK(a->str() == b->str());
    }
    auto error_a = std::string{}, error_b = std::string{};
    const auto a = render_chat(*embedded, request, options, &error_a);
    const auto b = render_chat(*original, request, options, &error_b);
    CHECK(error_a == "");
    CHECK(error_b == "");
    CHECK(!a.empty());
    CHECK(a == b);
  }
  // A file without one has none.
  const auto tmp = testing::temp_dir{};
  auto w = gguf_writer{};
  w.kv_string("tokenizer.ggml.model", "gpt2");
  w.write(tmp / "none.gguf");
  CHECK(!gguf_chat_template(*gguf::file::open(tmp / "none.gguf")));
  w.kv_u32("tokenizer.chat_template", 3);
  w.write(tmp / "bad.gguf");
  try {
    (void)gguf_chat_template(*gguf::file::open(tmp / "bad.gguf"));
    FAIL("a chat template of type u32 was taken");
  } catch (const model_error& e) {
    CHECK(std::string(e.what()) == (tmp / "bad.gguf").string() + ": metadata tokenizer.chat_template is u32, not a string");
  }
}

TEST_CASE("gguf tokenizer: each bad tokenizer metadata stops loading with one line naming it") {
  const auto tmp = testing::temp_dir{};
  const auto file = tmp / "bad.gguf";
  // A tiny byte-level BPE: "a", "b", "ab" and a control token; each case
  // changes one key.
  const auto tiny = [](std::string_view model = "gpt2", std::string_view pre = "gpt-2") {
    auto w = gguf_writer{};
    if (!model.empty()) w.kv_string("tokenizer.ggml.model", model);
    if (!pre.empty()) w.kv_string("tokenizer.ggml.pre", pre);
    return w;
  };
  const auto tokens = std::vector<std::string>{"a", "b", "ab", "<|end|>"};
  const auto complete = [&](gguf_writer w) {
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 3});
    w.kv_strings("tokenizer.ggml.merges", {"a b"});
    return w;
  };
  const auto refused = [&](const gguf_writer& w, const std::string& expected) {
    const auto error = load_error(w, file);
    CAPTURE(error);
    CHECK(error == file.string() + ": " + expected);
  };

  // The well-formed one loads and merges.
  {
    complete(tiny()).write(file);
    const auto tok = tokenizer::load_gguf(*gguf::file::open(file));
    CHECK(tok.encode("ab<|end|>b", false) == std::vector<token_id>{2, 3, 1});
    CHECK(tok.bos_id() == -1);
    CHECK(tok.is_control(3));
  }
  refused(complete(tiny("bert")), R"(tokenizer.ggml.model "bert" is not supported (supported: llama, gpt2))");
  refused(complete(tiny("t5")), R"(tokenizer.ggml.model "t5" is not supported (supported: llama, gpt2))");
  refused(complete(tiny("")), "the metadata has no tokenizer.ggml.model");
  {
    const auto error = load_error(complete(tiny("gpt2", "chameleon")), file);
    CHECK(error.starts_with(file.string() + R"(: tokenizer.ggml.pre "chameleon" is not supported (supported: default, llama3, )"));
  }
  refused(tiny(), "the metadata has no tokenizer.ggml.tokens");
  {
    auto w = tiny();
    w.kv_i32s("tokenizer.ggml.tokens", {1, 2});
    refused(w, "metadata tokenizer.ggml.tokens is array of i32, not an array of strings");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_i32s("tokenizer.ggml.token_type", {1, 1, 1});
    w.kv_strings("tokenizer.ggml.merges", {"a b"});
    refused(w, "metadata tokenizer.ggml.token_type has 3 entries for 4 tokens");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_i32s("tokenizer.ggml.token_type", {1, 1, 9, 3});
    refused(w, "metadata tokenizer.ggml.token_type of id 2 is 9.000000, not a token type (0 to 6)");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    refused(w, "the metadata has no tokenizer.ggml.merges");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_strings("tokenizer.ggml.merges", {"ab"});
    refused(w, R"(metadata tokenizer.ggml.merges entry 0 "ab" is not two tokens)");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_strings("tokenizer.ggml.merges", {"a c"});
    refused(w, R"(model merges: "a c" names a token not in the vocabulary)");
  }
  {
    auto w = tiny();
    w.kv_strings("tokenizer.ggml.tokens", {"a", "b", "a"});
    refused(w, R"(metadata tokenizer.ggml.tokens holds "a" twice (ids 0 and 2))");
  }
  {
    auto w = complete(tiny());
    w.kv_u32("tokenizer.ggml.bos_token_id", 4);
    refused(w, "metadata tokenizer.ggml.bos_token_id is 4, past the 4 tokens");
  }
  {
    auto w = complete(tiny());
    w.kv_string("tokenizer.ggml.eos_token_id", "3");
    refused(w, "metadata tokenizer.ggml.eos_token_id is string, not a non-negative integer");
  }
  {
    auto w = complete(tiny());
    w.kv_u32("tokenizer.ggml.add_bos_token", 1);
    refused(w, "metadata tokenizer.ggml.add_bos_token is u32, not a boolean");
  }
  refused(complete(tiny("gpt2", "llama-bpe")),
          "BOS is to be added (tokenizer.ggml.add_bos_token, or the pre-tokenizer's default) but the metadata has "
          "no tokenizer.ggml.bos_token_id");
  {
    auto w = complete(tiny());
    w.kv_bool("tokenizer.ggml.add_eos_token", true);
    refused(w, "tokenizer.ggml.add_eos_token is true but the metadata has no tokenizer.ggml.eos_token_id");
  }
  {
    auto w = complete(tiny("gpt2", ""));
    w.kv_u32("tokenizer.ggml.pre", 2);
    refused(w, "metadata tokenizer.ggml.pre is u32, not a string");
  }
  // llama: scores of another length, and no unknown piece for SentencePiece.
  {
    auto w = tiny("llama", "default");
    w.kv_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.kv_f32s("tokenizer.ggml.scores", {0, 0, 0});
    refused(w, "metadata tokenizer.ggml.scores has 3 entries for 4 tokens");
  }
  {
    auto w = tiny("llama", "default");
    w.kv_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    w.kv_i32s("tokenizer.ggml.token_type", {1, 3, 3, 1});
    refused(w, "metadata tokenizer.ggml.token_type marks no unknown token (type 2)");
  }
}

} // namespace troupe
