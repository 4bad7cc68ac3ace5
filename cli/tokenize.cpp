// troupe tokenize: a model's tokenizer on JSON lines, for tests that judge
// it against Hugging Face tokenizers and for bench-tokenizer.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

namespace troupe::cli {
namespace {

/// `s` as a JSON string (s is UTF-8; control characters escaped).
auto append_json_string(std::string& out, std::string_view s) -> void {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20) {
      out.append("\\u00");
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(ch);
    }
  }
  out.push_back('"');
}

} // namespace

auto run_tokenize(std::span<char* const> argv) -> int {
  const args a(argv, {"model", "file"}, {"special", "no-bos", "decode", "time"});
  if (a.has("model") == a.has("file")) throw usage_error("give one of --model DIR or --file FILE");
  const auto tok = a.has("model") ? tokenizer::load_dir(a.str("model", "")) : tokenizer::load(a.str("file", ""));
  const auto special = a.has("special"), add_bos = !a.has("no-bos"), decode = a.has("decode"), timed = a.has("time");

  auto parser = simdjson::dom::parser{};
  auto line = std::string{};
  auto out = std::string{};
  for (auto number = 1; std::getline(std::cin, line); ++number) {
    auto text = std::string_view{};
    line.reserve(line.size() + simdjson::SIMDJSON_PADDING);
    if (parser.parse(line.data(), line.size(), false).get_string().get(text) != simdjson::SUCCESS) {
      std::fprintf(stderr, "troupe tokenize: line %d is not a JSON string\n", number);
      return 1;
    }
    const auto start = std::chrono::steady_clock::now();
    const auto ids = special ? tok.encode_with_special(text, add_bos) : tok.encode(text, add_bos);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    out.assign("{\"ids\":[");
    for (std::size_t i = 0; i < ids.size(); ++i) out.append(i ? "," : "").append(std::to_string(ids[i]));
    out.push_back(']');
    if (decode) {
      out.append(",\"text\":");
      append_json_string(out, tok.decode(ids));
    }
    if (timed) out.append(",\"ns\":").append(std::to_string(ns.count()));
    out.append("}\n");
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace troupe::cli
