#pragma once
#include "actors/interfaces.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/tokenizer.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <optional>

namespace troupe {

/// One tokenizer of the pool. `format`: the chat template (nullopt: chat
/// requests get an error saying the model has none).
auto spawn_tokenizer(caf::actor_system& sys, std::shared_ptr<const tokenizer> tok,
                     std::optional<chat_format> format) -> tokenizer_actor;

} // namespace troupe
