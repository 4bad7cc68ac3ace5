#include "engine/tokenizer/chat_template.hpp"

#include "engine/formats/model_error.hpp"
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
    (void)model_chat_template(dir);
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

TEST_CASE("chat_template: a model's own template is read and rendered") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  CHECK_FALSE(model_chat_template(dir.string())); // no file
  CHECK_FALSE(model_chat_template(write_config(dir, R"({"bos_token": "<s>"})")));
  CHECK_FALSE(model_chat_template(write_config(dir, R"({"chat_template": null})")));

  // The model's own Jinja, with its special tokens (an AddedToken's content).
  auto t = model_chat_template(write_config(dir, R"({"bos_token": {"__type": "AddedToken", "content": "<B>"},
      "eos_token": "<E>", "additional_special_tokens": ["<x>", {"content": "<y>"}],
      "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ eos_token }}{{ additional_special_tokens | join(',') }}"})"));
  REQUIRE(t);
  CHECK(t->source == (dir / "tokenizer_config.json").string() + " chat_template");
  chat_request request;
  request.messages = messages_value(conversation);
  auto error = std::string{"stale"};
  CHECK(render_chat(*t, request, {}, &error)
        == "<B>[system:You are terse.][user:Hi!][assistant:Hello.][user:Bye?]<E><x>,<y>");
  CHECK(error.empty());

  // The list form: the entry named "default".
  t = model_chat_template(write_config(dir, R"({"chat_template": [
        {"name": "tool_use", "template": "tools"},
        {"name": "default", "template": "{{ messages | length }}{{ add_generation_prompt }}"}]})"));
  REQUIRE(t);
  CHECK(render_chat(*t, request, {}, nullptr) == "4True");

  // chat_template.jinja comes first.
  std::ofstream(dir / "chat_template.jinja") << "jinja file {{ messages[0].role }}\n";
  t = model_chat_template(dir.string());
  REQUIRE(t);
  CHECK(render_chat(*t, request, {}, nullptr) == "jinja file system");
}

TEST_CASE("chat_template: the setting picks a built-in, a .jinja file or the model's") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  write_config(dir, R"({"eos_token": "</s>", "chat_template": "model {{ eos_token }}"})");
  chat_request request;
  request.messages = messages_value(messages{{"user", "q"}});
  auto t = resolve_chat_template("", dir.string());
  REQUIRE(t);
  CHECK(render_chat(*t, request, {}, nullptr) == "model </s>");
  t = resolve_chat_template("chatml", dir.string());
  REQUIRE(t);
  CHECK(render_chat(*t, request, {}, nullptr) == "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n");
  std::ofstream(dir / "mine.jinja") << "{{ messages[0].content | upper }}{{ eos_token }}";
  t = resolve_chat_template((dir / "mine.jinja").string(), dir.string());
  REQUIRE(t);
  CHECK(render_chat(*t, request, {}, nullptr) == "Q</s>");
  CHECK_THROWS_AS((void)resolve_chat_template("vicuna", dir.string()), model_error);
}

TEST_CASE("chat_template: tool definitions, tool calls and results reach the template") {
  const auto t = make_chat_template(
      "{% for tool in tools %}{{ tool.function.name }}{{ tool.function.parameters | tojson }}\n{% endfor %}"
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{% for c in m.tool_calls %}"
      "{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}"
      "{% elif m.role == 'tool' %}{{ m.tool_call_id }}={{ m.content }}{% else %}{{ m.content }}{% endif %}"
      "{{ '\\n' }}{% endfor %}", // (a newline right after %} goes: trim_blocks)
      "test");
  chat_request request;
  request.messages = jinja::parse_json(R"([
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "21 °C"}])",
                                       "messages");
  request.tools = jinja::parse_json(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])",
                                    "tools");
  CHECK(render_chat(t, request, {}, nullptr)
        == "get_weather{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}\n"
           "user:weather?\nassistant:get_weather({\"city\": \"Paris\"})\ntool:c1=21 °C\n");
}

TEST_CASE("chat_template: a template troupe cannot render stops start-up with one line") {
  const auto tmp = testing::temp_dir{};
  const auto& dir = tmp.path();
  write_config(dir, R"({"chat_template": "{% for m in messages %}\n  {{ m.content | wordwrap(40) }}{% endfor %}"})");
  const auto path = (dir / "tokenizer_config.json").string();
  try {
    (void)model_chat_template(dir.string());
    FAIL("no error");
  } catch (const model_error& e) {
    CHECK(std::string(e.what()) == path + " chat_template: line 2 col 18: filter \"wordwrap\" is not supported");
  }
  write_config(dir, "[1, 2]");
  CHECK(config_error(dir.string()).starts_with(path + ": not a JSON object"));
  write_config(dir, "{\"chat_template\": ");
  CHECK(config_error(dir.string()).starts_with(path + ": "));
  write_config(dir, R"({"chat_template": 7})");
  CHECK(config_error(dir.string()) == path + ": chat_template is neither a string nor a list");
}

TEST_CASE("chat_template: strftime_now reads the injected clock") {
  const auto t = make_chat_template("{{ strftime_now('%d %b %Y') }}", "test");
  chat_request request;
  request.messages = messages_value(messages{{"user", "q"}});
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  CHECK(render_chat(t, request, {[tm] { return tm; }}, nullptr) == "26 Jul 2024");
  auto error = std::string{};
  CHECK(render_chat(t, request, {}, &error).empty());
  CHECK(error.find("no clock") != std::string::npos);
}

} // namespace troupe
