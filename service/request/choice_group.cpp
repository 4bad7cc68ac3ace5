#include "service/request/choice_group.hpp"

#include "base/rng.hpp"

#include <algorithm>

namespace troupe {

void choice_group::open(std::size_t count, const api::wire_protocol& protocol, const api::generation_request& body,
                        const api::response_head& head, std::string_view tool_parser,
                        const api::reasoning_seal* seal) {
  choices_.clear();
  choices_.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto h = head;
    h.index = static_cast<std::int32_t>(i);
    choices_[i].writer.emplace(protocol, body, std::move(h), tool_parser);
    choices_[i].writer->set_seal(seal);
  }
}

auto choice_group::completion_tokens() const -> std::int64_t {
  std::int64_t n = 0;
  for (const auto& c : choices_) n += c.writer->completion_tokens();
  return n;
}

auto choice_group::all_finished() const -> bool {
  return std::all_of(choices_.begin(), choices_.end(),
                     [](const choice_state& c) { return c.finished != finish_reason::none; });
}

auto choice_group::answer(const api::wire_protocol& protocol, std::size_t n, std::string batch) -> std::string {
  auto total = writer().usage(); // (the prompt once, the first choice's cache figures)
  total.completion_tokens = completion_tokens();
  if (writer().streaming()) return batch + writer().tail(total);
  std::vector<std::size_t> order(choices_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (order.size() > n) {
    const auto mean = [&](std::size_t i) {
      const auto& c = choices_[i];
      const auto tokens = c.writer->completion_tokens();
      return tokens > 0 ? c.logprob_sum / static_cast<double>(tokens) : 0.0;
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return mean(a) > mean(b); });
    order.resize(n);
  }
  std::vector<std::string> wholes;
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto& c = choices_[order[k]];
    c.writer->set_index(static_cast<std::int32_t>(k));
    wholes.push_back(c.writer->whole(finish_reason_name(c.finished)));
  }
  return protocol.combine(wholes, total);
}

void choice_group::restart() {
  for (auto& c : choices_) {
    c.writer->restart();
    c.finished = finish_reason::none;
    c.logprob_sum = 0;
  }
}

auto choice_request(const request& first, std::size_t i) -> request {
  request r = first;
  r.id = first.id + i;
  r.choice = static_cast<std::int32_t>(i);
  if (r.group != 0) r.group = first.id + 1; // (the group: any id unique to it, never 0)
  if (i > 0 && r.sampling.seed) r.sampling.seed = splitmix64_mix(*r.sampling.seed + splitmix64_gamma * i);
  return r;
}

} // namespace troupe
