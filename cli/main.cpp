// troupe: an LLM inference server built as an actor system.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "engine/model/model_error.hpp"

#include <cstdio>
#include <exception>
#include <string_view>

namespace {

constexpr const char* k_usage =
    "usage: troupe <command> [options]\n"
    "\n"
    "commands:\n"
    "  serve         [--config FILE] [--port N] [--host ADDR] [--model DIR] [--scheduling NAME]\n"
    "                [--step-log FILE] [--set KEY=VALUE]...\n"
    "                (defaults: config/default.toml; keys as in that file, e.g.\n"
    "                --set scheduler.max_num_seqs=512 --set engine.executor=zero)\n"
    "  worker        --join HOST:PORT [--config FILE] [--model DIR] [--set KEY=VALUE]...\n"
    "                replicas of the model here, serving the router node whose\n"
    "                router.worker_port is PORT (engine.replicas of them)\n"
    "  bench         [--url http://HOST:PORT] [--dataset random|sharegpt-like]\n"
    "                [--request-rate R|inf] [--burstiness B] [--max-concurrency C]\n"
    "                [--num-prompts N] [--random-input-len N] [--random-output-len N]\n"
    "                [--goodput ttft:MS,tpot:MS,e2el:MS] [--endpoint PATH] [--seed S]\n"
    "                [--api-key KEY] (a tenant's key, with server.tenants)\n"
    "  bench-loopback [--streams 1000] [--events 256] [--event-bytes 160]\n"
    "                (this machine's ceiling for many small streamed events)\n"
    "  sim           SCENARIO.toml [--out DIR] [--set KEY=VALUE]... [--quiet] [--progress]\n"
    "                | --replay STEP_LOG  (schedules a server's step log again, checks each step)\n"
    "                (the discrete-event simulator: the server's scheduler and policies,\n"
    "                a cost model for the executor; scenarios in config/sim/)\n"
    "  bench-scheduler [--running 256] [--waiting 1000] [--steps N] [--policy NAME]\n"
    "                [--prompt-tokens N] [--no-prefix-caching]  (CPU time of one step)\n"
    "  generate      --model DIR --prompt TEXT [--max-tokens N] [--temperature T]\n"
    "                [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
    "                [--seed S] [--chat] [--chat-template NAME] [--system TEXT]\n"
    "                [--threads N] [--block-size N] [--stop TEXT] [--no-huge-pages]\n"
    "  hash-key      [--new]  the api_key_sha256 of a key read from standard input\n"
    "                (--new: makes a random key, prints it and its hash)\n"
    "  make-model    --preset NAME --out DIR [--seed S]\n"
    "                presets: tiny, stories110m, tinyllama-1.1b, llama-3.2-1b, llama-3-8b\n"
    "  bench-engine  [--preset NAME | --model DIR] [--batches 1,8,32] [--threads 1,0]\n"
    "                [--decode-steps N] [--prompt-tokens N] [--prefill-tokens N] [--runs N]\n"
    "                [--no-huge-pages]\n"
    "  generate and bench-engine copy the weights into 2 MiB pages first (decode reads\n"
    "  them ~10% faster; costs one copy at start); --no-huge-pages reads the mapping.\n";

} // namespace

auto main(int argc, char** argv) -> int {
  using namespace troupe;
  if (argc < 2) {
    std::fputs(k_usage, stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  const std::span<char* const> rest(argv + 2, static_cast<std::size_t>(argc - 2));
  try {
    if (cmd == "serve") return cli::run_serve(rest);
    if (cmd == "worker") return cli::run_worker(rest);
    if (cmd == "bench") return cli::run_bench(rest);
    if (cmd == "bench-loopback") return cli::run_bench_loopback(rest);
    if (cmd == "bench-scheduler") return cli::run_bench_scheduler(rest);
    if (cmd == "sim") return cli::run_sim(rest);
    if (cmd == "generate") return cli::run_generate(rest);
    if (cmd == "make-model") return cli::run_make_model(rest);
    if (cmd == "hash-key") return cli::run_hash_key(rest);
    if (cmd == "bench-engine") return cli::run_bench_engine(rest);
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::fputs(k_usage, stdout);
      return 0;
    }
    std::fprintf(stderr, "troupe: unknown command '%s'\n%s", argv[1], k_usage);
    return 2;
  } catch (const cli::usage_error& e) {
    std::fprintf(stderr, "troupe %s: %s\n%s", argv[1], e.what(), k_usage);
    return 2;
  } catch (const model_error& e) {
    std::fprintf(stderr, "troupe: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe %s: %s\n", argv[1], e.what());
    return 1;
  }
}
