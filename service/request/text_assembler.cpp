#include "service/request/text_assembler.hpp"

#include "base/rng.hpp"

#include <algorithm>

namespace troupe {

namespace {

auto mix(std::uint64_t x) -> std::uint64_t { return splitmix64_mix(x + splitmix64_gamma); }

} // namespace

text_assembler::text_assembler(std::string tool_family, std::string response_id)
    : tool_family_(std::move(tool_family)), response_id_(std::move(response_id)) {
  restart();
}

void text_assembler::start_reasoning(bool inside) {
  reasoning_inside_ = inside;
  reasoning_ = std::make_unique<tools::reasoning_parser>(inside);
}

auto text_assembler::feed_token(token_id t, std::optional<api::token_logprob> logprob, const emit& out)
    -> output_delta {
  if (logprobs_ && logprob) unsettled_.push_back(std::move(*logprob));
  auto delta = detok_->on_token(t);
  std::vector<api::token_logprob> lps;
  if (logprobs_) {
    for (auto& b : delta.token_bytes) {
      lps.push_back(std::move(unsettled_.front()));
      unsettled_.pop_front();
      lps.back().token = std::move(b);
    }
  }
  feed(delta.text, std::move(lps), out);
  return delta;
}

void text_assembler::feed(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out) {
  if (reasoning_) {
    auto split = reasoning_->feed(text);
    reasoning(split.reasoning, out);
    return content(split.content, std::move(logprobs), out);
  }
  content(text, std::move(logprobs), out);
}

void text_assembler::finish(const emit& out) {
  if (reasoning_) {
    auto split = reasoning_->finish();
    reasoning(split.reasoning, out);
    content(split.content, {}, out);
  }
  if (tools_) calls(tools_->finish(), {}, out);
}

void text_assembler::content(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out) {
  if (tools_) return calls(tools_->feed(text), std::move(logprobs), out);
  plain(text, std::move(logprobs), out);
}

void text_assembler::plain(std::string_view text, std::vector<api::token_logprob> logprobs, const emit& out) {
  output_event e;
  e.text = text;
  e.logprobs = std::move(logprobs);
  out(std::span(&e, 1));
}

void text_assembler::reasoning(std::string_view text, const emit& out) {
  if (text.empty()) return;
  output_event e;
  e.what = output_event::kind::reasoning;
  e.text = text;
  out(std::span(&e, 1));
}

// What the tool parser said: its reasoning (harmony's), its plain text (or
// the logprobs of tokens that became call text), then the calls' news as
// one group.
void text_assembler::calls(const tools::parse_delta& d, std::vector<api::token_logprob> logprobs, const emit& out) {
  reasoning(d.reasoning, out); // harmony's analysis channel
  if (!d.content.empty() || !logprobs.empty()) plain(d.content, std::move(logprobs), out);
  if (d.calls.empty()) return;
  std::vector<output_event> events;
  for (const auto& c : d.calls) {
    num_calls_ = std::max(num_calls_, c.index + 1);
    output_event e;
    e.what = c.id.empty() ? output_event::kind::call_arguments : output_event::kind::call_start;
    e.text = c.arguments;
    e.call = c.index;
    e.call_id = c.id;
    e.name = c.name;
    events.push_back(std::move(e));
  }
  out(events);
}

void text_assembler::restart() {
  detok_.reset();
  unsettled_.clear();
  num_calls_ = 0;
  tools_.reset();
  if (reasoning_) reasoning_ = std::make_unique<tools::reasoning_parser>(reasoning_inside_);
  if (tool_family_.empty()) return;
  // Call ids as OpenAI's look ("call_" and 24 characters), a function of
  // the response's id: a repeated request gets the same ones.
  const auto seed = std::hash<std::string>{}(response_id_);
  tools_ = tools::make_tool_parser(tool_family_, [seed, n = std::uint64_t{0}]() mutable {
    static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "call_";
    auto x = mix(seed ^ mix(++n));
    for (int i = 0; i < 24; ++i) {
      if (i % 8 == 0) x = mix(x + static_cast<std::uint64_t>(i)); // 8 characters use 48 of its bits
      id += alphabet[x % 62];
      x /= 62;
    }
    return id;
  });
}

} // namespace troupe
