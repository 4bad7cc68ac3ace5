#include "actors/tokenizer_actor.hpp"

#include <caf/all.hpp>

namespace troupe {
namespace {

auto encode(const tokenizer& tok, const std::optional<chat_format>& format, const encode_job& job) -> encoded {
  encoded out;
  if (!job.chat) {
    out.tokens = tok.encode(job.text, tok.bos_id() >= 0);
    return out;
  }
  if (!format) {
    out.error = "the model has no chat template; set model.chat_template in the config";
    return out;
  }
  const auto text = render_chat(*format, job.messages, true, &out.error);
  if (out.error.empty()) out.tokens = tok.encode_with_special(text, false);
  return out;
}

auto tokenizer_behavior(tokenizer_actor::pointer, std::shared_ptr<const tokenizer> tok,
                        std::optional<chat_format> format) -> tokenizer_actor::behavior_type {
  return {
      [tok, format](encode_atom, const encode_job& job) -> encoded { return encode(*tok, format, job); },
  };
}

} // namespace

auto spawn_tokenizer(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok,
                     std::optional<chat_format> format) -> tokenizer_actor {
  return sys.spawn(tokenizer_behavior, std::move(tok), format);
}

} // namespace troupe
