#include "engine/tokenizer/chat_template.hpp"

#include "engine/model/model_error.hpp"

#include <simdjson.h>

#include <filesystem>
#include <system_error>

namespace troupe {
namespace {

// Each renderer reproduces the Jinja template Hugging Face ships for the
// format, as transformers renders it (trim_blocks, lstrip_blocks).

/// Python's str.strip() over ASCII whitespace.
auto strip(std::string_view s) -> std::string_view {
  constexpr auto ws = std::string_view{" \t\n\r\f\v"};
  const auto begin = s.find_first_not_of(ws);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

auto where(std::size_t i) -> std::string { return "messages[" + std::to_string(i) + "]: "; }

// meta-llama/Llama-2-7b-chat-hf: an optional leading system message folded
// into the first user turn, then strictly user, assistant, user, ...
auto render_llama2(std::span<const chat_message> messages, std::string& error) -> std::string {
  auto first = std::size_t{0};
  const chat_message* system = nullptr;
  if (messages[0].role == "system") {
    system = &messages[0];
    first = 1;
  }
  if (first == messages.size()) {
    error = "llama-2: a system message needs a user message after it";
    return {};
  }
  auto out = std::string{};
  for (auto i = first; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const auto* expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (m.role != expected) {
      error = where(i) + (m.role == "system"
                              ? "llama-2 allows a system message only first"
                              : "llama-2 needs user and assistant to alternate, user first");
      return {};
    }
    auto content = std::string{};
    if (i == first && system != nullptr)
      content = "<<SYS>>\n" + system->content + "\n<</SYS>>\n\n" + m.content;
    else
      content = m.content;
    if (m.role == "user")
      out.append("<s>[INST] ").append(strip(content)).append(" [/INST]");
    else
      out.append(" ").append(strip(content)).append(" </s>");
  }
  return out; // the template has no generation prompt: "[/INST]" is one
}

// e.g. teknium/OpenHermes-2.5-Mistral-7B; no order imposed.
auto render_chatml(std::span<const chat_message> messages, bool add_generation_prompt)
    -> std::string {
  auto out = std::string{};
  for (const auto& m : messages)
    out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append(
        "<|im_end|>\n");
  if (add_generation_prompt) out.append("<|im_start|>assistant\n");
  return out;
}

// HuggingFaceH4/zephyr-7b-beta, TinyLlama/TinyLlama-1.1B-Chat-v1.0; no order
// imposed. The newline after each turn is the template's own line break.
auto render_zephyr(std::span<const chat_message> messages, bool add_generation_prompt)
    -> std::string {
  auto out = std::string{};
  for (const auto& m : messages)
    out.append("<|").append(m.role).append("|>\n").append(m.content).append("</s>\n");
  if (add_generation_prompt) out.append("<|assistant|>\n");
  return out;
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

auto detect_chat_format(std::string_view jinja_template) -> std::optional<chat_format> {
  // ChatML first: its templates may mention the others' markers too.
  if (jinja_template.find("<|im_start|>") != std::string_view::npos) return chat_format::chatml;
  if (jinja_template.find("<|user|>") != std::string_view::npos) return chat_format::zephyr;
  if (jinja_template.find("[INST]") != std::string_view::npos) return chat_format::llama2;
  return std::nullopt;
}

auto chat_format_of_model(const std::string& model_dir) -> std::optional<chat_format> {
  const auto path = std::filesystem::path{model_dir} / "tokenizer_config.json";
  auto ec = std::error_code{};
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  auto json = simdjson::padded_string{};
  if (simdjson::padded_string::load(path.string()).get(json) != simdjson::SUCCESS)
    fail(path, "cannot read");
  auto parser = simdjson::ondemand::parser{};
  auto doc = simdjson::ondemand::document{};
  auto object = simdjson::ondemand::object{};
  if (auto err = parser.iterate(json).get(doc); err) fail(path, simdjson::error_message(err));
  if (auto err = doc.get_object().get(object); err)
    fail(path, std::string("not a JSON object: ") + simdjson::error_message(err));
  auto value = simdjson::ondemand::value{};
  if (auto err = object["chat_template"].get(value); err == simdjson::NO_SUCH_FIELD)
    return std::nullopt;
  else if (err)
    fail(path, simdjson::error_message(err));
  auto type = simdjson::ondemand::json_type{};
  if (auto err = value.type().get(type); err) fail(path, simdjson::error_message(err));
  auto text = std::string_view{};
  if (type == simdjson::ondemand::json_type::string) {
    if (auto err = value.get_string().get(text); err) fail(path, simdjson::error_message(err));
    return detect_chat_format(text);
  }
  if (type != simdjson::ondemand::json_type::array) return std::nullopt;
  // Newer files list named templates: [{"name": "default", "template": "..."}].
  for (auto entry : value.get_array()) {
    auto named = simdjson::ondemand::object{};
    auto name = std::string_view{};
    if (entry.get_object().get(named) || named["name"].get_string().get(name)) continue;
    if (name != "default") continue;
    if (named["template"].get_string().get(text)) return std::nullopt;
    return detect_chat_format(text);
  }
  return std::nullopt;
}

auto render_chat(chat_format f, std::span<const chat_message> messages,
                 bool add_generation_prompt, std::string* error) -> std::string {
  auto message = std::string{};
  auto out = std::string{};
  if (messages.empty()) {
    message = "no messages";
  } else {
    for (std::size_t i = 0; i < messages.size() && message.empty(); ++i) {
      const auto& role = messages[i].role;
      if (role != "system" && role != "user" && role != "assistant")
        message = where(i) + "unknown role \"" + role + "\"";
    }
  }
  if (message.empty()) {
    switch (f) {
    case chat_format::llama2: out = render_llama2(messages, message); break;
    case chat_format::chatml: out = render_chatml(messages, add_generation_prompt); break;
    case chat_format::zephyr: out = render_zephyr(messages, add_generation_prompt); break;
    }
  }
  if (error != nullptr) *error = message;
  return out;
}

} // namespace troupe
