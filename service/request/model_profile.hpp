#pragma once
// What a request's session needs to know of the model serving it, computed
// once when the model is loaded (cli/) and shared by every request: its
// tokenizer, limits, end tokens, defaults, and what its backend and chat
// format can do. Plain C++: the actors' serving_context is this plus the
// actor handles.

#include "engine/core/sampling_params.hpp"
#include "base/types.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "service/request/request_support.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

struct model_profile {
  std::shared_ptr<const tokenizer> tok;
  std::string model_name;    ///< what clients pass as "model"
  std::string model_version; ///< the x-model-version header: the configured tag, or name@content hash
  std::int32_t max_model_len = 0;
  std::vector<token_id> eos_ids;
  sampling_params defaults;  ///< the model's generation_config
  /// Its max_new_tokens: max_tokens where a request gives none (capped by
  /// the context left); none: the context left.
  std::optional<std::int32_t> default_max_tokens;
  std::int32_t block_size = 16;
  api::request_support support; ///< what its backend and model can do (cli/serve.cpp sets it)
  std::vector<token_id> tool_markers; ///< that format's special tokens, shown in the text for the parser
  std::vector<token_id> reasoning_markers; ///< <think> and </think> where they are special tokens
  std::vector<token_id> think_open, think_close; ///< <think> and </think> as the tokenizer encodes them
  std::int32_t max_retries = 2; ///< on other replicas, for a request whose replica failed before its first token
};

/// What a model's profile is made of: the facts of its files and the
/// config's choices, each already resolved but the parsers'.
struct profile_settings {
  std::string name, version;
  std::int32_t max_model_len = 0;
  std::vector<token_id> eos_ids;
  sampling_params defaults;
  std::optional<std::int32_t> default_max_tokens;
  std::int32_t block_size = 16;
  std::int32_t max_retries = 2;
  bool prompt_logprobs = true, grammars = true; ///< the backend's
  /// model.tool_parser ("auto": from the chat template's text; "none") and
  /// model.reasoning_parser ("auto": a template that writes <think> and
  /// </think>; "think"; "none").
  std::string tool_parser = "auto", reasoning_parser = "auto";
  std::string chat_template; ///< its text, "" for none
};

/// The profile: the settings, the tool-call format and whether the model
/// thinks (detected from the template where "auto"), the special tokens
/// their markers are (shown in the text for the parsers), and <think> and
/// </think> as the tokenizer encodes them.
auto make_profile(std::shared_ptr<const tokenizer> tok, const profile_settings& s) -> model_profile;

/// Capability routing's rule: a request goes to the small model when its
/// tier is listed, or its prompt and the max_tokens it asks for (none
/// asked: unbounded) are within the thresholds; else to the large one.
struct capability_split {
  std::int32_t max_prompt_tokens = 0, max_tokens = 0;
  std::vector<std::string> tiers;

  auto fits_small(std::int64_t prompt_tokens, std::optional<std::int32_t> asked, const std::string& tier) const
      -> bool {
    for (const auto& t : tiers)
      if (!tier.empty() && t == tier) return true;
    return prompt_tokens <= max_prompt_tokens && asked && *asked <= max_tokens;
  }
};

} // namespace troupe
