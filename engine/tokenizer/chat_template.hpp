#pragma once
// Chat prompt formats, rendered in C++ (no Jinja): Llama-2, ChatML, Zephyr
// (TinyLlama-Chat uses Zephyr's).

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace troupe {

enum class chat_format { llama2, chatml, zephyr };

struct chat_message {
  std::string role;    ///< "system", "user" or "assistant"
  std::string content;
};

/// "llama-2" / "llama2", "chatml", "zephyr" / "tinyllama"; nullopt otherwise.
auto parse_chat_format(std::string_view name) -> std::optional<chat_format>;
auto chat_format_name(chat_format f) -> std::string_view;
/// "llama-2, chatml, zephyr": every format's name, for error messages.
auto chat_format_names() -> std::string;

/// Recognises a Hugging Face Jinja chat_template (tokenizer_config.json) by its
/// markers: "<|im_start|>" ChatML, "<|user|>" Zephyr, "[INST]" Llama-2.
auto detect_chat_format(std::string_view jinja_template) -> std::optional<chat_format>;

/// Reads dir/tokenizer_config.json's "chat_template" (a string, or the entry
/// named "default" of a list) and detects its format; nullopt when the file or
/// field is absent or the format unrecognised. Throws model_error("<path>:
/// <problem>") when the file is not a JSON object.
auto chat_format_of_model(const std::string& model_dir) -> std::optional<chat_format>;

/// The prompt text, with special tokens spelled out ("<s>", "</s>") for
/// tokenizer::encode_with_special (no BOS added there: the text carries it).
/// Returns an error line in `error` (and empty text) for an unknown role, a
/// conversation not alternating user/assistant where the format requires it,
/// or an empty list; `error` (may be null) is cleared on success.
auto render_chat(chat_format f, std::span<const chat_message> messages,
                 bool add_generation_prompt, std::string* error) -> std::string;

} // namespace troupe
