#pragma once
#include "actors/interfaces.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <caf/actor_system.hpp>

namespace troupe::grammar {
class grammar_cache;
} // namespace troupe::grammar

#include <memory>
#include <optional>

namespace troupe {

/// One tokenizer of the pool. `chat`: the chat
/// template (null: chat requests get an error saying the model has none).
/// `grammars`: where jobs' grammars are compiled, shared with the model's
/// executors (null on a backend without structured output).
auto spawn_tokenizer(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok,
                     std::shared_ptr<const chat_template> chat, std::shared_ptr<grammar::grammar_cache> grammars)
    -> tokenizer_actor;

} // namespace troupe
