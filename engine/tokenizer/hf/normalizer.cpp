#include "engine/tokenizer/hf/normalizer.hpp"

#include "engine/tokenizer/hf/unicode.hpp"

namespace troupe::hf {
normalizer::normalizer(std::optional<dom::element> json) {
  if (json) add(*json);
}

auto normalizer::add(dom::element json) -> void {
  const auto type = type_of(json, "normalizer");
  if (type == "Sequence") {
    auto list = dom::array{};
    if (json["normalizers"].get_array().get(list) != simdjson::SUCCESS)
      throw hf_error("normalizer Sequence has no \"normalizers\" list");
    for (const auto item : list) add(item);
  } else if (type == "NFC") {
    steps_.push_back({kind::nfc, {}, {}, {}});
  } else if (type == "NFD") {
    steps_.push_back({kind::nfd, {}, {}, {}});
  } else if (type == "NFKC") {
    steps_.push_back({kind::nfkc, {}, {}, {}});
  } else if (type == "NFKD") {
    steps_.push_back({kind::nfkd, {}, {}, {}});
  } else if (type == "Lowercase") {
    steps_.push_back({kind::lowercase, {}, {}, {}});
  } else if (type == "Prepend") {
    steps_.push_back({kind::prepend, {}, std::string(string_field(json, "prepend", "normalizer Prepend")), {}});
  } else if (type == "Replace") {
    const auto content = std::string(string_field(json, "content", "normalizer Replace"));
    const auto pattern = field(json, "pattern");
    if (!pattern) throw hf_error("normalizer Replace has no \"pattern\"");
    if (const auto s = opt_string(*pattern, "String")) {
      steps_.push_back({kind::replace_string, std::string(*s), content, {}});
    } else if (const auto r = opt_string(*pattern, "Regex")) {
      steps_.push_back({kind::replace_regex, {}, content, std::make_unique<regex>(*r)});
    } else {
      throw hf_error("normalizer Replace: pattern is neither String nor Regex");
    }
  } else {
    unsupported("normalizer", type);
  }
}

auto normalizer::apply(std::string_view text) const -> std::string {
  auto s = std::string(text);
  for (const auto& st : steps_) {
    switch (st.what) {
    case kind::nfc: s = normalize(s, normal_form::nfc); break;
    case kind::nfd: s = normalize(s, normal_form::nfd); break;
    case kind::nfkc: s = normalize(s, normal_form::nfkc); break;
    case kind::nfkd: s = normalize(s, normal_form::nfkd); break;
    case kind::lowercase: s = lowercase(s); break;
    case kind::prepend:
      if (!s.empty()) s.insert(0, st.content);
      break;
    case kind::replace_string: s = replace_all(s, st.pattern, st.content); break;
    case kind::replace_regex: s = st.pattern_regex->replace(s, st.content); break;
    }
  }
  return s;
}

} // namespace troupe::hf
