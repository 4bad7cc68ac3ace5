// libFuzzer harness: tokenizer.json encoding on any bytes (invalid UTF-8
// included) through every stage (added tokens with lstrip / rstrip /
// single_word, NFKC, Lowercase, a Replace regex, Llama-3's split regex,
// Digits, byte-level BPE), then decode and the incremental detokenizer,
// which must agree whenever the decoded bytes are valid UTF-8.

#include "engine/tokenizer/detokenizer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "base/utf8.hpp"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

/// GPT-2's character for byte b, as UTF-8.
auto byte_char(int b) -> std::string {
  auto cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    cp = 256;
    for (int k = 0; k < b; ++k)
      if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) ++cp;
  }
  auto out = std::string{};
  if (cp < 0x80) out.push_back(static_cast<char>(cp));
  else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

auto json_string(const std::string& s) -> std::string {
  auto out = std::string{"\""};
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

auto load() -> troupe::tokenizer {
  auto vocab = std::string{};
  for (int b = 0; b < 256; ++b) vocab += (b ? "," : "") + json_string(byte_char(b)) + ":" + std::to_string(b);
  vocab += R"(,"th":256,"the":257,"Ġthe":258,"in":259,"ing":260,"Ġ1":261)";
  const auto json = R"({"added_tokens": [
    {"id": 262, "content": "<|end|>", "lstrip": true, "rstrip": false, "normalized": false, "special": true, "single_word": false},
    {"id": 263, "content": "<tool>", "lstrip": false, "rstrip": true, "normalized": true, "special": false, "single_word": false},
    {"id": 264, "content": "word", "lstrip": false, "rstrip": false, "normalized": false, "special": false, "single_word": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
    {"type": "Replace", "pattern": {"Regex": "\\s{3,}"}, "content": "  "}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": false},
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
    {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [262], "tokens": ["<|end|>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "ignore_merges": true, "vocab": {)" + vocab + R"(},
    "merges": ["t h", "th e", "Ġ the", "i n", "in g", "Ġ 1"]}})";
  char dir[] = "/tmp/troupe-fuzz-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  const auto file = std::string(dir) + "/tokenizer.json";
  std::ofstream(file) << json;
  auto tok = troupe::tokenizer::load(file);
  std::remove(file.c_str());
  rmdir(dir);
  return tok;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tok = load();
  const auto text = std::string_view(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.encode(text, true);
  (void)tok.encode_with_special(text, false);
  const auto decoded = tok.decode(ids);
  if (!troupe::is_valid_utf8(decoded)) std::abort();
  auto detok = troupe::incremental_detokenizer(tok, true);
  auto joined = std::string{};
  for (const auto id : ids) joined += detok.push(id);
  joined += detok.flush();
  if (!troupe::is_valid_utf8(joined)) std::abort();
  if (troupe::is_valid_utf8(text) && joined != decoded) std::abort();
  // Arbitrary ids (two bytes each), in and out of the vocabulary.
  auto raw = std::vector<troupe::token_id>{};
  for (std::size_t i = 0; i + 1 < size; i += 2) raw.push_back((data[i] | data[i + 1] << 8) % 300 - 10);
  if (!troupe::is_valid_utf8(tok.decode(raw))) std::abort();
  auto d2 = troupe::incremental_detokenizer(tok, false);
  for (const auto id : raw) (void)d2.push(id), (void)d2.token_bytes(id), (void)d2.take_settled();
  (void)d2.flush();
  return 0;
}
