// eos_token_ids (model_config.hpp), apart from model_config.cpp: what reads
// a config alone (the config fuzzer) links no tokenizer.

#include "engine/model/model_config.hpp"

#include "engine/tokenizer/tokenizer.hpp"

#include <algorithm>

namespace troupe {

auto eos_token_ids(const model_config& config, const tokenizer& tok) -> std::vector<token_id> {
  auto eos = config.eos_token_ids;
  if (eos.empty() && tok.eos_id() >= 0) eos.push_back(tok.eos_id());
  // gpt-oss ends its turn with <|return|> (an answer) or <|call|> (a tool
  // call), whatever generation_config.json lists (as vLLM stops it); never
  // at <|end|>, which closes its reasoning mid-answer.
  if (config.family() == model_family::gpt_oss)
    for (const auto* end : {"<|return|>", "<|call|>"})
      if (const auto id = tok.id_of(end); id >= 0 && std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  return eos;
}

} // namespace troupe
