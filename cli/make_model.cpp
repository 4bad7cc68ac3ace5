// troupe make-model: writes a preset's model directory.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/tiny_model.hpp"

#include <cstdio>

namespace troupe::cli {

auto run_make_model(std::span<char* const> argv) -> int {
  const args a(argv, {"preset", "out", "seed", "tokenizer", "hidden", "vocab", "layers", "eos-boost"}, {"small"});
  const auto preset = a.required("preset");
  const auto out = a.required("out");
  if (!preset_config(preset)) {
    std::string known;
    for (auto n : preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
    throw usage_error("unknown preset '" + preset + "' (known: " + known + ")");
  }
  make_model_options o;
  o.seed = static_cast<std::uint64_t>(a.integer("seed", 1));
  o.tokenizer_dir = a.str("tokenizer", "");
  o.small = a.has("small");
  if (a.has("hidden") && !o.small) throw usage_error("--hidden needs --small");
  o.small_hidden = a.integer("hidden", 64);
  if (a.has("vocab") && !o.small) throw usage_error("--vocab needs --small");
  o.small_vocab = a.integer("vocab", 0);
  o.layers = a.integer("layers", 0);
  if (a.has("layers") && (o.layers < 1 || o.layers > 1000)) throw usage_error("--layers must be 1 to 1000");
  if (a.has("vocab") && (o.small_vocab < 3 || o.small_vocab > 1000000)) throw usage_error("--vocab must be 3 to 1000000");
  o.eos_boost = a.real("eos-boost", 0);
  if (o.eos_boost < 0) throw usage_error("--eos-boost must be >= 0");
  make_model(preset, out, o);
  const std::string with = o.tokenizer_dir.empty() ? "" : " with the tokenizer of " + o.tokenizer_dir.string();
  std::printf("wrote %s%s model to %s%s\n", o.small ? "a small " : "", preset.c_str(), out.c_str(), with.c_str());
  return 0;
}

} // namespace troupe::cli
