#pragma once
// Chat templates: a conversation (messages, tool definitions, tool calls and
// results) rendered to prompt text by a Jinja template (engine/template/),
// as Hugging Face's apply_chat_template renders it. The template is the
// model's own (chat_template.jinja, else tokenizer_config.json's
// chat_template, or a GGUF file's tokenizer.chat_template), else a built-in one named by the config: "llama-2",
// "chatml", "zephyr" (TinyLlama-Chat uses Zephyr's), or a .jinja file.

#include "engine/template/jinja_template.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace troupe {

namespace gguf {
class file;
}

enum class chat_format { llama2, chatml, zephyr };

struct chat_message {
  std::string role;    ///< "system", "user", "assistant" or "tool"
  std::string content;
  /// An assistant's tool calls alone: content was null (the template gets "", as from vLLM).
  bool null_content = false;
  /// An assistant's tool calls, a JSON array of {"id", "type": "function",
  /// "function": {"name", "arguments"}} with each arguments string that holds
  /// a JSON object given as that object (as templates read it); "" for none.
  std::string tool_calls_json = {};
  std::string tool_call_id = {};      ///< a tool's answer: the call it answers
  std::string name = {};              ///< the optional "name" field
  std::string reasoning_content = {}; ///< an assistant's reasoning, for templates that show it
  /// The API's sealed reasoning (a thinking signature, encrypted_content;
  /// several, one a line), opened into reasoning_content by the server
  /// before the template sees it.
  std::string reasoning_sealed = {};
  friend auto operator==(const chat_message&, const chat_message&) -> bool = default;
};

/// "llama-2" / "llama2", "chatml", "zephyr" / "tinyllama"; nullopt otherwise.
auto parse_chat_format(std::string_view name) -> std::optional<chat_format>;
auto chat_format_name(chat_format f) -> std::string_view;
/// "llama-2, chatml, zephyr": every format's name, for error messages.
auto chat_format_names() -> std::string;
/// A built-in format's Jinja text (special tokens spelled out: "<s>", "</s>").
auto builtin_chat_template(chat_format f) -> std::string_view;

/// A parsed template and what it renders with besides the conversation.
struct chat_template {
  std::string source; ///< where it came from, for messages: "tokenizer_config.json chat_template"
  std::string text;   ///< the template itself (tool-call and reasoning formats are read from it)
  jinja::jinja_template jinja;
  /// bos_token, eos_token, ... and additional_special_tokens of
  /// tokenizer_config.json (transformers' special_tokens_map), as strings.
  jinja::object special_tokens;
};

/// Parses `text`; throws model_error("<source>: line L col C: <problem>")
/// for a template troupe cannot render.
auto make_chat_template(std::string_view text, std::string source, jinja::object special_tokens = {})
    -> chat_template;

/// tokenizer_config.json's special tokens (strings, or AddedToken objects'
/// "content"); empty when the file is absent. Throws model_error when the
/// file is not a JSON object.
auto special_tokens_of_model(const std::string& model_dir) -> jinja::object;

/// The model's own template: dir/chat_template.jinja, else the
/// "chat_template" of dir/tokenizer_config.json (a string, or the entry
/// named "default" of a list); nullopt when it ships none. Throws model_error
/// for an unreadable file or a template troupe cannot render.
auto model_chat_template(const std::string& model_dir) -> std::optional<chat_template>;

/// A GGUF file's own template: its tokenizer.chat_template, with the
/// spellings of its BOS, EOS, UNK, PAD, SEP and MASK ids (where the metadata
/// names them) as bos_token, eos_token, ...; nullopt when it carries none.
/// Throws model_error for a mistyped key or a template troupe cannot render.
auto gguf_chat_template(const gguf::file& f) -> std::optional<chat_template>;

/// The template a server uses: `setting` empty, the model's; a built-in
/// name; or a path ending in ".jinja". The special tokens come from the
/// model in every case. nullopt: the model ships none and none was named.
/// Throws model_error (an unknown name, a template that does not parse).
/// `opened`: model_dir's GGUF file, already open (read instead of opening
/// it again).
auto resolve_chat_template(const std::string& setting, const std::string& model_dir,
                           const gguf::file* opened = nullptr) -> std::optional<chat_template>;

/// One conversation to render: JSON-shaped values as the OpenAI API and
/// transformers carry them (messages with role, content, tool_calls,
/// tool_call_id, ...; tools as function schemas, none when absent).
struct chat_request {
  jinja::value messages;
  jinja::value tools = jinja::value::none();
  bool add_generation_prompt = true;
  /// Further template variables (enable_thinking, date_string, ...),
  /// over the special tokens.
  jinja::object extra;
};

/// `messages` as a list of {"role", "content"} objects, with tool_calls,
/// tool_call_id, name and reasoning_content where a message has them.
auto messages_value(std::span<const chat_message> messages) -> jinja::value;

/// The prompt text, special tokens spelled out, for
/// tokenizer::encode_with_special (no BOS added there: the text carries it).
/// On failure (no messages, the template's raise_exception, a type error)
/// returns "" and sets `error` (may be null) to one line; clears it on success.
auto render_chat(const chat_template& t, const chat_request& request, const jinja::render_options& options,
                 std::string* error) -> std::string;

/// A built-in format on plain messages, with a clock-less options.
auto render_chat(chat_format f, std::span<const chat_message> messages, bool add_generation_prompt,
                 std::string* error) -> std::string;

} // namespace troupe
