#include "engine/tokenizer/detokenizer.hpp"

#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace troupe {
namespace {

constexpr auto fffd = std::string_view{"\xEF\xBF\xBD"};

/// Strict UTF-8 check (RFC 3629: no overlongs, surrogates or > U+10FFFF),
/// written apart from the detokenizer's own rules.
auto is_valid_utf8(std::string_view s) -> bool {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    auto n = std::size_t{0};
    auto cp = std::uint32_t{0};
    if (b < 0x80) { n = 1; cp = b; }
    else if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1Fu; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0Fu; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07u; }
    else return false;
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (t & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF
        || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

/// Every push() in order, then flush().
auto chunks(const std::vector<token_id>& ids, bool at_text_start) -> std::vector<std::string> {
  auto detok = incremental_detokenizer(testing::test_tokenizer(), at_text_start);
  auto out = std::vector<std::string>{};
  for (auto id : ids) out.push_back(detok.push(id));
  out.push_back(detok.flush());
  return out;
}

auto joined(const std::vector<std::string>& parts) -> std::string {
  auto out = std::string{};
  for (const auto& p : parts) out += p;
  return out;
}

auto byte(unsigned char b) -> token_id { return 3 + b; } // <0x00> is id 3

} // namespace

TEST_CASE("detokenizer: streaming text gives decode's text, valid at every step") {
  const auto& tok = testing::test_tokenizer();
  auto texts = std::vector<std::string>{
      "Hello world", "café naïve façade", "日本語のテキスト", "emoji 😀🎉 done", "a  b\n\tc",
      "mixed: Ωμέγα, Привет", "12345 and 67", "  indented", "x",
  };
  auto in = std::ifstream("/usr/share/common-licenses/Apache-2.0");
  for (auto line = std::string{}; std::getline(in, line);) texts.push_back(line);
  for (const auto& text : texts) {
    CAPTURE(text);
    const auto ids = tok.encode(text, true);
    const auto parts = chunks(ids, true);
    for (const auto& p : parts) CHECK(is_valid_utf8(p));
    CHECK(joined(parts) == tok.decode(ids));
    CHECK(joined(parts) == text);
  }
}

TEST_CASE("detokenizer: a multi-byte character waits for its last byte") {
  // "日" is ▁ <0xE6> <0x97> <0xA5>; the ▁ opening the text is dropped.
  CHECK(chunks(testing::test_tokenizer().encode("日", false), true)
        == std::vector<std::string>{"", "", "", "日", ""});
  CHECK(chunks({byte(0xF0), byte(0x9F), byte(0x98), byte(0x80)}, true)
        == std::vector<std::string>{"", "", "", "😀", ""});
  CHECK(chunks({byte(0xC3), byte(0xA9), byte(0x41)}, true)
        == std::vector<std::string>{"", "é", "A", ""});
}

TEST_CASE("detokenizer: impossible bytes become U+FFFD, one per byte, as decode does") {
  const auto& tok = testing::test_tokenizer();
  const auto r = std::string(fffd);
  struct example {
    std::vector<token_id> ids;
    std::vector<std::string> expected;
  };
  const auto examples = std::vector<example>{
      // Truncated at the end: held back, then flushed.
      {{byte(0xE6), byte(0x97)}, {"", "", r + r}},
      // A byte that breaks the sequence shows the error at once.
      {{byte(0xE6), byte(0x41)}, {"", r + "A", ""}},
      // Never a lead byte / never valid leads.
      {{byte(0x97)}, {r, ""}},
      {{byte(0xFF), byte(0xC0), byte(0xF5)}, {r, r, r, ""}},
      // Surrogate half (ED A0..) and overlong (E0 80..): known at the 2nd byte.
      {{byte(0xED), byte(0xA0), byte(0x80)}, {"", r + r, r, ""}},
      {{byte(0xE0), byte(0x80)}, {"", r + r, ""}},
      // Above U+10FFFF.
      {{byte(0xF4), byte(0x90)}, {"", r + r, ""}},
      // A non-byte piece ends the run: control ids too.
      {{byte(0xE6), 2, byte(0x97), byte(0xA5)}, {"", r, r, r, ""}},
      {{byte(0xE6), tok.id_of("▁the")}, {"", r + " the", ""}},
      // U+FFFD spelled in bytes is an ordinary character.
      {{byte(0xEF), byte(0xBF), byte(0xBD)}, {"", "", r, ""}},
  };
  for (const auto& [ids, expected] : examples) {
    CAPTURE(ids.size());
    CHECK(chunks(ids, true) == expected);
    CHECK(joined(expected) == tok.decode(ids));
  }
}

TEST_CASE("detokenizer: leading space kept only when not at the text start") {
  const auto& tok = testing::test_tokenizer();
  const auto ids = tok.encode("Hello world", false);
  REQUIRE(tok.piece(ids[0]).starts_with("▁"));
  CHECK(joined(chunks(ids, true)) == "Hello world");
  CHECK(joined(chunks(ids, false)) == " Hello world");
  CHECK(chunks(ids, false)[0].starts_with(" "));
  CHECK_FALSE(chunks(ids, true)[0].starts_with(" "));
  // Control ids before the first piece do not end the text start.
  CHECK(joined(chunks({1, 1, ids[0]}, true)) == tok.decode(std::vector<token_id>{ids[0]}));
  // Only the dummy prefix's ▁ is dropped, not the text's own space.
  const auto spaced = tok.encode(" two", false);
  CHECK(joined(chunks(spaced, true)) == " two");
  // A byte first ends the text start.
  CHECK(joined(chunks({byte('a'), tok.id_of("▁the")}, true)) == "a the");
}

TEST_CASE("detokenizer: control ids produce nothing, <unk> its surface") {
  const auto& tok = testing::test_tokenizer();
  auto detok = incremental_detokenizer(tok, false);
  CHECK(detok.push(1).empty());
  CHECK(detok.push(2).empty());
  CHECK(detok.push(-1).empty());
  CHECK(detok.push(2000).empty());
  CHECK(detok.push(0) == " \xE2\x81\x87 ");
  CHECK(detok.flush().empty());
}

TEST_CASE("detokenizer: random id streams match decode exactly") {
  const auto& tok = testing::test_tokenizer();
  auto rng = std::mt19937{20240531};
  auto pick = std::uniform_int_distribution<int>(0, 99);
  auto any_id = std::uniform_int_distribution<token_id>(0, tok.vocab_size() - 1);
  auto high_byte = std::uniform_int_distribution<int>(0x80, 0xFF);
  auto utf8_lead = std::uniform_int_distribution<int>(0xC0, 0xF7);
  for (int round = 0; round < 3000; ++round) {
    auto ids = std::vector<token_id>{};
    const auto length = 1 + pick(rng) % 12;
    for (int i = 0; i < length; ++i) {
      const auto kind = pick(rng);
      if (kind < 30) ids.push_back(byte(static_cast<unsigned char>(high_byte(rng))));
      else if (kind < 45) ids.push_back(byte(static_cast<unsigned char>(utf8_lead(rng))));
      else if (kind < 55) ids.push_back(pick(rng) % 3); // <unk>, <s>, </s>
      else ids.push_back(any_id(rng));
    }
    CAPTURE(round);
    const auto decoded = tok.decode(ids);
    const auto parts = chunks(ids, true);
    for (const auto& p : parts) CHECK(is_valid_utf8(p));
    CHECK(joined(parts) == decoded);
    // Not at the start: decode's dropped ▁ comes back as a space.
    auto first = std::size_t{0};
    while (first < ids.size() && tok.is_control(ids[first])) ++first;
    const auto space_dropped = first < ids.size() && !tok.is_byte(ids[first])
                               && !tok.is_unknown(ids[first])
                               && tok.piece(ids[first]).starts_with("▁");
    CHECK(joined(chunks(ids, false)) == (space_dropped ? " " : "") + decoded);
  }
}

TEST_CASE("detokenizer: each push settles once, into bytes that join to the text") {
  // The bytes of logprobs: a byte piece's own byte (U+FFFD when it starts no
  // character), any other piece its text as token_bytes foretold it.
  const auto& tok = testing::test_tokenizer();
  auto rng = std::mt19937{7};
  auto pick = std::uniform_int_distribution<int>(0, 99);
  auto any_id = std::uniform_int_distribution<token_id>(-1, tok.vocab_size());
  auto high_byte = std::uniform_int_distribution<int>(0x80, 0xFF);
  auto utf8_lead = std::uniform_int_distribution<int>(0xC0, 0xF7);
  for (int round = 0; round < 3000; ++round) {
    CAPTURE(round);
    auto ids = std::vector<token_id>{};
    const auto length = 1 + pick(rng) % 12;
    for (int i = 0; i < length; ++i) {
      const auto kind = pick(rng);
      if (kind < 30) ids.push_back(byte(static_cast<unsigned char>(high_byte(rng))));
      else if (kind < 45) ids.push_back(byte(static_cast<unsigned char>(utf8_lead(rng))));
      else if (kind < 55) ids.push_back(pick(rng) % 3);
      else ids.push_back(any_id(rng));
    }
    for (const bool at_start : {true, false}) {
      auto detok = incremental_detokenizer(tok, at_start);
      auto text = std::string{};
      auto settled = std::vector<std::string>{};
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto id = ids[i];
        const auto foretold = detok.token_bytes(id);
        text += detok.push(id);
        for (auto& b : detok.take_settled()) settled.push_back(std::move(b));
        if (id >= 0 && id < tok.vocab_size() && !tok.is_byte(id)) { // (others wait for a byte run)
          REQUIRE(settled.size() == i + 1); // settled in order
          CHECK(settled.back() == foretold);
        }
      }
      text += detok.flush();
      for (auto& b : detok.take_settled()) settled.push_back(std::move(b));
      REQUIRE(settled.size() == ids.size());
      CHECK(joined(settled) == text);
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (tok.is_byte(ids[i]))
          CHECK((settled[i] == std::string(1, static_cast<char>(tok.byte_value(ids[i]))) || settled[i] == fffd));
    }
  }
}

TEST_CASE("detokenizer: token_bytes are a token's text as it shows: ▁ a space, <0x0A> one byte") {
  const auto& tok = testing::test_tokenizer();
  auto detok = incremental_detokenizer(tok, true);
  const auto the = tok.id_of("▁the");
  REQUIRE(the >= 0);
  CHECK(detok.token_bytes(the) == "the"); // the text's first ▁ is dropped
  CHECK(detok.token_bytes(byte('\n')) == "\n");
  CHECK(detok.token_bytes(byte(0xE4)) == "\xE4");
  CHECK(detok.token_bytes(1).empty());
  CHECK(detok.push(the) == "the");
  CHECK(detok.token_bytes(the) == " the");
  CHECK(detok.take_settled() == std::vector<std::string>{"the"});
  CHECK(detok.push(byte(0xE4)).empty());
  CHECK(detok.take_settled().empty()); // half a character: not settled
  CHECK(detok.push(byte(0xB8)).empty());
  CHECK(detok.push(byte(0x96)) == "\xE4\xB8\x96");
  CHECK(detok.take_settled() == std::vector<std::string>{"\xE4", "\xB8", "\x96"});
}

} // namespace troupe
