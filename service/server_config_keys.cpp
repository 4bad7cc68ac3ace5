#include "service/server_config_keys.hpp"

#include "settings/toml_settings.hpp"
#include "engine/cuda/cuda_backend.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "policies/loader.hpp"
#include "policies/registry.hpp"

#include <toml++/toml.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace troupe::config_keys {

namespace {

using settings::joined;
using settings::parse_byte_size;
using settings::show_number;
using settings::toml_byte_size;
using settings::toml_float;
using settings::toml_quoted;

/// "[a, b]": each element written by `write`.
template <class T, class Write>
auto toml_array(const std::vector<T>& items, Write write) -> std::string {
  std::string out;
  for (const auto& e : items) out += (out.empty() ? "" : ", ") + write(e);
  return "[" + out + "]";
}

/// "{ k = v, ... }" of (key, TOML text) pairs.
auto inline_table(const std::vector<std::pair<std::string_view, std::string>>& entries) -> std::string {
  std::string out;
  for (const auto& [k, v] : entries) out += (out.empty() ? "" : ", ") + std::string(k) + " = " + v;
  return "{ " + out + " }";
}

/// A key's field: a member of one of server_config's sections, e.g.
/// in(&server_config::router, &router_section::policy) (Owner: the section,
/// or a base of it, that declares the member).
template <class Section, class Owner, class M>
struct section_member {
  Section server_config::*section;
  M Owner::*member;
};
template <class Section, class Owner, class M>
auto in(Section server_config::*section, M Owner::*member) -> section_member<Section, Owner, M> {
  return {section, member};
}

template <class S, class O, class M>
auto ref(server_config& c, section_member<S, O, M> f) -> M& { return static_cast<O&>(c.*f.section).*f.member; }
template <class S, class O, class M>
auto ref(const server_config& c, section_member<S, O, M> f) -> const M& {
  return static_cast<const O&>(c.*f.section).*f.member;
}

/// The type a field holds.
template <class Field>
using field_type = std::remove_cvref_t<decltype(ref(std::declval<server_config&>(), std::declval<Field>()))>;

template <class Field>
auto integer(Field field, std::int64_t lo, std::optional<std::int64_t> hi = std::nullopt) -> key_io {
  using Int = field_type<Field>;
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            ref(c, field) = settings::integer_of<Int>(n, path, lo, hi);
          },
          [=](const server_config& c) { return std::to_string(ref(c, field)); }};
}

/// A duration in seconds: > 0, or >= 0 where zero_ok; finite either way.
template <class Field>
auto seconds(Field field, bool zero_ok) -> key_io {
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            ref(c, field) = settings::number(n, path, 0, !zero_ok);
          },
          [=](const server_config& c) { return toml_float(ref(c, field)); }};
}

/// A plain number >= lo (an integer is taken too).
template <class Field>
auto number(Field field, double lo) -> key_io {
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            ref(c, field) = settings::number(n, path, lo);
          },
          [=](const server_config& c) { return toml_float(ref(c, field)); }};
}

template <class Field>
auto boolean(Field field) -> key_io {
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            ref(c, field) = settings::boolean(n, path);
          },
          [=](const server_config& c) { return std::string(ref(c, field) ? "true" : "false"); }};
}

/// A size in bytes: an integer, or a string like "512MiB" (written so when it divides).
template <class Field>
auto byte_size(Field field, std::int64_t min) -> key_io {
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            std::int64_t bytes = 0;
            if (n.is_integer()) bytes = n.as_integer()->get();
            else if (n.is_string()) bytes = parse_byte_size(n.as_string()->get(), path);
            else wrong_type(path, "an integer or a size string like \"512MiB\"", n);
            ref(c, field) = settings::in_range<std::int64_t>(bytes, path, min, std::nullopt);
          },
          [=](const server_config& c) { return toml_byte_size(ref(c, field)); }};
}

/// Checks a string key's value; throws config_error naming `path`.
using text_check = std::function<void(const std::string& value, const std::string& path)>;

/// A string; any one where `check` is empty.
template <class Field>
auto text(Field field, text_check check = {}) -> key_io {
  return {[=](const toml::node& n, const std::string& path, server_config& c) {
            const auto& s = settings::string(n, path);
            if (check) check(s, path);
            ref(c, field) = s;
          },
          [=](const server_config& c) { return toml_quoted(ref(c, field)); }, true};
}

void non_empty(const std::string& s, const std::string& path) {
  if (s.empty()) fail(path, "must not be empty");
}

/// One of `known`: "unknown <kind> \"x\"; known: a, b".
auto one_of(std::string kind, std::vector<std::string> known) -> text_check {
  return [=](const std::string& s, const std::string& path) { settings::one_of(s, known, path, kind); };
}

/// One of the built-in policies of a kind, by name; where `paths`, a path
/// names an out-of-tree policy instead, loaded (and checked) at start-up.
auto policy_name(const std::string& kind, std::vector<std::string> known, bool paths = true) -> text_check {
  auto built_in = one_of(kind + " policy", std::move(known));
  return [=](const std::string& s, const std::string& path) {
    if (!(paths && policy::names_a_library(s))) built_in(s, path);
  };
}

void chat_template_name(const std::string& s, const std::string& path) {
  if (!s.empty() && !parse_chat_format(s) && !s.ends_with(".jinja"))
    fail(path, "unknown chat template \"" + s + "\"; known: " + chat_format_names());
}

/// "" (for a default), or an IPv4 or IPv6 address.
void ip_address(const std::string& s, const std::string& path) {
  unsigned char buf[sizeof(in6_addr)];
  if (!s.empty() && inet_pton(AF_INET, s.c_str(), buf) != 1 && inet_pton(AF_INET6, s.c_str(), buf) != 1)
    fail(path, "\"" + s + "\" is not an IP address");
}

/// Non-empty; "cpu"s, or "cuda:N"s, not both.
auto device_list() -> key_io {
  const auto apply = [](const toml::node& n, const std::string& path, server_config& c) {
    if (!n.is_array()) wrong_type(path, "an array of strings", n);
    const auto& list = *n.as_array();
    if (list.empty()) fail(path, "must not be empty");
    auto devices = std::vector<std::string>{};
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& name = settings::string(list[i], path + "[" + std::to_string(i) + "]");
      try {
        (void)parse_device(name);
      } catch (const std::invalid_argument& e) {
        fail(path, e.what());
      }
      devices.push_back(name);
    }
    const auto cpus = std::count(devices.begin(), devices.end(), "cpu");
    if (cpus != 0 && cpus != static_cast<std::ptrdiff_t>(devices.size()))
      fail(path, "\"cpu\" and CUDA devices cannot be mixed");
    c.engine.devices = std::move(devices);
  };
  return {apply, [](const server_config& c) { return toml_array(c.engine.devices, toml_quoted); }};
}

/// Numbers, each > 0 and finite.
template <class Field>
auto positive_numbers(Field field) -> key_io {
  const auto apply = [=](const toml::node& n, const std::string& path, server_config& c) {
    if (!n.is_array()) wrong_type(path, "an array of numbers", n);
    std::vector<double> out;
    std::size_t i = 0;
    for (const auto& e : *n.as_array()) {
      const auto at = path + "[" + std::to_string(i++) + "]";
      out.push_back(settings::number(e, at, 0, true));
    }
    ref(c, field) = std::move(out);
  };
  return {apply, [=](const server_config& c) { return toml_array(ref(c, field), toml_float); }};
}

/// An array of inline tables, each with these keys only; `read` reads one,
/// `write` writes one back as an inline table.
template <class T, class Field>
auto table_array(Field field, std::vector<std::string_view> keys,
                 void (*read)(const toml::table&, const std::string&, T&), std::string (*write)(const T&))
    -> key_io {
  const auto apply = [=](const toml::node& n, const std::string& path, server_config& c) {
    if (!n.is_array()) wrong_type(path, "an array of tables", n);
    std::vector<T> out;
    std::size_t i = 0;
    for (const auto& e : *n.as_array()) {
      const auto at = path + "[" + std::to_string(i++) + "]";
      if (!e.is_table()) wrong_type(at, "a table", e);
      for (const auto& [k, v] : *e.as_table())
        if (std::find(keys.begin(), keys.end(), k.str()) == keys.end())
          fail(at + "." + std::string(k.str()), "unknown key; known: " + joined(keys));
      T t{};
      read(*e.as_table(), at, t);
      out.push_back(std::move(t));
    }
    ref(c, field) = std::move(out);
  };
  return {apply, [=](const server_config& c) { return toml_array(ref(c, field), write); }};
}

auto string_at(const toml::table& t, const std::string& at, std::string_view key, bool required) -> std::string {
  const auto* n = t.get(key);
  const auto path = at + "." + std::string(key);
  if (n == nullptr) {
    if (required) fail(path, "missing");
    return {};
  }
  const auto& s = settings::string(*n, path);
  if (required && s.empty()) fail(path, "must not be empty");
  return s;
}

auto int_at(const toml::table& t, const std::string& at, std::string_view key, std::int32_t fallback,
            std::int64_t lo, std::optional<std::int64_t> hi) -> std::int32_t {
  const auto* n = t.get(key);
  if (n == nullptr) return fallback;
  const auto path = at + "." + std::string(key);
  return settings::integer_of<std::int32_t>(*n, path, lo, hi);
}

void read_model_entry(const toml::table& t, const std::string& at, model_entry& m) {
  const model_entry d{};
  m.dir = string_at(t, at, "dir", true);
  m.name = string_at(t, at, "name", false);
  m.version = string_at(t, at, "version", false);
  m.canary_percent = int_at(t, at, "canary_percent", d.canary_percent, 0, 100);
  m.replicas = int_at(t, at, "replicas", d.replicas, 1, std::nullopt);
}

/// The keys read_model_entry reads, those at their defaults left out.
auto write_model_entry(const model_entry& m) -> std::string {
  const model_entry d{};
  std::vector<std::pair<std::string_view, std::string>> out{{"dir", toml_quoted(m.dir)}};
  if (m.name != d.name) out.emplace_back("name", toml_quoted(m.name));
  if (m.version != d.version) out.emplace_back("version", toml_quoted(m.version));
  if (m.canary_percent != d.canary_percent) out.emplace_back("canary_percent", std::to_string(m.canary_percent));
  if (m.replicas != d.replicas) out.emplace_back("replicas", std::to_string(m.replicas));
  return inline_table(out);
}

void read_capability_rule(const toml::table& t, const std::string& at, capability_rule& r) {
  r.model = string_at(t, at, "model", true);
  r.small = string_at(t, at, "small", true);
  r.large = string_at(t, at, "large", true);
  r.max_prompt_tokens = int_at(t, at, "max_prompt_tokens", 0, 0, std::nullopt);
  r.max_tokens = int_at(t, at, "max_tokens", 0, 0, std::nullopt);
  if (const auto* n = t.get("tiers")) {
    if (!n->is_array()) wrong_type(at + ".tiers", "an array of strings", *n);
    for (const auto& e : *n->as_array()) r.tiers.push_back(settings::string(e, at + ".tiers"));
  }
}

auto write_capability_rule(const capability_rule& r) -> std::string {
  std::vector<std::pair<std::string_view, std::string>> out{
      {"model", toml_quoted(r.model)}, {"small", toml_quoted(r.small)}, {"large", toml_quoted(r.large)}};
  if (r.max_prompt_tokens != 0) out.emplace_back("max_prompt_tokens", std::to_string(r.max_prompt_tokens));
  if (r.max_tokens != 0) out.emplace_back("max_tokens", std::to_string(r.max_tokens));
  if (!r.tiers.empty()) out.emplace_back("tiers", toml_array(r.tiers, toml_quoted));
  return inline_table(out);
}

/// "none" (a fixed fleet), or a built-in autoscaling policy.
auto autoscaling_names() -> std::vector<std::string> {
  auto known = policy::autoscaling_policy_names();
  known.insert(known.begin(), "none");
  return known;
}

} // namespace

auto key_specs() -> const std::vector<key_spec>& {
  using c = server_config;
  static const auto specs = std::vector<key_spec>{
      {"server", "host", text(in(&c::server, &server_section::host), non_empty), "address to listen on"},
      {"server", "port", integer(in(&c::server, &server_section::port), 0, 65535), "0: pick a free port and print it"},
      {"server", "http_threads", integer(in(&c::server, &server_section::http_threads), 1), "HTTP I/O threads (>= 1)"},
      {"server", "max_body_bytes", integer(in(&c::server, &server_section::max_body_bytes), 1024), "larger request bodies get 413 (>= 1024)"},
      {"server", "idle_timeout_s", seconds(in(&c::server, &server_section::idle_timeout_s), false),
       "close a keep-alive connection idle, or a request read stalled, this long (> 0)"},
      {"server", "drain_timeout_s", seconds(in(&c::server, &server_section::drain_timeout_s), true),
       "on SIGTERM, in-flight streams get this long to finish (>= 0)"},
      {"server", "stall_timeout_s", seconds(in(&c::server, &server_section::stall_timeout_s), false),
       "/health/ready turns 503 when work is queued and no step finished for this long (> 0)"},
      {"server", "admin_api", boolean(in(&c::server, &server_section::admin_api)),
       "/admin/replicas: list the replicas, drain or resume one, inject faults (for tests; keep it off)"},
      {"server", "tenants", text(in(&c::server, &server_section::tenants_file)),
       "\"\": no API keys, anyone may call; else a tenants file (like config/tenants.example.toml):\n"
       "keys, quotas, tiers. Reloaded on SIGHUP and when the file changes."},
      {"server", "tenants_poll_s", seconds(in(&c::server, &server_section::tenants_poll_s), true),
       "how often the tenants file is checked for changes (0: on SIGHUP only)"},
      {"server", "response_cache", byte_size(in(&c::server, &server_section::response_cache_bytes), 0),
       "the exact-repeat response cache (tenants that opt in; deterministic requests); 0: off"},
      {"server", "response_cache_ttl_s", seconds(in(&c::server, &server_section::response_cache_ttl_s), false),
       "an answer is served from the cache for this long (> 0)"},
      {"server", "responses_store", byte_size(in(&c::server, &server_section::responses_store_bytes), 0),
       "POST /v1/responses: the responses kept (store: true) for previous_response_id and\n"
       "GET /v1/responses/{id}, per tenant; the least recently used go first past this; 0: off"},
      {"server", "reasoning_key_file", text(in(&c::server, &server_section::reasoning_key_file)),
       "a file of 64 hex digits: the key that seals reasoning handed to clients (Anthropic's thinking\n"
       "signature, the Responses API's encrypted_content); \"\": a random key per start (servers that\n"
       "share sessions share a file)"},
      {"server", "unknown_fields",
       text(in(&c::server, &server_section::unknown_fields), one_of("unknown_fields setting", {"accept", "refuse"})),
       "a request field in nobody's table (docs/api.md): \"accept\" it, shown (a warning once per name,\n"
       "troupe_unknown_fields_total, a troupe-unknown-fields header), or \"refuse\" it (400 unknown_parameter)"},
      {"server", "responses_ttl_s", seconds(in(&c::server, &server_section::responses_ttl_s), false),
       "a stored response is kept for this long (> 0)"},
      {"server", "websocket_max_buffered", byte_size(in(&c::server, &server_section::websocket_max_buffered_bytes), 1024),
       "unsent bytes a WebSocket may hold; past it, the request writing is cancelled"},
      {"server", "websocket_idle_timeout_s", seconds(in(&c::server, &server_section::websocket_idle_timeout_s), false),
       "a silent WebSocket is pinged at half of this, and closed at it (> 0)"},
      {"server", "metrics_host", text(in(&c::server, &server_section::metrics_host), ip_address),
       "where metrics_port listens: \"\": host; else an IP address (an internal one)"},
      {"server", "metrics_port", integer(in(&c::server, &server_section::metrics_port), -1, 65535),
       "-1: /metrics on port; else /metrics (with /health) only on this port, and port answers it 404;\n"
       "0: any free port (printed). Its series name tenants: keep them off a public address."},

      {"model", "dir", text(in(&c::model, &model_section::dir), non_empty),
       "Hugging Face model directory (`troupe serve DIR` sets it; checked when the model loads)"},
      {"model", "served_model_name", text(in(&c::model, &model_section::served_model_name)),
       "the \"model\" name clients use; \"\": the directory's last path component"},
      {"model", "chat_template", text(in(&c::model, &model_section::chat_template), chat_template_name),
       "\"\": from tokenizer_config.json; or " + chat_format_names()},
      {"model", "tool_parser",
       text(in(&c::model, &model_section::tool_parser), one_of("tool parser", {"auto", "none", "hermes", "llama3_json", "mistral"})),
       "the format of the model's tool calls, parsed into tool_calls: \"auto\" reads it from the chat\n"
       "template (<tool_call>: hermes, [TOOL_CALLS]: mistral, <|python_tag|> or ipython: llama3_json);\n"
       "\"none\": requests with tools are refused"},
      {"model", "reasoning_parser",
       text(in(&c::model, &model_section::reasoning_parser), one_of("reasoning parser", {"auto", "none", "think"})),
       "how a reasoning model's thinking is split from its answer into reasoning_content: \"think\"\n"
       "(<think>...</think>: Qwen3, DeepSeek-R1 distills); \"auto\": think where the chat template\n"
       "writes <think>; \"none\": the answer is left whole"},
      {"model", "version", text(in(&c::model, &model_section::version)),
       "the x-model-version tag on every response; \"\": name@content hash"},
      {"model", "more",
       table_array<model_entry>(in(&c::model, &model_section::more), {"dir", "name", "version", "canary_percent", "replicas"},
                                read_model_entry, write_model_entry),
       "more models served at once (each its own replicas, KV cache and router), routed by\n"
       "\"model\". An entry with a name already served is a new version of it taking\n"
       "canary_percent of its traffic, sticky per session:\n"
       "  more = [{ dir = \"models/small\", name = \"small\" },\n"
       "          { dir = \"models/tiny-v2\", name = \"tiny\", version = \"v2\", canary_percent = 10 }]"},

      {"engine", "executor", text(in(&c::engine, &engine_section::executor), one_of("executor", {"cpu", "zero"})),
       "\"cpu\", or \"zero\": returns tokens without running the model"},
      {"engine", "zero_step_us", integer(in(&c::engine, &engine_section::zero_step_us), 0),
       "zero executor only: simulated step time in microseconds (>= 0)"},
      {"engine", "devices", device_list(),
       "\"cpu\"s (each its own executor, KV cache and memory manager), or \"cuda:N\" devices (needs "
       "libtroupe_cuda.so)"},
      {"engine", "replicas", integer(in(&c::engine, &engine_section::replicas), 1), "scheduler + executor replicas per device (>= 1)"},
      {"engine", "threads", integer(in(&c::engine, &engine_section::threads), 0), "compute threads per executor; 0: all cores"},
      {"engine", "huge_pages", boolean(in(&c::engine, &engine_section::huge_pages)), "copy the weights into 2 MiB pages, packed for the CPU kernels (faster decode, more memory)"},
      {"engine", "jump_forward", boolean(in(&c::engine, &engine_section::jump_forward)),
       "structured output: the tokens a grammar forces (a JSON key, a closing brace) are appended at once and computed "
       "in the next step as one chunk, not sampled one step each (CPU backend; not for requests asking for logprobs)"},
      {"engine", "step_log", text(in(&c::engine, &engine_section::step_log)),
       "a file for every scheduler event and step (troupe sim fits and replays it); \"\": none"},
      {"engine", "dtype", text(in(&c::engine, &engine_section::dtype), one_of("dtype", {"bfloat16", "float32"})),
       "on a CUDA device: \"bfloat16\" or \"float32\" weights and activations (the CPU computes in float32)"},
      {"engine", "weight_dtype", text(in(&c::engine, &engine_section::weight_dtype), one_of("weight dtype", {"auto", "q8_0", "q4_k"})),
       "\"auto\": the matrices as the model stores them; \"q8_0\" or \"q4_k\": F32/F16/BF16 matrices\n"
       "quantized at start-up (CPU only), as a GGUF file of that type would hold them"},
      {"engine", "cuda_graphs", boolean(in(&c::engine, &engine_section::cuda_graphs)),
       "on a CUDA device: decode steps replay CUDA graphs captured per padded batch size"},
      {"engine", "tensor_parallel_size", integer(in(&c::engine, &engine_section::tensor_parallel_size), 1),
       "CUDA: the listed devices form one tensor-parallel executor (NCCL); must equal their count"},

      {"scheduler", "max_num_seqs", integer(in(&c::scheduler, &scheduler_config::max_num_seqs), 1), "sequences in one batch (>= 1)"},
      {"scheduler", "max_num_batched_tokens", integer(in(&c::scheduler, &scheduler_config::max_num_batched_tokens), 1),
       "tokens in one step, prefill chunks included (>= 1)"},
      {"scheduler", "long_prefill_token_threshold", integer(in(&c::scheduler, &scheduler_config::long_prefill_token_threshold), 0),
       "a request's prefill tokens in one step, at most (0: the whole budget); long prompts then\n"
       "leave room in each step for new requests (their TTFT under a flood)"},
      {"scheduler", "max_num_partial_prefills", integer(in(&c::scheduler, &scheduler_config::max_num_partial_prefills), 0),
       "prompts whose prefill spans steps, running at once (0: no limit); with the key above,\n"
       "a flood of long prompts cannot take every step's budget from new requests"},
      {"scheduler", "prefill_chunk_cost", number(in(&c::scheduler, &scheduler_config::prefill_chunk_cost), 0),
       "a step that decodes takes prefill tokens costing about this many decode-only steps, as\n"
       "measured, and a running prefill leaves half the rest to waiting requests (0: no pacing);\n"
       "1 keeps streams at half their token rate or more while a long prompt prefills"},
      {"scheduler", "block_size", integer(in(&c::scheduler, &scheduler_config::block_size), 1, 1024), "tokens per KV block (1..1024)"},
      {"scheduler", "kv_memory", byte_size(in(&c::scheduler, &scheduler_section::kv_memory_bytes), 1),
       "KV cache size: bytes, or a string with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"},
      {"scheduler", "kv_cache_dtype",
       text(in(&c::scheduler, &scheduler_section::kv_cache_dtype), one_of("KV cache dtype", {"auto", "f32", "bf16", "f16", "q8_0"})),
       "how cached keys and values are stored: \"f32\", \"bf16\", \"f16\" or \"q8_0\" (CPU; q8_0 needs\n"
       "head_dim a multiple of 32); \"auto\": f32 on the CPU, engine.dtype on CUDA. kv_memory then\n"
       "holds 1x, 2x, 2x or 3.8x the f32 cache's tokens"},
      {"scheduler", "max_waiting_requests", integer(in(&c::scheduler, &scheduler_config::max_waiting_requests), 1),
       "queued requests beyond this get 429 (>= 1)"},
      {"scheduler", "max_waiting_tokens", integer(in(&c::scheduler, &scheduler_config::max_waiting_tokens), 1),
       "cap on the tokens of all queued requests (>= 1)"},
      {"scheduler", "max_model_len", integer(in(&c::scheduler, &scheduler_config::max_model_len), 0),
       "longest prompt + output in tokens; 0: the model's max_position_embeddings"},
      {"scheduler", "max_input_tokens", integer(in(&c::scheduler, &scheduler_config::max_input_tokens), 0),
       "per-request prompt limit in tokens (400 above); 0: max_model_len"},
      {"scheduler", "max_output_tokens", integer(in(&c::scheduler, &scheduler_config::max_output_tokens), 0),
       "per-request max_tokens limit (400 above); 0: up to the context"},
      {"scheduler", "policy", text(in(&c::scheduler, &scheduler_config::policy), policy_name("scheduling", policy::scheduling_policy_names())),
       "scheduling policy: " + joined(policy::scheduling_policy_names()) + "; or a plug-in's path"},
      {"scheduler", "eviction", text(in(&c::scheduler, &scheduler_config::eviction), policy_name("eviction", policy::eviction_policy_names())),
       "prefix-cache eviction policy: " + joined(policy::eviction_policy_names()) + "; or a plug-in's path"},
      {"scheduler", "enable_prefix_caching", boolean(in(&c::scheduler, &scheduler_config::enable_prefix_caching)),
       "share the KV blocks of equal prompt prefixes (per tenant)"},
      {"scheduler", "watermark_blocks", integer(in(&c::scheduler, &scheduler_config::watermark_blocks), 0),
       "KV blocks admissions leave free for running requests to grow (>= 0)"},
      {"scheduler", "preemption_mode", text(in(&c::scheduler, &scheduler_config::preemption_mode), one_of("preemption mode", {"recompute", "swap"})),
       "a preempted request's KV: \"recompute\" it later, or \"swap\" it to host memory"},
      {"scheduler", "swap_space", byte_size(in(&c::scheduler, &scheduler_section::swap_space_bytes), 0),
       "host memory per device for preemption_mode \"swap\" (bytes or a size string)"},

      {"router", "policy", text(in(&c::router, &router_section::policy), policy_name("routing", policy::routing_policy_names())),
       "routing policy: " + joined(policy::routing_policy_names()) + "; or a plug-in's path" +
           "\n(consistent_hash: session affinity by x-session-id, else user, else the conversation's opening)"},
      {"router", "weights", positive_numbers(in(&c::router, &router_section::weights)),
       "weighted's capacity per replica index (local replicas first), e.g. [2.0, 1.0]; the rest 1"},
      {"router", "health_check_interval_s", seconds(in(&c::router, &router_section::health_check_interval_s), false),
       "each replica gets a deep check (a one-token inference) this often"},
      {"router", "health_check_timeout_s", seconds(in(&c::router, &router_section::health_check_timeout_s), false),
       "a check not answered within this fails, unless the replica finished steps meanwhile (busy)"},
      {"router", "unhealthy_after", integer(in(&c::router, &router_section::unhealthy_after), 1),
       "consecutive failed checks take a replica out of rotation (its requests move elsewhere)"},
      {"router", "healthy_after", integer(in(&c::router, &router_section::healthy_after), 1), "consecutive passed checks bring it back"},
      {"router", "max_retries", integer(in(&c::router, &router_section::max_retries), 0),
       "a request whose replica fails before its first token is retried on another this often"},
      {"router", "worker_port", integer(in(&c::router, &router_section::worker_port), -1, 65535),
       "remote replicas join here (troupe worker --join HOST:PORT, host: server.host); -1: none, 0: any free "
       "port"},
      {"router", "worker_secret_file", text(in(&c::router, &router_section::worker_secret_file)),
       "a file holding the fleet's secret (at least 16 bytes), needed with worker_port and by every worker:\n"
       "a worker proves it knows it (HMAC-SHA256 of a one-use challenge); it is never sent or logged"},
      {"router", "worker_tls_cert", text(in(&c::router, &router_section::worker_tls_cert)),
       "with worker_tls_key and worker_tls_ca: the link to the workers is mutual TLS; this node's certificate (PEM)"},
      {"router", "worker_tls_key", text(in(&c::router, &router_section::worker_tls_key)), "the private key of worker_tls_cert (PEM)"},
      {"router", "worker_tls_ca", text(in(&c::router, &router_section::worker_tls_ca)),
       "the CA certificate (PEM) that every node's certificate must be signed by; \"\": no TLS"},
      {"router", "capability_rules",
       table_array<capability_rule>(in(&c::router, &router_section::capability_rules),
                                    {"model", "small", "large", "max_prompt_tokens", "max_tokens", "tiers"},
                                    read_capability_rule, write_capability_rule),
       "capability routing: requests for `model` go to `small` when the prompt has at most\n"
       "max_prompt_tokens tokens and max_tokens is given and at most max_tokens, or their tier\n"
       "(x-troupe-tier header) is listed; else to `large`:\n"
       "  capability_rules = [{ model = \"auto\", small = \"small\", large = \"tiny\",\n"
       "                        max_prompt_tokens = 256, max_tokens = 128, tiers = [\"free\"] }]"},

      {"autoscaler", "policy", text(in(&c::autoscaler, &autoscaler_config::policy), policy_name("autoscaling", autoscaling_names(), false)),
       "\"none\" (a fixed fleet), " + joined(policy::autoscaling_policy_names())},
      {"autoscaler", "target", number(in(&c::autoscaler, &autoscaler_config::target), 0),
       "the policy's target: requests per replica, TTFT seconds, tokens/s per replica (0: its default)"},
      {"autoscaler", "min_replicas", integer(in(&c::autoscaler, &autoscaler_config::min_replicas), 1), "fewest replicas (>= 1)"},
      {"autoscaler", "max_replicas", integer(in(&c::autoscaler, &autoscaler_config::max_replicas), 1, 4096), "most replicas (>= min_replicas, <= 4096)"},
      {"autoscaler", "interval_s", seconds(in(&c::autoscaler, &autoscaler_config::interval_s), false), "a decision this often"},
      {"autoscaler", "scale_in_delay_s", seconds(in(&c::autoscaler, &autoscaler_config::scale_in_delay_s), true),
       "the wanted count stays below the fleet this long, with no scaling meanwhile,\nbefore a scale-in (one drained replica at a time)"},
      {"autoscaler", "warm_pool", integer(in(&c::autoscaler, &autoscaler_config::warm_pool), 0),
       "loaded idle replicas kept out of rotation, which take a burst at once"},

      {"actors", "tokenizers", integer(in(&c::actors, &actors_section::tokenizers), 0), "tokenizer actors; 0: one per core"},
      {"actors", "caf_threads", integer(in(&c::actors, &actors_section::caf_threads), 0), "CAF scheduler threads; 0: one per core"},
  };
  return specs;
}


} // namespace troupe::config_keys
