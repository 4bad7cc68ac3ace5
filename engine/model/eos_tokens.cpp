// eos_token_ids (model_config.hpp), apart from model_config.cpp: what reads
// a config alone (the config fuzzer) links no tokenizer.

#include "engine/model/model_config.hpp"

#include "engine/tokenizer/tokenizer.hpp"

namespace troupe {

auto eos_token_ids(const model_config& config, const tokenizer& tok) -> std::vector<token_id> {
  auto eos = config.eos_token_ids;
  if (eos.empty() && tok.eos_id() >= 0) eos.push_back(tok.eos_id());
  return eos;
}

} // namespace troupe
