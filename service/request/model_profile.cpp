#include "service/request/model_profile.hpp"

#include "service/tools/reasoning_parser.hpp"
#include "service/tools/tool_grammar.hpp"

namespace troupe {

auto make_profile(std::shared_ptr<const tokenizer> tok, const profile_settings& s) -> model_profile {
  model_profile p;
  p.tok = std::move(tok);
  p.model_name = s.name;
  p.model_version = s.version;
  p.max_model_len = s.max_model_len;
  p.eos_ids = s.eos_ids;
  p.defaults = s.defaults;
  p.default_max_tokens = s.default_max_tokens;
  p.block_size = s.block_size;
  p.max_retries = s.max_retries;
  p.support.prompt_logprobs = s.prompt_logprobs;
  p.support.grammars = s.grammars;
  const bool has_template = !s.chat_template.empty();
  p.support.tool_parser = s.tool_parser == "auto"   ? (has_template ? tools::detect_tool_parser(s.chat_template) : "")
                          : s.tool_parser == "none" ? ""
                                                    : s.tool_parser;
  // A marker the tokenizer has as one special token is shown in the text, for the parser.
  const auto special = [&](std::string_view marker, std::vector<token_id>& into) {
    if (const auto id = p.tok->id_of(marker); id >= 0 && p.tok->is_control(id)) into.push_back(id);
  };
  for (const auto& marker : tools::tool_markers(p.support.tool_parser)) special(marker, p.tool_markers);
  p.support.reasoning = s.reasoning_parser == "think" ||
                        (s.reasoning_parser == "auto" && s.chat_template.find("<think>") != std::string::npos &&
                         s.chat_template.find("</think>") != std::string::npos);
  if (p.support.reasoning) {
    for (const auto marker : {tools::reasoning_parser::open_marker, tools::reasoning_parser::close_marker})
      special(marker, p.reasoning_markers);
    p.think_open = p.tok->encode_with_special(tools::reasoning_parser::open_marker, false);
    p.think_close = p.tok->encode_with_special(tools::reasoning_parser::close_marker, false);
  }
  return p;
}

} // namespace troupe
