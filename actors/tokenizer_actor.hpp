#pragma once
#include "actors/interfaces.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <optional>

namespace troupe {

/// One tokenizer of the pool. `chat`: the chat template (null: chat
/// requests get an error saying the model has none).
auto spawn_tokenizer(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok,
                     std::shared_ptr<const chat_template> chat) -> tokenizer_actor;

} // namespace troupe
