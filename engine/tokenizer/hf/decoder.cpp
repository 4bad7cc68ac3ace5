#include "engine/tokenizer/hf/decoder.hpp"

#include "engine/tokenizer/hf/unicode.hpp"
#include "base/utf8.hpp"

namespace troupe::hf {
namespace {

auto hex_digit(char c) -> int {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A token through the byte-level alphabet: its bytes, or (a character
/// outside it) the token's own UTF-8, as HF's ByteLevel decoder does.
auto byte_level_bytes(std::string_view token) -> std::string {
  auto out = std::string{};
  if (!gpt2_alphabet().to_bytes(token, out)) out.assign(token);
  return out;
}

/// HF's Strip decoder on one token: up to `start` leading and `stop`
/// trailing copies of the character `c`.
auto strip(std::string_view token, std::string_view c, std::size_t start, std::size_t stop) -> std::string {
  for (std::size_t i = 0; i < start && token.starts_with(c); ++i) token.remove_prefix(c.size());
  for (std::size_t i = 0; i < stop && token.ends_with(c); ++i) token.remove_suffix(c.size());
  return std::string(token);
}

} // namespace

auto byte_fallback_value(std::string_view token, unsigned char& byte) -> bool {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return false;
  const auto hi = hex_digit(token[3]), lo = hex_digit(token[4]);
  if (hi < 0 || lo < 0) return false;
  byte = static_cast<unsigned char>(hi * 16 + lo);
  return true;
}

decoder::decoder(std::optional<dom::element> json) {
  if (!json) return;
  none_ = false;
  add(*json);
  auto fused = false;
  for (const auto& st : steps_) {
    if (st.what == kind::fuse || st.what == kind::byte_level) fused = true;
    if (st.what == kind::strip && fused && st.content == " " && st.start > 0) leading_ = leading_space_rule::drop_first;
    if (st.what == kind::metaspace && st.prepend) leading_ = leading_space_rule::drop_first;
  }
}

auto decoder::byte_level() -> decoder {
  auto d = decoder{std::nullopt};
  d.none_ = false;
  d.steps_.push_back(step{kind::byte_level, {}, {}, {}, 0, 0, true});
  return d;
}

auto decoder::add(dom::element json) -> void {
  const auto type = type_of(json, "decoder");
  auto st = step{};
  if (type == "Sequence") {
    auto list = dom::array{};
    if (json["decoders"].get_array().get(list) != simdjson::SUCCESS)
      throw hf_error("decoder Sequence has no \"decoders\" list");
    for (const auto item : list) add(item);
    return;
  }
  if (type == "ByteLevel") {
    st.what = kind::byte_level;
  } else if (type == "ByteFallback") {
    st.what = kind::byte_fallback;
    has_byte_fallback_ = true;
  } else if (type == "Fuse") {
    st.what = kind::fuse;
  } else if (type == "Strip") {
    st.what = kind::strip;
    st.content = std::string(string_field(json, "content", "decoder Strip"));
    st.start = static_cast<std::size_t>(int_field(json, "start", 0));
    st.stop = static_cast<std::size_t>(int_field(json, "stop", 0));
  } else if (type == "Replace") {
    st.content = std::string(string_field(json, "content", "decoder Replace"));
    const auto pattern = field(json, "pattern");
    if (!pattern) throw hf_error("decoder Replace has no \"pattern\"");
    if (const auto s = opt_string(*pattern, "String")) {
      st.what = kind::replace_string;
      st.pattern = std::string(*s);
    } else if (const auto r = opt_string(*pattern, "Regex")) {
      st.what = kind::replace_regex;
      st.re = std::make_unique<regex>(*r);
    } else {
      throw hf_error("decoder Replace: pattern is neither String nor Regex");
    }
  } else if (type == "Metaspace") {
    st.what = kind::metaspace;
    st.content = std::string(string_field(json, "replacement", "decoder Metaspace"));
    if (const auto scheme = opt_string(json, "prepend_scheme")) st.prepend = *scheme != "never";
    else st.prepend = bool_field(json, "add_prefix_space", true);
  } else {
    unsupported("decoder", type);
  }
  steps_.push_back(std::move(st));
}

auto decoder::decode(std::vector<std::string> tokens) const -> std::string {
  if (none_) {
    auto out = std::string{};
    for (std::size_t i = 0; i < tokens.size(); ++i) out.append(i ? " " : "").append(tokens[i]);
    return out;
  }
  for (const auto& st : steps_) {
    switch (st.what) {
    case kind::byte_level: {
      auto bytes = std::string{};
      for (const auto& t : tokens) bytes += byte_level_bytes(t);
      tokens.assign(1, utf8_lossy(bytes));
      break;
    }
    case kind::replace_string:
      for (auto& t : tokens) t = replace_all(t, st.pattern, st.content);
      break;
    case kind::replace_regex:
      for (auto& t : tokens) t = st.re->replace(t, st.content);
      break;
    case kind::byte_fallback: {
      // A run of <0xNN> tokens is its bytes if they are UTF-8, else one
      // U+FFFD per byte.
      auto out = std::vector<std::string>{};
      auto run = std::string{};
      const auto end_run = [&] {
        if (run.empty()) return;
        if (is_valid_utf8(run)) out.push_back(run);
        else
          for (std::size_t i = 0; i < run.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
        run.clear();
      };
      for (auto& t : tokens) {
        auto b = static_cast<unsigned char>(0);
        if (byte_fallback_value(t, b)) {
          run.push_back(static_cast<char>(b));
        } else {
          end_run();
          out.push_back(std::move(t));
        }
      }
      end_run();
      tokens = std::move(out);
      break;
    }
    case kind::fuse: {
      auto joined = std::string{};
      for (const auto& t : tokens) joined += t;
      tokens.assign(1, std::move(joined));
      break;
    }
    case kind::strip:
      for (auto& t : tokens) t = strip(t, st.content, st.start, st.stop);
      break;
    case kind::metaspace:
      for (std::size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], st.content, i == 0 && st.prepend ? "" : " ");
      break;
    }
  }
  auto out = std::string{};
  for (const auto& t : tokens) out += t;
  return out;
}

auto decoder::surface(std::string_view token, bool& is_byte, unsigned char& byte) const -> std::string {
  is_byte = false;
  if (none_) return std::string(token);
  auto t = std::string(token);
  auto fused = false;
  for (const auto& st : steps_) {
    switch (st.what) {
    case kind::byte_level: t = byte_level_bytes(t); fused = true; break;
    case kind::replace_string: t = replace_all(t, st.pattern, st.content); break;
    case kind::replace_regex: t = st.re->replace(t, st.content); break;
    case kind::byte_fallback:
      if (byte_fallback_value(t, byte)) {
        is_byte = true;
        return std::string(1, static_cast<char>(byte));
      }
      break;
    case kind::fuse: fused = true; break;
    case kind::strip:
      if (!fused) t = strip(t, st.content, st.start, st.stop);
      break;
    case kind::metaspace: t = replace_all(t, st.content, " "); break;
    }
  }
  return t;
}

} // namespace troupe::hf
