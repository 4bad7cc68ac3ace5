// The public trace formats (sim/trace.hpp), each from a small file written
// here in the dataset's own layout: what is read, what is skipped, what a
// malformed row is told, and a Mooncake trace's shared blocks in the
// simulator's prefix cache.

#include "sim/report.hpp"
#include "sim/scenario.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
#include "sim/workload.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

using namespace troupe;
using namespace troupe::sim;

namespace {

const char* k_azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                      "2023-11-16 18:15:46.6805900,374,44\n"
                      "2023-11-16 18:15:50.9951690,396,109\n"
                      "2023-11-16 18:15:51.2224910,879,0\n"
                      "2023-11-17 00:00:00,1020,7\n";

const char* k_burstgpt = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                         "5,ChatGPT,472,18,490,Conversation log\n"
                         "45,ChatGPT,1087,0,1087,Conversation log\n"
                         "118,GPT-4,417,276,693,API log\n";

// Blocks of 512 tokens: the first two requests share their first block.
const char* k_mooncake = R"({"timestamp": 27482, "input_length": 1000, "output_length": 52, "hash_ids": [46, 47]}
{"timestamp": 30535, "input_length": 600, "output_length": 10, "hash_ids": [46, 48]}
{"timestamp": 30535, "input_length": 100, "output_length": 5, "hash_ids": [49]}
)";

struct read_result {
  trace t;
  std::vector<std::string> tenants{"default"};
};

auto read(const std::string& text, trace_options o = {}, const std::string& name = "t.txt") -> read_result {
  testing::temp_dir dir;
  std::ofstream(dir / name) << text;
  read_result r;
  r.t = read_trace(dir / name, o, r.tenants);
  return r;
}

/// The message of a malformed trace, after the file's name.
auto error_of(const std::string& text, trace_options o = {}) -> std::string {
  try {
    (void)read(text, o);
  } catch (const scenario_error& e) {
    const std::string m = e.what();
    return m.substr(m.find("t.txt:") + 6);
  }
  return "";
}

} // namespace

TEST_CASE("Azure LLM inference traces: date-time stamps from the first row, failed requests skipped") {
  const auto r = read(k_azure);
  CHECK(r.t.format == "azure");
  REQUIRE(r.t.requests.size() == 3);
  CHECK(r.t.skipped == 1); // 0 generated tokens
  CHECK(r.t.requests[0].arrival_s == 0);
  CHECK(r.t.requests[1].arrival_s == doctest::Approx(4.314579));
  CHECK(r.t.requests[1].prompt_tokens == 396);
  CHECK(r.t.requests[1].output_tokens == 109);
  CHECK(r.t.requests[2].arrival_s == doctest::Approx(5 * 3600 + 44 * 60 + 13.31941)); // past midnight
  CHECK(r.t.requests[2].index == 2);
  CHECK(r.tenants == std::vector<std::string>{"default"});
  CHECK(error_of("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:61:00,1,1\n") ==
        "3: TIMESTAMP: \"2023-11-16 18:61:00\" is not a date and time like 2023-11-16 18:15:46.6805900");
  // The 2024 traces write an offset: the times are UTC.
  const auto r2024 = read("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2048,28\n"
                          "2024-05-10 02:00:01+02:00,100,5\n2024-05-10 00:00:03Z,10,1\n");
  REQUIRE(r2024.t.requests.size() == 3);
  CHECK(r2024.t.requests[1].arrival_s == doctest::Approx(0.99007));
  CHECK(r2024.t.requests[2].arrival_s == doctest::Approx(2.99007));
  CHECK(error_of("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-4,1\n") ==
        "2: ContextTokens: \"-4\" is not an integer in [0, 2^30]");
}

TEST_CASE("BurstGPT: seconds from the first row, failed requests (0 response tokens) skipped") {
  const auto r = read(k_burstgpt);
  CHECK(r.t.format == "burstgpt");
  REQUIRE(r.t.requests.size() == 2);
  CHECK(r.t.skipped == 1);
  CHECK(r.t.requests[0].arrival_s == 0);
  CHECK(r.t.requests[1].arrival_s == 113);
  CHECK(r.t.requests[1].prompt_tokens == 417);
  CHECK(r.t.requests[1].output_tokens == 276);
  CHECK(error_of("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "5,ChatGPT,472,18,490,Conversation log\n4,ChatGPT,1,1,2,API log\n") ==
        "3: Timestamp goes back in time (4 after 5.000000)");
  CHECK(error_of("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,many,18,490,x\n") ==
        "2: Request tokens: \"many\" is not an integer in [0, 2^30]");
  CHECK(error_of("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,1,1\n") ==
        "2: 4 cells, the header has 6");
}

TEST_CASE("Mooncake JSON lines: milliseconds, hash ids as shared blocks") {
  const auto r = read(k_mooncake);
  CHECK(r.t.format == "mooncake");
  REQUIRE(r.t.requests.size() == 3);
  CHECK(r.t.requests[1].arrival_s == doctest::Approx(3.053));
  CHECK(r.t.blocks[1] == std::vector<std::uint64_t>{46, 48});
  CHECK(error_of(R"({"timestamp": 1, "input_length": 1000, "output_length": 5, "hash_ids": [1]})") ==
        "1: hash_ids: 1 ids for input_length 1000, which is 2 blocks of 512 tokens (another block size? "
        "arrival.trace_block_tokens, --trace-block-tokens)");
  trace_options sixteen;
  sixteen.block_tokens = 16; // Qwen-Bailian's convention
  CHECK(read(R"({"timestamp": 1, "input_length": 20, "output_length": 5, "hash_ids": [1, 2]})", sixteen)
            .t.requests.size() == 1);
  CHECK(error_of(std::string(k_mooncake) + "{\"timestamp\": 40000, \"input_length\": 1,\n") ==
        "4: not a JSON object");
  CHECK(error_of(R"({"timestamp": 1, "input_length": 1, "output_length": 5, "hash_ids": [1], "session": 2})") ==
        "1: unknown field \"session\" (fields: timestamp, input_length, output_length, hash_ids; Qwen-Bailian's "
        "chat_id, parent_chat_id, type, turn)");
  CHECK(error_of(R"({"timestamp": 1, "output_length": 5, "hash_ids": []})") ==
        "1: input_length: missing, or not an integer in [0, 2^30]");
  // A failed request (no prompt) is left out before its ids are counted.
  CHECK(read(std::string(k_mooncake) + R"({"timestamp": 40000, "input_length": 0, "output_length": 3, "hash_ids": [7]})")
            .t.skipped == 1);
  // Qwen-Bailian: a conversation's fields, and times in seconds.
  trace_options sixteen_b;
  sixteen_b.block_tokens = 16;
  const auto b = read("{\"chat_id\": 159, \"parent_chat_id\": -1, \"timestamp\": 61.114, \"input_length\": 20, "
                      "\"output_length\": 5, \"type\": \"text\", \"turn\": 1, \"hash_ids\": [1, 2]}\n"
                      "{\"chat_id\": 160, \"parent_chat_id\": 159, \"timestamp\": 63.614, \"input_length\": 10, "
                      "\"output_length\": 2, \"type\": \"text\", \"turn\": 2, \"hash_ids\": [1]}\n",
                      sixteen_b);
  REQUIRE(b.t.requests.size() == 2);
  CHECK(b.t.requests[1].arrival_s == doctest::Approx(2.5));
}

TEST_CASE("any format: time scaling, a row limit, a named format, an unknown one") {
  trace_options o;
  o.time_scale = 0.5;
  o.max_rows = 1;
  const auto r = read(k_burstgpt, o);
  CHECK(r.t.requests.size() == 1);
  o.max_rows = 0;
  CHECK(read(k_burstgpt, o).t.requests[1].arrival_s == 56.5);
  o.format = "azure";
  CHECK(error_of(k_burstgpt, o) == "1: a burstgpt trace, not azure");
  CHECK(error_of("when,what\n1,2\n").starts_with("1: the first line matches no trace format (troupe: arrival_s"));
  CHECK(error_of("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n") ==
        " the trace holds no request");
}

TEST_CASE("the simulator replays a Mooncake trace: the shared hash ids are prefix-cache hits") {
  testing::temp_dir dir;
  std::string text;
  // 40 requests of 4 blocks each; every request shares its first 3 blocks with the one before.
  for (int i = 0; i < 40; ++i)
    text += "{\"timestamp\": " + std::to_string(i * 200) + ", \"input_length\": 2000, \"output_length\": 20, "
            "\"hash_ids\": [1, 2, 3, " + std::to_string(100 + i) + "]}\n";
  std::ofstream(dir / "m.jsonl") << text;
  auto runs = parse_scenario("[arrival]\nprocess = \"trace\"\ntrace = \"m.jsonl\"\n", "m.toml", dir.path());
  REQUIRE(runs.size() == 1);
  workload w(runs[0]);
  std::vector<token_id> a, b;
  const auto first = *w.next(), second = *w.next();
  w.prompt_of(first, a);
  w.prompt_of(second, b);
  CHECK(std::equal(a.begin(), a.begin() + 1536, b.begin()));   // blocks 1, 2, 3
  CHECK(!std::equal(a.begin() + 1536, a.end(), b.begin() + 1536)); // their own last blocks
  const auto s = summarize(simulate(runs[0]));
  CHECK(s.completed == 40);
  // 3 of each request's 4 blocks are cached but the first request's: ~75%
  // of the prompt blocks after the first.
  CHECK(s.cached_prompt_share > 0.7);
}
