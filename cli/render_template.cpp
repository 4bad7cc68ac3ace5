// troupe render-template: a chat template rendered on a conversation read
// as JSON from standard input, as the server renders it (and as Hugging
// Face's apply_chat_template does: tests/integration/chat_template_test.py
// compares the two).
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/tokenizer/chat_template.hpp"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <string>

namespace troupe::cli {
namespace {

/// "YYYY-MM-DD HH:MM:SS" as a local time; the wall clock when empty.
auto clock_of(const std::string& now) -> std::function<std::tm()> {
  if (now.empty())
    return [] {
      const auto t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      return tm;
    };
  std::tm tm{};
  const char* end = strptime(now.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') throw usage_error("--now must look like 2024-07-26 09:30:00");
  tm.tm_isdst = -1;
  const auto t = std::mktime(&tm); // fills in the weekday and the day of the year
  localtime_r(&t, &tm);
  return [tm] { return tm; };
}

} // namespace

auto run_render_template(std::span<char* const> argv) -> int {
  const args a(argv, {"template", "model", "builtin", "now"}, {});
  const auto model = a.str("model", "");
  std::optional<chat_template> chat;
  if (a.has("template")) {
    const auto path = a.str("template", "");
    if (!path.ends_with(".jinja")) throw usage_error("--template names a .jinja file");
    chat = resolve_chat_template(path, model);
  } else if (a.has("builtin")) {
    const auto name = a.str("builtin", "");
    if (!parse_chat_format(name)) throw usage_error("unknown built-in template '" + name + "' (known: " + chat_format_names() + ")");
    chat = resolve_chat_template(name, model);
  } else if (!model.empty()) {
    chat = model_chat_template(model);
    if (!chat) throw model_error(model + ": the model ships no chat template");
  } else {
    throw usage_error("give --template FILE, --builtin NAME or --model DIR");
  }

  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  jinja::value conversation;
  try {
    conversation = jinja::parse_json(input, "standard input");
  } catch (const jinja::render_error& e) {
    throw usage_error(e.what());
  }
  if (!conversation.is_object()) throw usage_error("standard input must hold a JSON object");
  chat_request request;
  request.add_generation_prompt = false; // transformers' default
  for (const auto& [k, v] : conversation.obj().entries) {
    if (k == "messages") request.messages = v;
    else if (k == "tools") request.tools = v;
    else if (k == "add_generation_prompt") request.add_generation_prompt = v.truthy();
    else request.extra.set(k, v);
  }
  std::string error;
  const auto text = render_chat(*chat, request, {clock_of(a.str("now", ""))}, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "troupe render-template: %s\n", error.c_str());
    return 1;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

} // namespace troupe::cli
