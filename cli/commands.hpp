#pragma once
// The `troupe` subcommands. Each returns the process exit code; usage errors
// are thrown as cli::usage_error.

#include <span>

namespace troupe::cli {

auto run_generate(std::span<char* const> argv) -> int;
auto run_make_model(std::span<char* const> argv) -> int;
auto run_bench_engine(std::span<char* const> argv) -> int;
auto run_bench_grammar(std::span<char* const> argv) -> int;
auto run_serve(std::span<char* const> argv) -> int;
auto run_worker(std::span<char* const> argv) -> int;
auto run_bench(std::span<char* const> argv) -> int;
auto run_bench_loopback(std::span<char* const> argv) -> int;
auto run_bench_scheduler(std::span<char* const> argv) -> int;
auto run_sim(std::span<char* const> argv) -> int;
auto run_hash_key(std::span<char* const> argv) -> int;
auto run_config(std::span<char* const> argv) -> int;
auto run_tokenize(std::span<char* const> argv) -> int;
auto run_render_template(std::span<char* const> argv) -> int;

} // namespace troupe::cli
