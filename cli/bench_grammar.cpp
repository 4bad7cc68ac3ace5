// troupe bench-grammar: what structured output costs. Decode tokens/s of
// requests under a JSON schema against the same requests unconstrained, in
// the same runs, interleaved, at batch 1 and 32, on stories110m's shape with
// two real vocabularies (Llama 2's 32k SentencePiece pieces, Llama 3.2's
// 128k byte-level BPE); and how long a large schema takes to compile.

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "base/stats.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/grammar/compiled_grammar.hpp"
#include "engine/grammar/grammar_matcher.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/make_model/tiny_model.hpp"
#include "engine/tokenizer/output_processor.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "service/http/anthropic/anthropic_api.hpp"
#include "service/tools/tool_grammar.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <span>
#include <sstream>
#include <string>

namespace troupe::cli {
namespace {

using clock_type = std::chrono::steady_clock;

auto seconds_since(clock_type::time_point t0) -> double {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The decoded schema: an array of records that cannot end within the run
/// (minItems), each with strings, bounded numbers, an enum, a date and a
/// nested object, so the grammar moves through all of its kinds of state.
const char* const decode_schema = R"({
  "type": "array", "minItems": 1000,
  "items": {
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 40},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "score": {"type": "number", "minimum": -10, "maximum": 10},
      "tier": {"enum": ["gold", "silver", "bronze"]},
      "joined": {"type": "string", "format": "date"},
      "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                  "required": ["city", "zip"]},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
      "active": {"type": "boolean"}
    },
    "required": ["name", "age", "tier", "address", "active"]
  }
})";

/// A large schema: `n` properties of every kind, a quarter of them nested objects.
auto large_schema(int n) -> std::string {
  std::string props;
  for (int i = 0; i < n; ++i) {
    std::string p;
    switch (i % 8) {
    case 0: p = R"({"type": "string", "maxLength": 64})"; break;
    case 1: p = R"({"type": "integer", "minimum": -1000, "maximum": 100000})"; break;
    case 2: p = R"({"enum": ["a", "b", "c", "d", 1, 2, null]})"; break;
    case 3: p = R"({"type": "array", "items": {"type": "number"}, "maxItems": 8})"; break;
    case 4: p = R"({"type": "string", "format": "date-time"})"; break;
    case 5: p = R"({"anyOf": [{"type": "string"}, {"type": "null"}]})"; break;
    default:
      p = R"({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "string", "pattern": "^[A-Z][a-z]+$"}, "z": {"type": "boolean"}}, "required": ["x"]})";
    }
    props += (i ? ", " : "") + std::string("\"field_") + std::to_string(i) + "\": " + p;
  }
  return R"({"type": "object", "properties": {)" + props + "}}";
}

struct vocab_model {
  std::string label;
  model_weights weights;
  std::shared_ptr<const grammar::token_vocabulary> vocab;
  std::shared_ptr<const tokenizer> tok;
};

auto load(const std::string& label, const std::filesystem::path& tokenizer_dir) -> vocab_model {
  if (!std::filesystem::exists(tokenizer_dir))
    throw usage_error(tokenizer_dir.string() + " does not exist (the npm tokenizers of tests/tools: make test installs them)");
  const auto dir = std::filesystem::temp_directory_path() / ("troupe-bench-grammar-" + label);
  if (!std::filesystem::exists(dir / "model.safetensors")) {
    std::fprintf(stderr, "writing random stories110m weights with %s's tokenizer to %s\n", label.c_str(), dir.c_str());
    make_model_options o;
    o.tokenizer_dir = tokenizer_dir;
    make_model("stories110m", dir, o);
  }
  auto w = model_weights::load(dir);
  place_in_huge_pages(w);
  auto tok = std::make_shared<const tokenizer>(tokenizer::load_dir(dir));
  std::vector<token_id> eos;
  if (tok->eos_id() >= 0) eos.push_back(tok->eos_id());
  auto v = std::make_shared<const grammar::token_vocabulary>(grammar::token_vocabulary::of(*tok, eos, tok->vocab_size()));
  return {label, std::move(w), std::move(v), std::move(tok)};
}

// `batch` sequences with a prefilled prompt, then one decode token each per step.
struct group {
  int batch;
  scheduler_output step;
  std::vector<token_id> next;
  std::int32_t position = 0;
  std::vector<token_id> first_output; ///< the first sequence's tokens, for the record
};

auto prepare(cpu_executor& ex, int batch, request_id first_id, block_id first_block, int per_seq,
             const sampling_params& sp) -> group {
  group g{batch, {}, {}, 16, {}};
  for (int b = 0; b < batch; ++b) {
    std::vector<token_id> prompt;
    for (int i = 0; i < g.position; ++i) prompt.push_back(static_cast<token_id>((7 * i + b) % 1000 + 100));
    const request_id id = first_id + static_cast<request_id>(b);
    std::vector<block_id> table(static_cast<std::size_t>(per_seq));
    std::iota(table.begin(), table.end(), first_block + b * per_seq);
    auto& c = g.step.add_chunk(id, prompt, 0, table, true);
    c.sample = true;
    g.step.new_requests.push_back({id, prompt, sp});
  }
  for (const auto& t : ex.execute(g.step).sampled) g.next.push_back(t.result.token);
  g.step.new_requests.clear();
  g.step.token_ids.assign(static_cast<std::size_t>(batch), 0);
  for (int b = 0; b < batch; ++b) {
    g.step.scheduled[static_cast<std::size_t>(b)].first_token = b;
    g.step.scheduled[static_cast<std::size_t>(b)].num_tokens = 1;
  }
  return g;
}

// Tokens/s of `steps` decode steps. The KV positions wrap within the
// sequences' blocks (what is attended to does not matter here; the samplers
// keep their state, so a constrained request goes on through its grammar).
auto decode(cpu_executor& ex, group& g, int steps, int max_position) -> double {
  const auto t0 = clock_type::now();
  for (int i = 0; i < steps; ++i) {
    if (g.position >= max_position) g.position = 16;
    for (std::size_t b = 0; b < g.next.size(); ++b) {
      g.step.token_ids[b] = g.next[b];
      g.step.scheduled[b].num_computed_tokens = g.position;
    }
    const auto out = ex.execute(g.step);
    for (std::size_t b = 0; b < g.next.size(); ++b) g.next[b] = out.sampled[b].result.token;
    g.first_output.push_back(g.next[0]);
    ++g.position;
  }
  return g.batch * steps / seconds_since(t0);
}

/// What a forced tool call of n optional integer properties costs (the
/// issue's shape): its grammar prepared as a request's is (compiled, first
/// mask), then the cold masks after a value and after the comma that
/// follows; per property, at 1,000, 2,500 and 5,000 (flat: linear).
void optional_properties(const std::shared_ptr<const grammar::token_vocabulary>& vocab, int runs) {
  std::printf("  n optional integer properties (a forced call's worst shape), per property:\n");
  for (const int n : {1000, 2500, 5000}) {
    std::string schema = R"({"type": "object", "properties": {)";
    for (int i = 0; i < n; ++i) schema += (i ? ", \"p" : "\"p") + std::to_string(i) + R"(": {"type": "integer"})";
    schema += "}}";
    std::vector<double> prepare, after_value, after_comma;
    for (int r = 0; r <= runs; ++r) {
      grammar::grammar_cache cache(vocab);
      auto t0 = clock_type::now();
      const auto g = grammar::prepare_grammar(cache, grammar::json_schema_to_gbnf(schema));
      const double s1 = seconds_since(t0);
      std::vector<std::uint64_t> mask;
      const auto value = g->advance(g->start(), "{\"p1\": 5");
      t0 = clock_type::now();
      g->fill_mask(value, 1 << 20, mask);
      const double s2 = seconds_since(t0);
      const auto comma = g->advance(value, ", ");
      t0 = clock_type::now();
      g->fill_mask(comma, 1 << 20, mask);
      const double s3 = seconds_since(t0);
      if (r == 0) continue;
      prepare.push_back(s1 * 1e6 / n);
      after_value.push_back(s2 * 1e6 / n);
      after_comma.push_back(s3 * 1e6 / n);
    }
    std::printf("    %5d: prepared %.2f us, mask after a value %.3f us, after its comma %.2f us\n", n,
                median(prepare), median(after_value), median(after_comma));
  }
}

/// Times of several things per run, in milliseconds; the warm-up run (0) is left out.
struct timings {
  std::vector<std::vector<double>> ms;
  explicit timings(std::size_t n) : ms(n) {}
  void add(int run, std::initializer_list<double> seconds) {
    if (run == 0) return;
    std::size_t i = 0;
    for (const double s : seconds) ms[i++].push_back(s * 1e3);
  }
  auto operator[](std::size_t i) const -> double { return median(ms[i]); }
};

/// An agent's tools, from a Messages request body (Claude Code's, as
/// scripts/record_agent_tools.py records it): the grammar of a forced call
/// of any of them (tool_choice any, in Qwen3's hermes format) written and
/// prepared as a request's is (compiled, first mask), and a cold mask
/// inside a string argument; then each tool's own grammar, the slowest.
void agent_tools(const std::vector<api::tool_spec>& tools, const std::shared_ptr<const grammar::token_vocabulary>& vocab,
                 int runs) {
  timings t(4); // to GBNF, prepared, a mask in a string, one tool at most
  std::string worst;
  for (int r = 0; r <= runs; ++r) {
    grammar::grammar_cache cache(vocab);
    auto t0 = clock_type::now();
    const auto gbnf = tools::tool_call_grammar("hermes", tools, {api::tool_choice::mode::required, {}}, true);
    const double s1 = seconds_since(t0);
    t0 = clock_type::now();
    const auto g = grammar::prepare_grammar(cache, gbnf);
    const double s2 = seconds_since(t0);
    const auto s = g->advance(g->start(), "<tool_call>\n{\"name\": \"" + tools.front().name + "\", \"arguments\": {\"");
    std::vector<std::uint64_t> mask;
    t0 = clock_type::now();
    g->fill_mask(s, 1 << 20, mask);
    const double s3 = seconds_since(t0);
    double slowest = 0;
    for (const auto& tool : tools) {
      grammar::grammar_cache one(vocab);
      const auto t1 = clock_type::now();
      (void)grammar::prepare_grammar(one, tools::tool_call_grammar("hermes", {tool}, {api::tool_choice::mode::required, {}}, false));
      const double s4 = seconds_since(t1);
      if (s4 > slowest) slowest = s4, worst = tool.name;
    }
    t.add(r, {s1, s2, s3, slowest});
  }
  std::printf("  an agent's %zu tools, a forced call of any: to GBNF %.2f ms, prepared (compiled, first mask) %.2f ms,\n"
              "  a cold mask inside a key %.2f ms; one tool alone at most %.2f ms (%s)\n",
              tools.size(), t[0], t[1], t[2], t[3], worst.c_str());
}

/// The tools of the Messages request body in `path`.
auto read_agent_tools(const std::string& path) -> std::vector<api::tool_spec> {
  std::ifstream in(path);
  if (!in) throw usage_error("--tools: cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = api::anthropic::parse_request(text.str(), {}, nullptr, true);
  if (const auto* e = std::get_if<api::api_error>(&parsed)) throw usage_error("--tools: " + path + ": " + e->message);
  auto tools = std::get<api::generation_request>(std::move(parsed)).tools;
  if (tools.empty()) throw usage_error("--tools: " + path + " has no tools");
  return tools;
}

/// The flags, checked; --tools read.
struct grammar_options {
  std::vector<api::tool_spec> agent_specs;
  int threads = 0;
  int steps = 0;
  int runs = 0;
  int num_props = 0;
  std::vector<std::pair<std::string, std::string>> vocabs; ///< label, tokenizer folder
};

/// "NAME=DIR,..." -> its pairs.
auto parse_vocabularies(const std::string& list) -> std::vector<std::pair<std::string, std::string>> {
  std::vector<std::pair<std::string, std::string>> vocabs;
  for (std::size_t at = 0; at < list.size();) {
    auto end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const auto item = list.substr(at, end - at);
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw usage_error("--vocabularies wants NAME=DIR,...; got '" + item + "'");
    vocabs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    at = end + 1;
  }
  return vocabs;
}

/// Reads and checks the flags; a usage_error for a bad one.
auto parse_grammar_options(const args& a) -> grammar_options {
  grammar_options o;
  const auto agent = a.str("tools", "");
  o.agent_specs = agent.empty() ? std::vector<api::tool_spec>{} : read_agent_tools(agent);
  o.threads = resolve_threads(static_cast<int>(a.integer("threads", 1)));
  o.steps = static_cast<int>(a.integer("decode-steps", 24));
  o.runs = static_cast<int>(a.integer("runs", 5));
  o.num_props = static_cast<int>(a.integer("schema-properties", 200));
  if (o.steps < 1 || o.runs < 1 || o.num_props < 1) throw usage_error("--decode-steps, --runs and --schema-properties must be positive");
  const auto tools = std::string("tests/tools/node_modules/@lenml/");
  o.vocabs = parse_vocabularies(a.str("vocabularies", "llama2=" + tools + "tokenizer-llama2/models,llama3.2=" + tools +
                                                          "tokenizer-llama3_2/models"));
  return o;
}

/// Compile time of a large schema: text to grammar, the automaton's start,
/// and the first token mask (the vocabulary walked from the start state).
void schema_compile(const vocab_model& m, const std::string& big, int num_props, int runs) {
  timings t(4); // to GBNF, to the automaton, the first mask, a mask in a string
  for (int r = 0; r <= runs; ++r) {
    auto t0 = clock_type::now();
    const auto text = grammar::json_schema_to_gbnf(big);
    const double s1 = seconds_since(t0);
    t0 = clock_type::now();
    grammar::compiled_grammar g(grammar::parse_gbnf(text), m.vocab);
    const double s2 = seconds_since(t0);
    std::vector<std::uint64_t> mask;
    t0 = clock_type::now();
    g.fill_mask(g.start(), 1 << 20, mask);
    const double s3 = seconds_since(t0);
    // Inside a string nearly every token is allowed: the whole trie is walked.
    const auto in_string = g.advance(g.start(), "{\"field_0\": \"");
    t0 = clock_type::now();
    g.fill_mask(in_string, 1 << 20, mask);
    const double s4 = seconds_since(t0);
    t.add(r, {s1, s2, s3, s4});
  }
  std::printf("  compile a %d-property schema (%zu bytes): to GBNF %.2f ms, GBNF to automaton %.2f ms;\n"
              "  a state's first (cold) mask: at the start %.2f ms, inside a string %.2f ms (then cached)\n",
              num_props, big.size(), t[0], t[1], t[2], t[3]);
}

/// Each batch size's plain and constrained tokens/s, and how much slower.
void print_decode_table(std::span<const int> batches, const std::vector<std::vector<double>>& rate,
                        const std::vector<double>& cold, int runs) {
  std::printf("  %5s %12s %18s %8s %28s\n", "batch", "plain tok/s", "constrained tok/s", "slower",
              "warm-up run (cold masks)");
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const auto p = 2 * i, c = 2 * i + 1;
    std::vector<double> ratio;
    for (int r = 0; r < runs; ++r) ratio.push_back(rate[c][static_cast<std::size_t>(r)] / rate[p][static_cast<std::size_t>(r)]);
    const double slower = 100.0 * (1.0 - median(ratio)); // fewer tokens/s, per run
    std::printf("  %5d %12.1f %18.1f %7.1f%% %19.1f tok/s (%s)\n", batches[i], median(rate[p]), median(rate[c]), slower,
                cold[c], slower <= 10.0 ? "goal <= 10%: met" : "goal <= 10%: NOT met");
  }
}

/// Decoding under the schema against plain decoding, at batch 1 and 32.
void compare_decoding(const vocab_model& m, const std::string& schema_gbnf, const grammar_options& o) {
  cpu_executor_options eo;
  eo.num_threads = o.threads;
  eo.grammars = std::make_shared<grammar::grammar_cache>(m.vocab);
  eo.num_sampled_ids = m.vocab->size();
  const int batches[] = {1, 32};
  const int per_seq = 8; // 128 positions per sequence
  eo.num_kv_blocks = 2 * (1 + 32) * per_seq;
  cpu_executor ex(m.weights, eo);
  sampling_params plain;
  plain.temperature = 0.0f;
  plain.max_tokens = 1 << 20;
  auto constrained = plain;
  constrained.grammar = schema_gbnf;
  std::vector<group> groups;
  request_id id = 1;
  block_id block = 0;
  for (const int b : batches)
    for (const auto* sp : {&plain, &constrained}) {
      groups.push_back(prepare(ex, b, id, block, per_seq, *sp));
      id += static_cast<request_id>(b);
      block += b * per_seq;
    }
  std::vector<std::vector<double>> rate(groups.size());
  std::vector<double> cold(groups.size());
  for (int r = 0; r <= o.runs; ++r)
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double x = decode(ex, groups[g], o.steps, per_seq * eo.block_size);
      if (r == 0) cold[g] = x;
      else rate[g].push_back(x);
    }
  print_decode_table(batches, rate, cold, o.runs);
  auto text = m.tok->decode(groups[1].first_output);
  if (text.size() > 160) text = text.substr(0, 160) + "...";
  std::printf("  a constrained answer's start (batch 1, greedy): %s\n", text.c_str());
}

} // namespace

auto run_bench_grammar(std::span<char* const> argv) -> int {
  const args a(argv, {"vocabularies", "threads", "decode-steps", "runs", "schema-properties", "tools"}, {});
  const auto o = parse_grammar_options(a);
  set_cpu_threads(o.threads);
  std::printf("structured output against plain decoding: stories110m's shape with random weights, %d thread%s,\n"
              "greedy, %d decode steps per run, the two kinds of request interleaved in every run;\n"
              "medians of %d runs after a warm-up run (which finds the grammar's masks cold)\n",
              o.threads, o.threads == 1 ? "" : "s", o.steps, o.runs);
  const auto schema_gbnf = grammar::json_schema_to_gbnf(decode_schema);
  const auto big = large_schema(o.num_props);
  for (const auto& [label, dir] : o.vocabs) {
    auto m = load(label, dir);
    std::printf("\n%s: %d tokens\n", label.c_str(), m.vocab->size());
    schema_compile(m, big, o.num_props, o.runs);
    optional_properties(m.vocab, o.runs);
    if (!o.agent_specs.empty()) agent_tools(o.agent_specs, m.vocab, o.runs);
    compare_decoding(m, schema_gbnf, o);
  }
  return 0;
}

} // namespace troupe::cli
