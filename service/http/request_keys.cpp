#include "service/http/request_keys.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace troupe::api {

auto session_key(const generation_request& r, const std::string& session) -> std::uint64_t {
  std::string key = session;
  if (!key.empty()) key = "s:" + key;
  else if (!r.cache_key.empty()) key = "c:" + r.cache_key;
  else if (!r.user.empty()) key = "u:" + r.user;
  else if (!r.messages.empty())
    for (const auto& m : r.messages) {
      key += "m:" + m.role + "\n" + m.content + "\n";
      if (m.role == "user") break;
    }
  else if (!r.prompt.empty())
    key = "p:" + r.prompt.substr(0, 256);
  else
    for (std::size_t i = 0; i < std::min<std::size_t>(64, r.prompt_tokens.size()); ++i)
      key += (i ? "," : "t:") + std::to_string(r.prompt_tokens[i]);
  return std::hash<std::string>{}(key);
}

auto canonical_request(const generation_request& r, const std::string& version) -> std::string {
  const auto& s = r.sampling;
  if (!(s.temperature == 0 || s.seed) || r.want_logprobs || r.echo || r.best_of > 1) return {};
  std::string k = version;
  k += r.kind == endpoint::chat ? "\nchat\n" : "\ncompletion\n";
  const auto field = [&](std::string_view text) {
    k += std::to_string(text.size());
    k += ':';
    k += text;
  };
  for (const auto& m : r.messages) {
    field(m.role);
    field(m.content);
  }
  field(r.prompt);
  for (auto t : r.prompt_tokens) k += std::to_string(t) + ",";
  char nums[256];
  std::snprintf(nums, sizeof nums, "|%a|%d|%a|%a|%a|%a|%a|%llu|%d|%d|%d|", static_cast<double>(s.temperature), s.top_k,
                static_cast<double>(s.top_p), static_cast<double>(s.min_p), static_cast<double>(s.repetition_penalty),
                static_cast<double>(s.presence_penalty), static_cast<double>(s.frequency_penalty),
                static_cast<unsigned long long>(s.seed.value_or(0)), s.seed ? 1 : 0, r.max_tokens.value_or(-1),
                s.ignore_eos ? 1 : 0);
  k += nums;
  for (const auto& stop : s.stop) field(stop);
  for (auto t : s.stop_token_ids) k += std::to_string(t) + ",";
  k += '|';
  for (const auto& [t, bias] : s.logit_bias) {
    std::snprintf(nums, sizeof nums, "%d:%a,", t, static_cast<double>(bias));
    k += nums;
  }
  field(s.grammar);
  k += std::to_string(s.thinking_budget) + '|';
  field(r.tools_json);
  field(r.template_kwargs_json);
  k += std::to_string(static_cast<int>(r.choice.what)) + ":" + r.choice.name + (r.parallel_tool_calls ? "|p" : "|s");
  for (const auto& m : r.messages) {
    field(m.tool_calls_json);
    field(m.tool_call_id);
    field(m.name);
    field(m.reasoning_content);
  }
  return k;
}

} // namespace troupe::api
