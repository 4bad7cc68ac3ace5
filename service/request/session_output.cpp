// The session's output half: a step's tokens turned into text, a choice's
// end, the response's end (the response cache and the Responses store fed,
// the figures observed) and a cached answer replayed.

#include "service/request/session.hpp"

#include "engine/tokenizer/detokenizer.hpp"

namespace troupe {
using namespace session_detail;
namespace {

auto logprob_of(const output_processor& out, const sample_result& s) -> api::token_logprob {
  api::token_logprob lp;
  lp.logprob = s.logprob;
  for (const auto& t : s.top_logprobs) lp.top.emplace_back(out.token_bytes(t.token), t.logprob);
  return lp;
}

/// The echoed prompt's logprobs: each token's bytes (as a fresh detokenizer
/// settles them, so joined they are the prompt's text), the first with none.
/// Nothing when the replica sent no score for some token (a backend without
/// prompt logprobs).
auto echo_logprobs(const tokenizer& tok, const output_processor& out, const std::vector<token_id>& prompt,
                   const std::vector<sample_result>& scores) -> std::optional<std::vector<api::token_logprob>> {
  if (scores.size() + 1 != prompt.size()) return std::nullopt;
  incremental_detokenizer d(tok, true);
  for (const token_id t : prompt) d.push(t);
  d.flush();
  auto bytes = d.take_settled();
  std::vector<api::token_logprob> lps(prompt.size());
  lps[0].none = true;
  for (std::size_t i = 1; i < prompt.size(); ++i) lps[i] = logprob_of(out, scores[i - 1]);
  for (std::size_t i = 0; i < prompt.size(); ++i) lps[i].token = std::move(bytes[i]);
  return lps;
}

} // namespace

// One step's tokens (zero or one, as a rule): their text goes out in one write.
auto request_session::on_tokens(const request_update& u, steady_time now) -> effects {
  // (u.id: a replica this request has left, or a choice already ended.)
  const auto i = static_cast<std::size_t>(u.id - id_);
  if (done() || u.id < id_ || i >= choices_.size() || choices_[i].finished != finish_reason::none) return {};
  if (u.finished == finish_reason::error) return replica_failed(now);
  effects fx;
  std::string batch;
  finish_reason ended = u.finished;
  if (u.token) {
    auto& w = *choices_[i].writer;
    if (choices_.completion_tokens() == 0) {
      first_token_ = now;
      fx.push_back(observe(effect::observe::what::ttft, between(req_.arrival, now)));
    } else {
      fx.push_back(observe(effect::observe::what::itl, between(last_token_, now)));
    }
    last_token_ = now;
    if (u.num_cached_tokens >= 0) w.set_cache(u.num_cached_tokens, u.num_cache_written_tokens);
    if (w.completion_tokens() == 0 && req_.body.echo) {
      if (auto refused = echo(i, u, batch, now)) {
        append(fx, std::move(*refused));
        return fx;
      }
    }
    if (const auto f = add_token(i, *u.token, batch); f != finish_reason::none) ended = f;
  }
  if (ended != finish_reason::none) {
    if (choices_.size() == 1) {
      append(fx, finish(ended, std::move(batch), now));
      return fx;
    }
    append(fx, end_choice(i, ended, std::move(batch), now));
    return fx;
  }
  if (!batch.empty()) fx.push_back(effect::write{std::move(batch)});
  return fx;
}

// With echo: the prompt's text (and its logprobs, when asked) before the
// first token's; a backend without prompt logprobs refuses.
auto request_session::echo(std::size_t i, const request_update& u, std::string& batch, steady_time now)
    -> std::optional<effects> {
  std::vector<api::token_logprob> lps;
  if (req_.body.want_logprobs) {
    auto echoed = echo_logprobs(*model_->tok, choices_[i].writer->detokenizer(), original_.prompt, u.prompt_logprobs);
    if (!echoed)
      return fail({400, "echo with logprobs: this replica's backend does not compute prompt logprobs", "", "echo",
                   "unsupported_parameter"},
                  now);
    lps = std::move(*echoed);
  }
  choices_[i].writer->add_text(batch, echo_text_, std::move(lps));
  return std::nullopt;
}

// The sampled token, then those a grammar forced after it (jump-forward,
// never with logprobs; their logprob under the grammar's mask is 0): their
// text into `batch`; how the choice ended, if it did.
auto request_session::add_token(std::size_t i, const sample_result& s, std::string& batch) -> finish_reason {
  auto& c = choices_[i];
  auto& w = *c.writer;
  c.logprob_sum += s.logprob;
  for (std::size_t k = 0; k <= s.forced.size(); ++k) {
    std::optional<api::token_logprob> lp;
    if (k == 0 && req_.body.want_logprobs) lp = logprob_of(w.detokenizer(), s);
    const auto delta = w.add_token(batch, k == 0 ? s.token : s.forced[k - 1], std::move(lp));
    if (req_.cache) pieces_.push_back(delta.text);
    if (delta.finished != finish_reason::none) {
      if (!delta.stop_reason.empty()) w.set_stop_sequence(delta.stop_reason);
      // A stop string (or EOS) the scheduler may not have acted on: the
      // abort sent as the session quits (or end_choice's) frees the
      // request's blocks now rather than at max_tokens.
      return delta.finished;
    }
  }
  return finish_reason::none;
}

// One of n choices ended: its finish goes out with `batch` (streamed), its
// request ends at the replica (a stop string it did not see), and the
// response ends with the last.
auto request_session::end_choice(std::size_t i, finish_reason reason, std::string batch, steady_time now)
    -> effects {
  auto& c = choices_[i];
  c.finished = reason;
  effects fx{effect::abort{id_ + i}};
  if (c.writer->streaming()) batch = c.writer->closing(std::move(batch), finish_reason_name(reason), false);
  if (choices_.all_finished()) {
    append(fx, finish(choices_[0].finished, std::move(batch), now));
    return fx;
  }
  if (!batch.empty()) fx.push_back(effect::write{std::move(batch)});
  return fx;
}

// Ends the response. `batch`: stream text not yet written, sent with the
// final events in one write.
auto request_session::finish(finish_reason reason, std::string batch, steady_time now) -> effects {
  auto& w = choices_.writer();
  const std::string reason_name(finish_reason_name(reason));
  settle(now);
  // A whole answer of a cacheable request is kept for its repeats.
  if (req_.cache && (reason == finish_reason::stop || reason == finish_reason::length) &&
      pieces_.size() == static_cast<std::size_t>(w.completion_tokens()))
    req_.cache->put(req_.cache_key,
                    {std::move(pieces_), static_cast<std::uint8_t>(reason), w.prompt_tokens(), w.completion_tokens()},
                    seconds(now));
  std::string answer = choices_.size() > 1 ? choices_.answer(*req_.protocol, static_cast<std::size_t>(req_.body.n), std::move(batch))
                       : w.streaming()      ? w.closing(std::move(batch), reason_name)
                                            : w.whole(reason_name);
  // A stored Responses answer: the conversation so far, and the response.
  if (auto stored = req_.responses ? w.stored() : std::nullopt) {
    req_.conversation.push_back(std::move(stored->first));
    req_.responses->put(req_.store_tenant, w.head().id, {std::move(req_.conversation), std::move(stored->second)},
                        seconds(now));
  }
  // Observed before the answer goes out: a client that reads /metrics once
  // it has its answer finds it counted.
  using what = effect::observe::what;
  effects fx{observe(what::e2e, between(req_.arrival, now))};
  if (w.completion_tokens() > 1)
    fx.push_back(observe(what::tpot, between(first_token_, now) / static_cast<double>(w.completion_tokens() - 1)));
  fx.push_back(observe(what::prompt_tokens, static_cast<double>(w.prompt_tokens())));
  fx.push_back(observe(what::generation_tokens, static_cast<double>(choices_.completion_tokens())));
  fx.push_back(observe(what::success, 0, reason));
  phase_ = phase::finished;
  if (w.streaming()) {
    fx.push_back(effect::write{std::move(answer)});
    fx.push_back(effect::end_stream{});
  } else {
    auto headers = req_.headers;
    headers.emplace_back("Content-Type", "application/json");
    fx.push_back(effect::respond{200, std::move(headers), std::move(answer)});
  }
  fx.push_back(effect::quit{});
  return fx;
}

// A response cache hit: the stored answer, streamed as it was (one event
// per token) or whole, without the engine.
auto request_session::replay(const cached_response& hit, steady_time now) -> effects {
  req_.cache = nullptr; // (nothing to store again)
  choices_.writer().set_prompt_tokens(hit.prompt_tokens);
  if (req_.ticket) req_.ticket->charge_prompt(hit.prompt_tokens, seconds(now));
  effects fx;
  if (req_.body.stream) start_stream(fx);
  first_token_ = now;
  fx.push_back(observe(effect::observe::what::ttft, between(req_.arrival, now)));
  auto batch = choices_.writer().replay(hit.pieces);
  append(fx, finish(static_cast<finish_reason>(hit.finish), std::move(batch), now));
  return fx;
}

} // namespace troupe
