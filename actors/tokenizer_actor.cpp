#include "actors/tokenizer_actor.hpp"

#include "engine/grammar/grammar_matcher.hpp"
#include "service/tools/harmony_parser.hpp"
#include "service/tools/reasoning_parser.hpp"

#include <caf/all.hpp>

#include <ctime>
#include <exception>
#include <new>
#include <optional>

namespace troupe {
namespace {

// A text over twice this is counted in pieces of about this many bytes
// before it is encoded whole.
constexpr std::size_t k_piece_bytes = 16 << 10;

// The tokens of `text` counted piece by piece (cut before whitespace where a
// piece has some), stopping once the count is sure to pass `limit`: a cut
// can move a token or two across it, so the count must pass the limit by an
// eighth plus two a piece. Returns the count when it stopped, else 0 (the
// text is near or under the limit: encode it whole). A 1 MB text over a
// 2,048-token limit stops after its first piece.
auto count_past(const tokenizer& tok, std::string_view text, bool special, std::int64_t limit) -> std::int64_t {
  std::int64_t count = 0, pieces = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = std::min(text.size(), at + k_piece_bytes);
    if (end < text.size()) {
      // (Looked for in this piece only: a text without whitespace is not
      // searched back to its start for every piece.)
      const auto space = text.substr(at, end - at).find_last_of(" \t\n");
      if (space != std::string_view::npos && space > 0) end = at + space;
    }
    const auto piece = text.substr(at, end - at);
    count += static_cast<std::int64_t>(special ? tok.encode_with_special(piece, false).size()
                                               : tok.encode(piece, false).size());
    ++pieces;
    if (count > limit + limit / 8 + 2 * pieces) return count;
    at = end;
  }
  return 0;
}

void encode_text(const tokenizer& tok, const std::string& text, bool special, const encode_job& job, encoded& out) {
  // (A token takes a byte or more, plus one a piece for the cut: a text of
  // fewer bytes than count_past's threshold cannot pass it, so it is not counted.)
  if (job.max_tokens > 0 && text.size() > 2 * k_piece_bytes &&
      text.size() > static_cast<std::size_t>(job.max_tokens + job.max_tokens / 8)) {
    out.at_least = count_past(tok, text, special, job.max_tokens);
    if (out.at_least > 0) return;
  }
  const bool bos = tok.bos_id() >= 0 && job.add_special_tokens.value_or(!job.chat);
  out.tokens = special ? tok.encode_with_special(text, bos) : tok.encode(text, bos);
}

/// The local time, for templates that print the date (strftime_now).
auto local_now() -> std::tm {
  const auto t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

auto encode_prompt(const tokenizer& tok, const chat_template* chat, const encode_job& job) -> encoded;

/// The job's grammar as the replica is to run it, compiled into the shared
/// cache (and its first mask taken), or why it is refused.
void prepare(grammar::grammar_cache* grammars, const encode_job& job, encoded& out) {
  if (job.grammar.empty() || !out.error.empty()) return;
  // (A prompt whose thinking block is closed already: the answer comes at once.)
  out.grammar = job.grammar_in_final_channel                     ? tools::harmony_parser::final_grammar(job.grammar)
                : job.grammar_after_thinking && !out.thinking_done ? tools::reasoning_parser::grammar_after(job.grammar, out.opens_thinking)
                                                                    : job.grammar;
  if (grammars == nullptr) return; // (a backend without grammars: the request checks refused it)
  try {
    out.compiled = grammar::prepare_grammar(*grammars, out.grammar);
  } catch (const grammar::grammar_error& e) {
    out.grammar_error = e.what();
  }
}

auto encode(const tokenizer& tok, const chat_template* chat, grammar::grammar_cache* grammars, const encode_job& job)
    -> encoded {
  auto out = encode_prompt(tok, chat, job);
  prepare(grammars, job, out);
  return out;
}

/// The job's prompt's tokens with these messages, or -1 where it cannot be rendered.
auto count_tokens(const tokenizer& tok, const chat_template& chat, const encode_job& job,
                  std::vector<chat_message> messages) -> std::int64_t {
  encode_job j;
  j.chat = true;
  j.messages = std::move(messages);
  j.add_generation_prompt = job.add_generation_prompt;
  j.tools_json = job.tools_json;
  j.template_kwargs_json = job.template_kwargs_json;
  const auto e = encode_prompt(tok, &chat, j);
  return e.error.empty() ? e.num_tokens() : -1;
}

/// Anthropic's context edits, in the request's order, on `messages`: each
/// one that clears something, with the prompt's tokens it took away.
auto apply_edits(const tokenizer& tok, const chat_template& chat, const encode_job& job,
                 std::vector<chat_message>& messages) -> std::vector<applied_edit> {
  std::vector<applied_edit> applied;
  const auto& e = job.edits;
  std::optional<std::int64_t> current; // the prompt's tokens as `messages` stand, once counted
  const auto count = [&] {
    if (!current) current = count_tokens(tok, chat, job, messages);
    return *current;
  };
  const auto thinking = [&] {
    if (!e.clear_thinking) return;
    auto after = messages;
    const auto cleared = clear_thinking(after, e.keep_thinking_turns);
    if (cleared == 0) return;
    const auto before_n = count(), after_n = count_tokens(tok, chat, job, after);
    applied.push_back({true, cleared, std::max<std::int64_t>(0, before_n - after_n)});
    messages = std::move(after);
    current = after_n;
  };
  const auto tool_uses = [&] {
    if (!e.clear_tool_uses) return;
    const auto before_n = count();
    if (before_n <= e.trigger_tokens) return;
    auto after = messages;
    const auto cleared = clear_tool_uses(after, e);
    if (cleared == 0) return;
    const auto after_n = count_tokens(tok, chat, job, after);
    if (before_n - after_n < e.clear_at_least) return;
    applied.push_back({false, cleared, before_n - after_n});
    messages = std::move(after);
    current = after_n;
  };
  if (e.thinking_first) thinking();
  tool_uses();
  if (!e.thinking_first) thinking();
  return applied;
}

auto encode_prompt(const tokenizer& tok, const chat_template* chat, const encode_job& job) -> encoded {
  encoded out;
  if (!job.chat && !job.prompt_tokens.empty()) {
    for (const auto t : job.prompt_tokens)
      if (t < 0 || t >= tok.vocab_size()) {
        out.error = "prompt token " + std::to_string(t) + " is outside the vocabulary: ids are between 0 and " +
                    std::to_string(tok.vocab_size() - 1);
        return out;
      }
    out.tokens = job.prompt_tokens;
    return out;
  }
  if (!job.chat) {
    encode_text(tok, job.text, false, job, out);
    return out;
  }
  if (chat == nullptr) {
    out.error = "the model has no chat template; set model.chat_template in the config";
    return out;
  }
  std::vector<chat_message> edited;
  if (job.edits.any()) {
    edited = job.messages;
    out.applied_edits = apply_edits(tok, *chat, job, edited);
  }
  chat_request request;
  request.add_generation_prompt = job.add_generation_prompt;
  try { // (the messages' tool calls, the tools and the template's variables are JSON the template reads)
    request.messages = messages_value(job.edits.any() ? edited : job.messages);
    if (!job.tools_json.empty()) request.tools = jinja::parse_json(job.tools_json, "tools");
    if (!job.template_kwargs_json.empty()) {
      const auto kwargs = jinja::parse_json(job.template_kwargs_json, "chat_template_kwargs");
      for (const auto& [k, v] : kwargs.obj().entries) request.extra.set(k, v);
    }
  } catch (const jinja::render_error& e) {
    out.error = e.what();
    return out;
  }
  const auto text = render_chat(*chat, request, {local_now}, &out.error);
  out.opens_thinking = tools::reasoning_parser::prompt_opens(text);
  out.thinking_done = tools::reasoning_parser::prompt_closes(text);
  if (out.error.empty()) encode_text(tok, text, true, job, out);
  return out;
}

auto tokenizer_behavior(tokenizer_actor::pointer, std::shared_ptr<const tokenizer> tok,
                        std::shared_ptr<const chat_template> chat, std::shared_ptr<grammar::grammar_cache> grammars)
    -> tokenizer_actor::behavior_type {
  return {
      [tok, chat, grammars](encode_atom, const encode_job& job) -> encoded {
        // Whatever a request's data makes fail is its error, never the
        // actor's end (one of the pool's actors would answer no one after).
        encoded out;
        try {
          return encode(*tok, chat.get(), grammars.get(), job);
        } catch (const std::bad_alloc&) {
          out.error = "preparing the request needs more memory than the server has";
        } catch (const std::exception& e) {
          out.error = std::string("the request could not be prepared: ") + e.what();
        }
        return out;
      },
  };
}

} // namespace

auto spawn_tokenizer(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok,
                     std::shared_ptr<const chat_template> chat, std::shared_ptr<grammar::grammar_cache> grammars)
    -> tokenizer_actor {
  return sys.spawn(tokenizer_behavior, std::move(tok), std::move(chat), std::move(grammars));
}

} // namespace troupe
