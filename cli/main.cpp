// troupe: an LLM inference server built as an actor system.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/formats/model_error.hpp"

#include <array>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

namespace {

using namespace troupe;

/// One subcommand: its name, what runs it, and its usage: the arguments,
/// then what it does, in lines (the first follows the name).
struct command {
  std::string_view name;
  int (*run)(std::span<char* const>);
  std::string_view usage;
};

constexpr std::array k_commands = {
    command{"serve", cli::run_serve,
            "[DIR] [--config FILE] [--port N] [--host ADDR] [--model DIR] [--scheduling NAME]\n"
            "[--step-log FILE] [--set KEY=VALUE]...\n"
            "the OpenAI-compatible server on the model in DIR (default: models/tiny). Settings:\n"
            "the built-in defaults (troupe config --defaults lists every key), FILE's keys over\n"
            "them, then the options: --port (0: a free one, printed), --host, --model (as DIR),\n"
            "--scheduling and --step-log set server.port, server.host, model.dir,\n"
            "scheduler.policy and engine.step_log; --set any key, e.g.\n"
            "--set scheduler.max_num_seqs=512 --set engine.executor=zero"},
    command{"worker", cli::run_worker,
            "--join HOST:PORT [DIR] [--config FILE] [--model DIR] [--set KEY=VALUE]...\n"
            "replicas of the model here (engine.replicas of them), serving the router node\n"
            "whose router.worker_port is PORT; settings as for serve"},
    command{"config", cli::run_config,
            "--defaults | [DIR] [--config FILE] [--port N] [--host ADDR] [--model DIR]\n"
            "[--scheduling NAME] [--step-log FILE] [--set KEY=VALUE]...\n"
            "the server's settings as TOML, each key with what it does: --defaults, the\n"
            "built-in ones (config/default.toml); else those serve runs with, given the same options"},
    command{"bench", cli::run_bench,
            "[--url http://HOST:PORT] [--dataset random|sharegpt-like|trace] [--trace FILE\n"
            " [--trace-format auto|troupe|azure|burstgpt|mooncake] [--time-scale X] [--max-rows N]\n"
            " [--trace-block-tokens N]] (a trace: troupe's CSV, Azure, BurstGPT or Mooncake JSON lines)\n"
            "[--request-rate R|inf] [--burstiness B] [--max-concurrency C] [--num-prompts N]\n"
            "[--random-input-len N] [--random-output-len N] [--shared-prefix-len N]\n"
            "[--tenant-weights 4,1] [--goodput ttft:MS,tpot:MS,e2el:MS] [--endpoint PATH]\n"
            "[--model NAME] [--seed S] [--api-key KEY] (a tenant's key, with server.tenants)\n"
            "a load generator against a running server: throughput, TTFT, TPOT, latency"},
    command{"bench-loopback", cli::run_bench_loopback,
            "[--streams 1000] [--events 256] [--event-bytes 160]\n"
            "this machine's ceiling for many small streamed events"},
    command{"bench-scheduler", cli::run_bench_scheduler,
            "[--running 256] [--waiting 1000] [--steps N] [--policy NAME] [--prompt-tokens N]\n"
            "[--no-prefix-caching]\n"
            "the CPU time of one scheduler step"},
    command{"sim", cli::run_sim,
            "SCENARIO.toml [--out DIR] [--set KEY=VALUE]... [--quiet] [--progress]\n"
            "| [SCENARIO.toml | --trace FILE [--trace-format F] [--time-scale X] [--max-rows N]\n"
            "  [--trace-block-tokens N] [--hardware NAME | --calibration STEP_LOG] [--cold-start-s S]]\n"
            "  --server-config SERVER.toml  (the server that config describes:\n"
            "  its [scheduler], [router] and [autoscaler], its model's KV blocks; the traffic and\n"
            "  cost model of the scenario, else the trace and the roofline of its model on a\n"
            "  hardware preset: h100, h200, a100, l40s, l4, cpu; default cpu, or h100 for CUDA)\n"
            "| --replay STEP_LOG  (schedules a server's step log again, checks each step)\n"
            "the discrete-event simulator: the server's scheduler and policies, a cost model\n"
            "for the executor (scenarios in the repository's config/sim/)"},
    command{"generate", cli::run_generate,
            "--model DIR --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K]\n"
            "[--top-p P] [--min-p P] [--repetition-penalty R] [--presence-penalty P]\n"
            "[--frequency-penalty F] [--seed S] [--stop TEXT] [--ignore-eos] [--chat]\n"
            "[--chat-template NAME] [--system TEXT] [--threads N] [--block-size N]\n"
            "[--prefill-chunk N] [--no-huge-pages]\n"
            "one prompt, streamed to stdout, speed on stderr. The weights are copied into\n"
            "2 MiB pages first (decode ~10% faster); --no-huge-pages reads the mapping"},
    command{"render-template", cli::run_render_template,
            "(--template FILE.jinja | --builtin NAME | --model DIR) [--model DIR] [--now TIME]\n"
            "a chat template rendered on the conversation read as JSON from standard input\n"
            "({\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, and any other\n"
            "variable}), as the server renders it: the model's own template (or the one named)\n"
            "with its special tokens; --now \"2024-07-26 09:30:00\" fixes strftime_now's clock"},
    command{"hash-key", cli::run_hash_key,
            "[--new]\n"
            "the api_key_sha256 of a key read from standard input, for a tenants file\n"
            "(--new: makes a random key, prints it and its hash)"},
    command{"tokenize", cli::run_tokenize,
            "--model DIR | --file FILE [--special] [--no-bos] [--decode] [--time]\n"
            "a model's tokenizer (DIR's tokenizer.json, else tokenizer.model; or FILE) on JSON\n"
            "lines: reads one JSON string a line on stdin, writes {\"ids\":[...]} a line (with\n"
            "the BOS/EOS AutoTokenizer adds unless --no-bos); --special: special-token spellings\n"
            "become ids always (as for chat templates); --decode adds \"text\", the ids decoded;\n"
            "--time adds \"ns\", the encode's nanoseconds"},
    command{"make-model", cli::run_make_model,
            "--preset NAME --out DIR [--seed S] [--tokenizer DIR] [--small [--hidden N] [--vocab V]]\n"
            "[--layers L] [--eos-boost B]\n"
            "a model directory of a preset's shape, random weights (tiny's fitted to bigrams of\n"
            "the licence texts); presets: tiny (a few MB), stories110m, tinyllama-1.1b, llama-3.2-1b,\n"
            "llama-3-8b, qwen2.5-0.5b, qwen3-0.6b, gemma-2-2b, gemma-3-1b, smollm2-360m, phi-3.5-mini,\n"
            "mistral-7b-v0.3, mistral-nemo-12b, and the mixtures of experts qwen3-30b-a3b,\n"
            "mixtral-8x7b, olmoe-1b-7b, gpt-oss-20b.\n"
            "--tokenizer DIR copies a real model's tokenizer.json (or .model), tokenizer_config.json\n"
            "and chat template from DIR (the vocabulary grows to cover it); --small keeps the\n"
            "family's features at test size (2 layers, hidden 64, F32); --hidden N widens it\n"
            "(N a multiple of 32: N/16 heads, intermediate 2N; 256 fits GGUF's K-quant blocks;\n"
            "at most 16 experts, 4 a token); --vocab V shrinks the vocabulary (BOS 1, EOS 2);\n"
            "--layers L keeps L of the shape's layers (a model too large for the machine, benchmarked);\n"
            "--eos-boost B makes answers end soon (EOS's logit ~6B above the rest; 1.7: ~1 token in 10),\n"
            "for clients that wait for an answer's end"},
    command{"bench-engine", cli::run_bench_engine,
            "[--preset NAME | --model DIR|FILE.gguf] [--batches 1,8,32] [--threads 1,0]\n"
            "[--decode-steps N] [--prompt-tokens N] [--prefill-tokens N] [--runs N]\n"
            "[--no-huge-pages] [--json]\n"
            "decode and prefill speed of the CPU engine, against the read bandwidth\n"
            "(--json: the medians again, a JSON line per thread count)"},
    command{"bench-grammar", cli::run_bench_grammar,
            "[--vocabularies NAME=DIR,...] [--threads N] [--decode-steps N] [--runs N]\n"
            "[--schema-properties N] [--tools FILE]\n"
            "structured output's cost: decode tokens/s under a JSON schema against plain decoding\n"
            "at batch 1 and 32 (stories110m's shape, each tokenizer's vocabulary; default Llama 2's\n"
            "and Llama 3.2's from tests/tools), and a large schema's compile time; --tools: an\n"
            "agent's tools (a Messages request body's, e.g. Claude Code's as\n"
            "scripts/record_agent_tools.py writes it): a forced call's grammar, prepared"},
};

/// `text`'s lines after the first, each on a line of its own after `indent`.
auto indented(std::string_view text, std::string_view indent) -> std::string {
  std::string out;
  for (const char ch : text) {
    out += ch;
    if (ch == '\n') out += indent;
  }
  return out + "\n";
}

/// Every command with its usage.
auto overview() -> std::string {
  std::string out = "usage: troupe <command> [options]\n\ncommands:\n";
  for (const auto& c : k_commands) {
    auto name = "  " + std::string(c.name);
    name.resize(std::max<std::size_t>(name.size() + 1, 18), ' ');
    out += name + indented(c.usage, std::string(18, ' '));
  }
  return out + "\ntroupe <command> --help shows one command's usage.\n";
}

/// One command's usage.
auto usage_of(const command& c) -> std::string {
  return "usage: troupe " + std::string(c.name) + " " + indented(c.usage, "  ");
}

auto find_command(std::string_view name) -> const command* {
  for (const auto& c : k_commands)
    if (c.name == name) return &c;
  return nullptr;
}

/// `troupe help [COMMAND]`.
auto run_help(std::span<char* const> rest) -> int {
  if (rest.empty()) {
    std::fputs(overview().c_str(), stdout);
    return 0;
  }
  const auto* c = find_command(rest.front());
  if (c == nullptr || rest.size() > 1) {
    std::fprintf(stderr, "troupe help: no command '%s'\n%s", rest.front(), overview().c_str());
    return 2;
  }
  std::fputs(usage_of(*c).c_str(), stdout);
  return 0;
}

} // namespace

auto main(int argc, char** argv) -> int {
  if (argc < 2) {
    std::fputs(overview().c_str(), stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  const std::span<char* const> rest(argv + 2, static_cast<std::size_t>(argc - 2));
  if (name == "help" || name == "--help" || name == "-h") return run_help(rest);
  const auto* cmd = find_command(name);
  if (cmd == nullptr) {
    std::fprintf(stderr, "troupe: unknown command '%s'\n%s", argv[1], overview().c_str());
    return 2;
  }
  try {
    return cmd->run(rest);
  } catch (const cli::help_requested&) {
    std::fputs(usage_of(*cmd).c_str(), stdout);
    return 0;
  } catch (const cli::usage_error& e) {
    std::fprintf(stderr, "troupe %s: %s\n%s", argv[1], e.what(), usage_of(*cmd).c_str());
    return 2;
  } catch (const model_error& e) {
    std::fprintf(stderr, "troupe: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe %s: %s\n", argv[1], e.what());
    return 1;
  }
}
