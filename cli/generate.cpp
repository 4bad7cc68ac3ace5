// troupe generate: one prompt, streamed to stdout, speed on stderr.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "engine/generator.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/tokenizer/chat_template.hpp"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <limits>

namespace troupe::cli {

namespace {

// The sampling flags over the model's defaults; a usage_error for a bad one.
auto parse_sampling(const args& a, const model_config& cfg) -> sampling_params {
  sampling_params p = default_sampling_params(cfg);
  const auto max_tokens = a.integer("max-tokens", 64);
  if (max_tokens < 1 || max_tokens > std::numeric_limits<std::int32_t>::max())
    throw usage_error("--max-tokens must be in [1, 2147483647]");
  p.max_tokens = static_cast<std::int32_t>(max_tokens);
  p.temperature = static_cast<float>(a.real("temperature", p.temperature));
  p.top_k = static_cast<std::int32_t>(a.integer("top-k", p.top_k));
  p.top_p = static_cast<float>(a.real("top-p", p.top_p));
  p.min_p = static_cast<float>(a.real("min-p", 0.0));
  p.repetition_penalty = static_cast<float>(a.real("repetition-penalty", 1.0));
  p.presence_penalty = static_cast<float>(a.real("presence-penalty", 0.0));
  p.frequency_penalty = static_cast<float>(a.real("frequency-penalty", 0.0));
  p.ignore_eos = a.has("ignore-eos");
  if (a.has("seed")) p.seed = static_cast<std::uint64_t>(a.integer("seed", 0));
  if (a.has("stop")) p.stop = {a.str("stop", "")};
  if (auto err = p.validate(); !err.empty()) throw usage_error(err);
  return p;
}

// The prompt's token ids: with --chat, rendered through the chat template.
auto prompt_ids(const args& a, const tokenizer& tok, const std::string& dir, const std::string& prompt)
    -> std::vector<token_id> {
  if (!a.has("chat")) return tok.encode(prompt, tok.bos_id() >= 0);
  const auto name = a.str("chat-template", "");
  if (a.has("chat-template") && !parse_chat_format(name) && !name.ends_with(".jinja"))
    throw usage_error("unknown chat template '" + name + "' (known: " + chat_format_names() + ", or a .jinja file)");
  const auto chat = resolve_chat_template(name, dir);
  if (!chat) throw usage_error("the model ships no chat template; pass --chat-template");
  std::vector<chat_message> msgs;
  if (a.has("system")) msgs.push_back({"system", a.str("system", "")});
  msgs.push_back({"user", prompt});
  chat_request request;
  request.messages = messages_value(msgs);
  std::string error;
  const auto text = render_chat(*chat, request, {[] {
                                  const auto t = std::time(nullptr);
                                  std::tm tm{};
                                  localtime_r(&t, &tm);
                                  return tm;
                                }},
                                &error);
  if (!error.empty()) throw usage_error(error);
  return tok.encode_with_special(text, false);
}

// The executor for this one request: --block-size, --threads, and a cache
// sized for the prompt and its output.
auto executor_options(const args& a, std::size_t prompt_tokens, const sampling_params& p, const model_config& cfg,
                      const tokenizer& tok) -> cpu_executor_options {
  cpu_executor_options eo;
  eo.block_size = static_cast<std::int32_t>(a.integer("block-size", 16));
  if (eo.block_size < 1 || eo.block_size > 1024) throw usage_error("--block-size must be in [1, 1024]");
  // The cache holds exactly this request; one past the context is refused by
  // the generator with a clear line, so size it for at most that.
  const auto needed = std::min<std::int64_t>(static_cast<std::int64_t>(prompt_tokens) + p.max_tokens,
                                             cfg.max_position_embeddings + 1);
  eo.num_kv_blocks = static_cast<std::int32_t>((needed + eo.block_size - 1) / eo.block_size);
  eo.num_threads = static_cast<int>(a.integer("threads", 0));
  eo.num_sampled_ids = tok.vocab_size(); // never a padding row: it has no text
  return eo;
}

// The prompt's and the decode's speed, and why it finished, on stderr.
void print_speed(const generation_stats& s) {
  const auto rate = [](double n, double sec) { return sec > 0 ? n / sec : 0.0; };
  std::fprintf(stderr,
               "prompt: %lld tokens, %.1f tokens/s; decode: %lld tokens, %.1f tokens/s; finish: %s\n",
               static_cast<long long>(s.num_prompt_tokens),
               rate(static_cast<double>(s.num_prompt_tokens), s.prefill_seconds),
               static_cast<long long>(s.num_generated_tokens),
               rate(static_cast<double>(s.num_generated_tokens - 1), s.decode_seconds),
               std::string(finish_reason_name(s.reason)).c_str());
}

} // namespace

auto run_generate(std::span<char* const> argv) -> int {
  const args a(argv,
               {"model", "prompt", "max-tokens", "temperature", "top-k", "top-p", "min-p",
                "repetition-penalty", "presence-penalty", "frequency-penalty", "seed",
                "chat-template", "system", "threads", "block-size", "stop", "prefill-chunk"},
               {"chat", "ignore-eos", "no-huge-pages"});
  const std::string dir = a.required("model");
  const std::string prompt = a.required("prompt");

  auto weights = model_weights::load(dir);
  const auto tok = tokenizer::load_dir(dir);
  const auto& cfg = weights.config;
  if (tok.vocab_size() > cfg.vocab_size)
    fail(tokenizer::file_in_dir(dir),
         std::to_string(tok.vocab_size()) + " tokens, more than the model's vocab_size " +
             std::to_string(cfg.vocab_size));

  const sampling_params p = parse_sampling(a, cfg);
  const std::vector<token_id> ids = prompt_ids(a, tok, dir, prompt);

  const cpu_executor_options eo = executor_options(a, ids.size(), p, cfg, tok);
  const auto chunk = static_cast<std::int32_t>(a.integer("prefill-chunk", 512));
  if (chunk < 1) throw usage_error("--prefill-chunk must be positive");
  cpu_executor ex(weights, eo);
  generator gen(ex, tok, eos_token_ids(cfg, tok), chunk, cfg.max_position_embeddings);
  gen.check(ids, p);
  // Last, after every check: the copy costs about a second per 400 MB here.
  // (The model reads the weights only when it runs, so moving them now is safe.)
  if (!a.has("no-huge-pages")) place_in_huge_pages(weights);
  const auto s = gen.generate(ids, p, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  print_speed(s);
  return 0;
}

} // namespace troupe::cli
