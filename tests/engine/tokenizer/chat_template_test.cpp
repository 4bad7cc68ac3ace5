#include "engine/tokenizer/chat_template.hpp"

#include "engine/model/model_error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

namespace troupe {
namespace {

using messages = std::vector<chat_message>;

auto render(chat_format f, const messages& m, bool add_generation_prompt = true) -> std::string {
  auto error = std::string{"stale"};
  auto text = render_chat(f, m, add_generation_prompt, &error);
  CHECK(error.empty());
  return text;
}

auto render_error(chat_format f, const messages& m) -> std::string {
  auto error = std::string{};
  CHECK(render_chat(f, m, true, &error).empty());
  return error;
}

const auto conversation = messages{
    {"system", "You are terse."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "Bye?"},
};

auto write_config(const std::filesystem::path& dir, std::string_view json) -> std::string {
  std::ofstream(dir / "tokenizer_config.json") << json;
  return dir.string();
}

auto config_error(const std::string& dir) -> std::string {
  try {
    (void)chat_format_of_model(dir);
  } catch (const model_error& e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("chat_template: format names") {
  CHECK(parse_chat_format("llama-2") == chat_format::llama2);
  CHECK(parse_chat_format("llama2") == chat_format::llama2);
  CHECK(parse_chat_format("chatml") == chat_format::chatml);
  CHECK(parse_chat_format("zephyr") == chat_format::zephyr);
  CHECK(parse_chat_format("tinyllama") == chat_format::zephyr);
  CHECK(parse_chat_format("vicuna") == std::nullopt);
  CHECK(parse_chat_format("") == std::nullopt);
  CHECK(parse_chat_format("ChatML") == std::nullopt);
  for (auto f : {chat_format::llama2, chat_format::chatml, chat_format::zephyr})
    CHECK(parse_chat_format(chat_format_name(f)) == f);
  CHECK(chat_format_name(chat_format::llama2) == "llama-2");
}

TEST_CASE("chat_template: Llama-2 renders as the HF template does") {
  CHECK(render(chat_format::llama2, conversation)
        == "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
           "<s>[INST] Bye? [/INST]");
  CHECK(render(chat_format::llama2, {{"user", "  padded \n"}}) == "<s>[INST] padded [/INST]");
  CHECK(render(chat_format::llama2, {{"user", "q"}, {"assistant", " a\n"}}, false)
        == "<s>[INST] q [/INST] a </s>");
  // The strip covers the whole first turn, so spaces inside it stay.
  CHECK(render(chat_format::llama2, {{"system", " sys "}, {"user", "  u "}})
        == "<s>[INST] <<SYS>>\n sys \n<</SYS>>\n\n  u [/INST]");
}

TEST_CASE("chat_template: Llama-2 tokens match Meta's reference encoding") {
  const auto& tok = testing::test_tokenizer();
  const auto text = render(chat_format::llama2, {{"user", "Hi!"}, {"assistant", "Hello."},
                                                 {"user", "Bye?"}});
  auto expected = std::vector<token_id>{1};
  for (auto id : tok.encode("[INST] Hi! [/INST] Hello. ", false)) expected.push_back(id);
  expected.push_back(2);
  expected.push_back(1);
  for (auto id : tok.encode("[INST] Bye? [/INST]", false)) expected.push_back(id);
  CHECK(tok.encode_with_special(text, false) == expected);
}

TEST_CASE("chat_template: ChatML") {
  CHECK(render(chat_format::chatml, conversation)
        == "<|im_start|>system\nYou are terse.<|im_end|>\n"
           "<|im_start|>user\nHi!<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n"
           "<|im_start|>user\nBye?<|im_end|>\n"
           "<|im_start|>assistant\n");
  CHECK(render(chat_format::chatml, {{"user", " a "}, {"user", "b"}}, false)
        == "<|im_start|>user\n a <|im_end|>\n<|im_start|>user\nb<|im_end|>\n");
}

TEST_CASE("chat_template: Zephyr / TinyLlama") {
  CHECK(render(chat_format::zephyr, conversation)
        == "<|system|>\nYou are terse.</s>\n<|user|>\nHi!</s>\n<|assistant|>\nHello.</s>\n"
           "<|user|>\nBye?</s>\n<|assistant|>\n");
  CHECK(render(chat_format::zephyr, {{"user", "x"}}, false) == "<|user|>\nx</s>\n");
}

TEST_CASE("chat_template: errors") {
  for (auto f : {chat_format::llama2, chat_format::chatml, chat_format::zephyr}) {
    CAPTURE(chat_format_name(f));
    CHECK(render_error(f, {}) == "no messages");
    CHECK(render_error(f, {{"user", "a"}, {"tool", "b"}}) == "messages[1]: unknown role \"tool\"");
  }
  CHECK(render_error(chat_format::llama2, {{"user", "a"}, {"user", "b"}})
        == "messages[1]: llama-2 needs user and assistant to alternate, user first");
  CHECK(render_error(chat_format::llama2, {{"system", "s"}, {"assistant", "a"}})
        == "messages[1]: llama-2 needs user and assistant to alternate, user first");
  CHECK(render_error(chat_format::llama2, {{"user", "a"}, {"system", "s"}})
        == "messages[1]: llama-2 allows a system message only first");
  CHECK(render_error(chat_format::llama2, {{"system", "s"}})
        == "llama-2: a system message needs a user message after it");
  // A null error pointer is allowed.
  CHECK(render_chat(chat_format::chatml, {}, true, nullptr).empty());
  CHECK(render_chat(chat_format::chatml, conversation, false, nullptr).size() > 0);
}

TEST_CASE("chat_template: detection from Jinja markers") {
  const auto llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
      "{% set system_message = messages[0]['content'] %}{% else %}"
      "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
      "{% for message in loop_messages %}{% if message['role'] == 'user' %}"
      "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
      "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
      "{% endif %}{% endfor %}";
  const auto chatml =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  const auto zephyr =
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
      "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
      "{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + message['content'] + "
      "eos_token }}\n{% endif %}\n{% endfor %}";
  CHECK(detect_chat_format(llama2) == chat_format::llama2);
  CHECK(detect_chat_format(chatml) == chat_format::chatml);
  CHECK(detect_chat_format(zephyr) == chat_format::zephyr);
  CHECK(detect_chat_format("{{ messages }}") == std::nullopt);
  CHECK(detect_chat_format("") == std::nullopt);
}

TEST_CASE("chat_template: chat_format_of_model reads tokenizer_config.json") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  CHECK(chat_format_of_model(dir.string()) == std::nullopt); // no file
  CHECK(chat_format_of_model(write_config(dir, R"({"bos_token": "<s>"})")) == std::nullopt);
  CHECK(chat_format_of_model(write_config(
            dir, R"({"bos_token": "<s>", "chat_template": "{{ '<|user|>\n' }}"})"))
        == chat_format::zephyr);
  CHECK(chat_format_of_model(write_config(dir, R"({"chat_template": "{{ '[INST]' }}"})"))
        == chat_format::llama2);
  CHECK(chat_format_of_model(write_config(dir, R"({"chat_template": "plain"})")) == std::nullopt);
  CHECK(chat_format_of_model(write_config(dir, R"({"chat_template": [
            {"name": "tool_use", "template": "[INST]"},
            {"name": "default", "template": "<|im_start|>"}]})"))
        == chat_format::chatml);
  CHECK(chat_format_of_model(write_config(dir, R"({"chat_template": 7})")) == std::nullopt);
  const auto path = (dir / "tokenizer_config.json").string();
  write_config(dir, "[1, 2]");
  CHECK(config_error(dir.string()).starts_with(path + ": not a JSON object"));
  write_config(dir, "{\"chat_template\": ");
  CHECK(config_error(dir.string()).starts_with(path + ": "));
}

} // namespace troupe
