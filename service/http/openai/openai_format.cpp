// OpenAI's answers as JSON text (openai_format.hpp), built by appending to
// one string.
#include "service/http/openai/openai_format.hpp"

#include "base/json_text.hpp"
#include "base/utf8.hpp"

#include <charconv>
#include <cstdio>

namespace troupe::api {

namespace {

void add_string(std::string& out, std::string_view s) { json_text::append_string(out, s); }

void add_int(std::string& out, std::int64_t v) { json_text::append_number(out, v); }

// -inf (and NaN) have no JSON spelling; vLLM clamps logprobs to -9999.0 too.
void add_logprob(std::string& out, float v) {
  if (!(v >= -9999.0f)) {
    out += "-9999.0";
    return;
  }
  char buf[32];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9).ptr);
}

void add_bytes(std::string& out, std::string_view s) {
  out += '[';
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    add_int(out, static_cast<unsigned char>(s[i]));
  }
  out += ']';
}

/// A token's bytes as OpenAI shows a token: the text when it is UTF-8, else
/// "bytes:" and each byte as \xNN (printable ASCII but '\\' as itself), the
/// form OpenAI gives tokens that end mid-character (["bytes:\\xe4"]).
void add_token_string(std::string& out, std::string_view bytes) {
  if (is_valid_utf8(bytes)) return add_string(out, bytes);
  std::string s = "bytes:";
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      s += c;
    } else {
      constexpr char hex[] = "0123456789abcdef";
      s += "\\x";
      s += hex[b >> 4];
      s += hex[b & 15];
    }
  }
  add_string(out, s);
}

void add_completion_logprobs(std::string& out, const std::vector<token_logprob>& lps, std::int64_t offset) {
  out += "{\"tokens\":[";
  for (std::size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    add_token_string(out, lps[i].token);
  }
  out += "],\"token_logprobs\":[";
  for (std::size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    if (lps[i].none) out += "null";
    else add_logprob(out, lps[i].logprob);
  }
  out += "],\"top_logprobs\":[";
  for (std::size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    if (lps[i].none) {
      out += "null";
      continue;
    }
    out += '{';
    for (std::size_t j = 0; j < lps[i].top.size(); ++j) {
      if (j) out += ',';
      add_token_string(out, lps[i].top[j].first);
      out += ':';
      add_logprob(out, lps[i].top[j].second);
    }
    out += '}';
  }
  // Each offset is the character its token's first byte belongs to: a token
  // that continues a character (a byte piece) points at that character.
  out += "],\"text_offset\":[";
  for (std::size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    const auto& t = lps[i].token;
    add_int(out, offset - (!t.empty() && is_utf8_continuation(static_cast<unsigned char>(t[0])) ? 1 : 0));
    offset += num_code_points(t);
  }
  out += "]}";
}

/// Opens {"token","logprob","bytes" — the caller adds to it and closes it.
void add_chat_token(std::string& out, std::string_view token, float logprob) {
  out += "{\"token\":";
  add_token_string(out, token);
  out += ",\"logprob\":";
  add_logprob(out, logprob);
  out += ",\"bytes\":";
  add_bytes(out, token);
}

void add_chat_logprobs(std::string& out, const std::vector<token_logprob>& lps) {
  out += "{\"content\":[";
  for (std::size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    add_chat_token(out, lps[i].token, lps[i].logprob);
    out += ",\"top_logprobs\":[";
    for (std::size_t j = 0; j < lps[i].top.size(); ++j) {
      if (j) out += ',';
      add_chat_token(out, lps[i].top[j].first, lps[i].top[j].second);
      out += '}';
    }
    out += "]}";
  }
  out += "]}";
}

void add_logprobs(std::string& out, endpoint kind, const std::vector<token_logprob>* lps,
                  std::int64_t offset) {
  out += ",\"logprobs\":";
  if (!lps || lps->empty()) out += "null";
  else if (kind == endpoint::chat) add_chat_logprobs(out, *lps);
  else add_completion_logprobs(out, *lps, offset);
}

void add_finish_reason(std::string& out, std::string_view reason) {
  out += ",\"finish_reason\":";
  if (reason.empty()) out += "null";
  else add_string(out, reason);
}

/// Opens the object through "choices":[ — the caller closes both.
void add_head(std::string& out, std::string_view object, const response_head& h) {
  out += "{\"id\":";
  add_string(out, h.id);
  out += ",\"object\":";
  add_string(out, object);
  out += ",\"created\":";
  add_int(out, h.created);
  out += ",\"model\":";
  add_string(out, h.model);
  out += ",\"choices\":[";
}

void add_usage(std::string& out, const usage& u) {
  out += ",\"usage\":{\"prompt_tokens\":";
  add_int(out, u.prompt_tokens);
  out += ",\"completion_tokens\":";
  add_int(out, u.completion_tokens);
  out += ",\"total_tokens\":";
  add_int(out, u.prompt_tokens + u.completion_tokens);
  out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
  add_int(out, u.cached_tokens);
  out += "}}";
}

/// A choice opens with its index: {"index":i,
void add_index(std::string& out, const response_head& h) {
  out += "{\"index\":";
  add_int(out, h.index);
  out += ',';
}

auto object_name(endpoint kind, bool chunk) -> std::string_view {
  if (kind == endpoint::completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

} // namespace

auto stream_chunk(endpoint kind, const response_head& h, std::string_view text,
                  std::string_view finish_reason, const std::vector<token_logprob>* logprobs,
                  std::int64_t text_offset0, bool first, bool include_usage) -> std::string {
  std::string out;
  out.reserve(256 + text.size());
  add_head(out, object_name(kind, true), h);
  add_index(out, h);
  if (kind == endpoint::chat) {
    out += first ? "\"delta\":{\"role\":\"assistant\",\"content\":" : "\"delta\":{\"content\":";
    add_string(out, text);
    out += '}';
  } else {
    out += "\"text\":";
    add_string(out, text);
  }
  add_logprobs(out, kind, logprobs, text_offset0);
  add_finish_reason(out, finish_reason);
  out += "}]";
  if (include_usage) out += ",\"usage\":null";
  out += '}';
  return out;
}

auto usage_chunk(endpoint kind, const response_head& h, const usage& u) -> std::string {
  std::string out;
  add_head(out, object_name(kind, true), h);
  out += ']';
  add_usage(out, u);
  out += '}';
  return out;
}

auto full_response(endpoint kind, const response_head& h, std::string_view text,
                   std::string_view finish_reason, const std::vector<token_logprob>* logprobs,
                   const usage& u) -> std::string {
  std::string out;
  out.reserve(256 + text.size());
  add_head(out, object_name(kind, false), h);
  if (kind == endpoint::chat) {
    add_index(out, h);
    out += "\"message\":{\"role\":\"assistant\",\"content\":";
    add_string(out, text);
    out += '}';
  } else {
    add_index(out, h);
    out += "\"text\":";
    add_string(out, text);
  }
  add_logprobs(out, kind, logprobs, 0);
  add_finish_reason(out, finish_reason);
  out += "}]";
  add_usage(out, u);
  out += '}';
  return out;
}

auto chat_delta_chunk(const response_head& h, std::string_view content, std::string_view reasoning,
                      const std::vector<tools::call_delta>& calls, bool include_usage) -> std::string {
  std::string out;
  add_head(out, object_name(endpoint::chat, true), h);
  add_index(out, h);
  out += "\"delta\":{";
  bool first = true;
  const auto sep = [&] {
    if (!first) out += ',';
    first = false;
  };
  if (!content.empty()) {
    sep();
    out += "\"content\":";
    add_string(out, content);
  }
  if (!reasoning.empty()) {
    sep();
    out += "\"reasoning_content\":";
    add_string(out, reasoning);
  }
  if (!calls.empty()) {
    sep();
    out += "\"tool_calls\":[";
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto& c = calls[i];
      out += i ? ",{\"index\":" : "{\"index\":";
      add_int(out, static_cast<std::int64_t>(c.index));
      if (!c.id.empty()) {
        out += ",\"id\":";
        add_string(out, c.id);
        out += ",\"type\":\"function\",\"function\":{\"name\":";
        add_string(out, c.name);
        out += ",\"arguments\":";
      } else {
        out += ",\"function\":{\"arguments\":";
      }
      add_string(out, c.arguments);
      out += "}}";
    }
    out += ']';
  }
  out += "},\"logprobs\":null,\"finish_reason\":null}]";
  if (include_usage) out += ",\"usage\":null";
  out += '}';
  return out;
}

auto chat_response(const response_head& h, std::string_view content, std::string_view reasoning,
                   const std::vector<tools::tool_call>& calls, std::string_view finish_reason,
                   const std::vector<token_logprob>* logprobs, const usage& u) -> std::string {
  std::string out;
  add_head(out, object_name(endpoint::chat, false), h);
  add_index(out, h);
    out += "\"message\":{\"role\":\"assistant\",\"content\":";
  if (content.empty() && !calls.empty()) out += "null";
  else add_string(out, content);
  if (!reasoning.empty()) {
    out += ",\"reasoning_content\":";
    add_string(out, reasoning);
  }
  if (!calls.empty()) {
    out += ",\"tool_calls\":[";
    for (std::size_t i = 0; i < calls.size(); ++i) {
      out += i ? ",{\"id\":" : "{\"id\":";
      add_string(out, calls[i].id);
      out += ",\"type\":\"function\",\"function\":{\"name\":";
      add_string(out, calls[i].name);
      out += ",\"arguments\":";
      add_string(out, calls[i].arguments);
      out += "}}";
    }
    out += ']';
  }
  out += '}';
  add_logprobs(out, endpoint::chat, logprobs, 0);
  add_finish_reason(out, finish_reason);
  out += "}]";
  add_usage(out, u);
  out += '}';
  return out;
}

auto combine_choices(const std::vector<std::string>& responses, const usage& u) -> std::string {
  // Each is head "choices":[CHOICE],"usage":{...}} as written here: the
  // choice is the text between (a string's quotes are escaped, so the
  // markers cannot occur inside one).
  std::string out;
  constexpr std::string_view open = "\"choices\":[", close = "],\"usage\":";
  for (std::size_t i = 0; i < responses.size(); ++i) {
    const auto& r = responses[i];
    const auto from = r.find(open), to = r.rfind(close);
    if (from == std::string::npos || to == std::string::npos || to < from) return {};
    if (i == 0) out.assign(r, 0, from + open.size());
    else out += ',';
    out.append(r, from + open.size(), to - from - open.size());
  }
  out += ']';
  add_usage(out, u);
  out += '}';
  return out;
}

auto models_list(const std::vector<model_card>& models, std::int64_t created) -> std::string {
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (std::size_t i = 0; i < models.size(); ++i) {
    out += i ? ",{\"id\":" : "{\"id\":";
    add_string(out, models[i].id);
    out += ",\"object\":\"model\",\"created\":";
    add_int(out, created);
    out += ",\"owned_by\":\"troupe\",\"max_model_len\":";
    add_int(out, models[i].max_model_len);
    out += '}';
  }
  out += "]}";
  return out;
}

auto error_body(const api_error& e) -> std::string {
  std::string out = "{\"error\":{\"message\":";
  add_string(out, e.message);
  out += ",\"type\":";
  add_string(out, e.type);
  out += ",\"param\":";
  if (e.param.empty()) out += "null";
  else add_string(out, e.param);
  out += ",\"code\":";
  if (e.code.empty()) out += "null";
  else add_string(out, e.code);
  out += "}}";
  return out;
}

auto tokenize_response(const std::vector<token_id>& tokens, std::int64_t max_model_len,
                       const std::vector<std::string>* token_strs) -> std::string {
  std::string out = "{\"count\":";
  add_int(out, static_cast<std::int64_t>(tokens.size()));
  out += ",\"max_model_len\":";
  add_int(out, max_model_len);
  out += ",\"tokens\":[";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ',';
    add_int(out, tokens[i]);
  }
  out += "],\"token_strs\":";
  if (!token_strs) {
    out += "null}";
    return out;
  }
  out += '[';
  for (std::size_t i = 0; i < token_strs->size(); ++i) {
    if (i) out += ',';
    add_string(out, (*token_strs)[i]);
  }
  out += "]}";
  return out;
}

auto detokenize_response(std::string_view text) -> std::string {
  std::string out = "{\"prompt\":";
  add_string(out, text);
  out += '}';
  return out;
}

} // namespace troupe::api
