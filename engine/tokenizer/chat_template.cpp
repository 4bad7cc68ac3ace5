#include "engine/tokenizer/chat_template.hpp"

#include "engine/formats/gguf.hpp"
#include "engine/formats/model_error.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace troupe {
namespace {

namespace fs = std::filesystem;

// The built-in formats, written for troupe (not copies of the models'
// files); each renders what the model's own template renders for system,
// user and assistant turns, and refuses other roles with one line.
constexpr std::string_view k_known_roles = R"(
{%- for m in messages -%}
  {%- if m['role'] not in ['system', 'user', 'assistant'] -%}
    {{- raise_exception('messages[' ~ loop.index0 ~ ']: unknown role "' ~ m['role'] ~ '"') -}}
  {%- endif -%}
{%- endfor -%}
)";

// meta-llama/Llama-2-7b-chat-hf: an optional leading system message folded
// into the first user turn, then strictly user, assistant, user, ... The
// strip covers the whole first turn, system text included.
constexpr std::string_view k_llama2 = R"(
{%- set offset = 0 -%}
{%- set turns = messages -%}
{%- if messages[0]['role'] == 'system' -%}
  {%- set system = messages[0]['content'] -%}
  {%- set offset = 1 -%}
  {%- set turns = messages[1:] -%}
  {%- if not turns -%}
    {{- raise_exception('llama-2: a system message needs a user message after it') -}}
  {%- endif -%}
{%- endif -%}
{%- for m in turns -%}
  {%- if m['role'] != ('user' if loop.index0 % 2 == 0 else 'assistant') -%}
    {{- raise_exception('messages[' ~ (loop.index0 + offset) ~ ']: ' ~ ('llama-2 allows a system message only first' if m['role'] == 'system' else 'llama-2 needs user and assistant to alternate, user first')) -}}
  {%- endif -%}
  {%- set content = m['content'] -%}
  {%- if loop.first and system is defined -%}
    {%- set content = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content -%}
  {%- endif -%}
  {%- if m['role'] == 'user' -%}
    {{- '<s>[INST] ' + content.strip() + ' [/INST]' -}}
  {%- else -%}
    {{- ' ' + content.strip() + ' </s>' -}}
  {%- endif -%}
{%- endfor -%}
)";

// e.g. teknium/OpenHermes-2.5-Mistral-7B; no order imposed.
constexpr std::string_view k_chatml = R"(
{%- for m in messages -%}
  {{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)";

// HuggingFaceH4/zephyr-7b-beta, TinyLlama/TinyLlama-1.1B-Chat-v1.0; no order imposed.
constexpr std::string_view k_zephyr = R"(
{%- for m in messages -%}
  {{- '<|' + m['role'] + '|>\n' + m['content'] + '</s>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|assistant|>\n' -}}
{%- endif -%}
)";

auto read_file(const fs::path& path) -> std::string {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// tokenizer_config.json as a value; nullopt when absent.
auto read_config(const fs::path& path) -> std::optional<jinja::value> {
  auto ec = std::error_code{};
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  jinja::value config;
  try {
    config = jinja::parse_json(read_file(path), "JSON");
  } catch (const jinja::render_error& e) {
    fail(path, e.what());
  }
  if (!config.is_object()) fail(path, "not a JSON object");
  return config;
}

/// A special token's text: a string, or an AddedToken's "content".
auto token_text(const jinja::value& v) -> std::optional<std::string> {
  if (v.is_string()) return v.str();
  if (v.is_object())
    if (const auto* content = v.obj().find("content"); content != nullptr && content->is_string()) return content->str();
  return std::nullopt;
}

auto builtin(chat_format f) -> chat_template {
  return make_chat_template(builtin_chat_template(f), "built-in " + std::string(chat_format_name(f)));
}

// The spellings of a GGUF vocabulary's special tokens, by their ids in the metadata.
auto gguf_special_tokens(const gguf::file& f) -> jinja::object {
  jinja::object special_tokens;
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  const auto* list = tokens != nullptr ? tokens->as_array() : nullptr;
  if (list != nullptr && list->type == gguf::value_type::string) {
    for (const auto& [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                                    {"tokenizer.ggml.eos_token_id", "eos_token"},
                                    {"tokenizer.ggml.unknown_token_id", "unk_token"},
                                    {"tokenizer.ggml.padding_token_id", "pad_token"},
                                    {"tokenizer.ggml.seperator_token_id", "sep_token"}, // gguf-py's spelling
                                    {"tokenizer.ggml.mask_token_id", "mask_token"}}) {
      const auto* id = f.find(key);
      const auto n = id != nullptr ? id->as_uint() : std::nullopt;
      if (n && *n < list->items.size()) special_tokens.set(name, std::string(*list->items[*n].as_string()));
    }
  }
  return special_tokens;
}


} // namespace

auto parse_chat_format(std::string_view name) -> std::optional<chat_format> {
  if (name == "llama-2" || name == "llama2") return chat_format::llama2;
  if (name == "chatml") return chat_format::chatml;
  if (name == "zephyr" || name == "tinyllama") return chat_format::zephyr;
  return std::nullopt;
}

auto chat_format_names() -> std::string {
  std::string out;
  for (const auto f : {chat_format::llama2, chat_format::chatml, chat_format::zephyr})
    out += (out.empty() ? "" : ", ") + std::string(chat_format_name(f));
  return out;
}

auto chat_format_name(chat_format f) -> std::string_view {
  switch (f) {
  case chat_format::llama2: return "llama-2";
  case chat_format::chatml: return "chatml";
  case chat_format::zephyr: return "zephyr";
  }
  return "unknown";
}

auto builtin_chat_template(chat_format f) -> std::string_view {
  // Each with the role check in front (one string: the checks and the format).
  static const std::string llama2 = std::string(k_known_roles) + std::string(k_llama2);
  static const std::string chatml = std::string(k_known_roles) + std::string(k_chatml);
  static const std::string zephyr = std::string(k_known_roles) + std::string(k_zephyr);
  switch (f) {
  case chat_format::llama2: return llama2;
  case chat_format::chatml: return chatml;
  case chat_format::zephyr: return zephyr;
  }
  return {};
}

auto make_chat_template(std::string_view text, std::string source, jinja::object special_tokens) -> chat_template {
  try {
    return chat_template{source, std::string(text), jinja::jinja_template(text), std::move(special_tokens)};
  } catch (const jinja::template_error& e) {
    throw model_error(source + ": " + e.what());
  }
}

auto special_tokens_of_model(const std::string& model_dir) -> jinja::object {
  if (gguf::is_gguf_file(model_dir)) return gguf_special_tokens(*gguf::file::open(model_dir));
  jinja::object out;
  const auto config = read_config(fs::path{model_dir} / "tokenizer_config.json");
  if (!config) return out;
  for (const auto* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (const auto* v = config->obj().find(key))
      if (auto text = token_text(*v)) out.set(key, *text);
  if (const auto* extra = config->obj().find("additional_special_tokens"); extra != nullptr && extra->is_array()) {
    jinja::array tokens;
    for (const auto& t : extra->arr())
      if (auto text = token_text(t)) tokens.emplace_back(*text);
    out.set("additional_special_tokens", std::move(tokens));
  }
  return out;
}

auto model_chat_template(const std::string& model_dir) -> std::optional<chat_template> {
  if (gguf::is_gguf_file(model_dir)) return gguf_chat_template(*gguf::file::open(model_dir));
  const auto dir = fs::path{model_dir};
  auto ec = std::error_code{};
  if (const auto file = dir / "chat_template.jinja"; fs::is_regular_file(file, ec))
    return make_chat_template(read_file(file), file.string(), special_tokens_of_model(model_dir));
  const auto path = dir / "tokenizer_config.json";
  const auto config = read_config(path);
  if (!config) return std::nullopt;
  const auto* field = config->obj().find("chat_template");
  if (field == nullptr || field->is_none()) return std::nullopt;
  const auto source = path.string() + " chat_template";
  if (field->is_string()) return make_chat_template(field->str(), source, special_tokens_of_model(model_dir));
  if (!field->is_array()) fail(path, "chat_template is neither a string nor a list");
  // Newer files list named templates: [{"name": "default", "template": "..."}].
  for (const auto& entry : field->arr()) {
    if (!entry.is_object()) continue;
    const auto* name = entry.obj().find("name");
    const auto* text = entry.obj().find("template");
    if (name != nullptr && name->is_string() && name->str() == "default" && text != nullptr && text->is_string())
      return make_chat_template(text->str(), source + " \"default\"", special_tokens_of_model(model_dir));
  }
  fail(path, "chat_template lists no template named \"default\"");
}

auto gguf_chat_template(const gguf::file& f) -> std::optional<chat_template> {
  const auto* v = f.find("tokenizer.chat_template");
  if (v == nullptr) return std::nullopt;
  const auto text = v->as_string();
  if (!text) fail(f.path(), "metadata tokenizer.chat_template is " + gguf::describe(*v) + ", not a string");
  return make_chat_template(*text, f.path().string() + " tokenizer.chat_template", gguf_special_tokens(f));
}


auto resolve_chat_template(const std::string& setting, const std::string& model_dir, const gguf::file* opened)
    -> std::optional<chat_template> {
  const auto special_tokens = [&] { return opened ? gguf_special_tokens(*opened) : special_tokens_of_model(model_dir); };
  if (setting.empty()) return opened ? gguf_chat_template(*opened) : model_chat_template(model_dir);
  if (const auto f = parse_chat_format(setting)) {
    auto t = builtin(*f);
    t.special_tokens = special_tokens();
    return t;
  }
  if (setting.ends_with(".jinja")) return make_chat_template(read_file(setting), setting, special_tokens());
  throw model_error("unknown chat template \"" + setting + "\"; known: " + chat_format_names() + ", or a .jinja file");
}

auto messages_value(std::span<const chat_message> messages) -> jinja::value {
  jinja::array out;
  for (const auto& m : messages) {
    jinja::object o;
    o.set("role", m.role);
    // An assistant's tool calls alone (null content) are "" to the template,
    // as vLLM hands them: Qwen3's template, for one, fails on None.
    o.set("content", m.content);
    if (!m.tool_calls_json.empty()) o.set("tool_calls", jinja::parse_json(m.tool_calls_json, "tool_calls"));
    if (!m.tool_call_id.empty()) o.set("tool_call_id", m.tool_call_id);
    if (!m.name.empty()) o.set("name", m.name);
    // gpt-oss's template reads an assistant's reasoning as `thinking` (as llama.cpp hands it).
    if (!m.reasoning_content.empty()) {
      o.set("reasoning_content", m.reasoning_content);
      o.set("thinking", m.reasoning_content);
    }
    out.emplace_back(std::move(o));
  }
  return out;
}

auto render_chat(const chat_template& t, const chat_request& request, const jinja::render_options& options,
                 std::string* error) -> std::string {
  auto message = std::string{};
  auto out = std::string{};
  if (!request.messages.is_array() || request.messages.arr().empty()) {
    message = "no messages";
  } else {
    // transformers' render kwargs: the special tokens, then the call's.
    auto vars = t.special_tokens;
    vars.set("messages", request.messages);
    vars.set("tools", request.tools);
    vars.set("documents", jinja::value::none());
    vars.set("add_generation_prompt", request.add_generation_prompt);
    for (const auto& [k, v] : request.extra.entries) vars.set(k, v);
    try {
      out = t.jinja.render(vars, options);
    } catch (const jinja::render_error& e) {
      message = e.what();
      out.clear();
    }
  }
  if (error != nullptr) *error = message;
  return out;
}

auto render_chat(chat_format f, std::span<const chat_message> messages, bool add_generation_prompt,
                 std::string* error) -> std::string {
  static const chat_template templates[] = {builtin(chat_format::llama2), builtin(chat_format::chatml),
                                            builtin(chat_format::zephyr)};
  chat_request request;
  request.messages = messages_value(messages);
  request.add_generation_prompt = add_generation_prompt;
  return render_chat(templates[static_cast<int>(f)], request, {}, error);
}

} // namespace troupe
