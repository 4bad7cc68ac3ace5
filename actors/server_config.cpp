#include "actors/server_config.hpp"

#include "actors/config_toml.hpp"

#include "policies/registry.hpp"

#include <algorithm>

#include "engine/cuda_backend.hpp"
#include "engine/tokenizer/chat_template.hpp"

#include <toml++/toml.h>

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <system_error>

namespace troupe {
namespace {

[[noreturn]] void fail(const std::string& where, std::string_view reason) {
  throw config_error(where + ": " + std::string(reason));
}


[[noreturn]] void wrong_type(const std::string& path, std::string_view expected, const toml::node& n) {
  fail(path, "expected " + std::string(expected) + ", got " + toml_type_name(n));
}

// Shortest text that reads back as v, so "got 0.5" shows what was written.
auto show(double v) -> std::string {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

auto as_integer(const toml::node& n, const std::string& path) -> std::int64_t {
  if (!n.is_integer()) wrong_type(path, "an integer", n);
  return n.as_integer()->get();
}

/// A number (an integer is taken too). Not node::value<double>(), which
/// refuses integers a double cannot hold exactly.
auto as_number(const toml::node& n, const std::string& path) -> double {
  if (!n.is_number()) wrong_type(path, "a number", n);
  return n.is_integer() ? static_cast<double>(n.as_integer()->get()) : n.as_floating_point()->get();
}

/// "a, b, c".
template <class Range>
auto joined(const Range& names) -> std::string {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

auto as_string(const toml::node& n, const std::string& path) -> const std::string& {
  if (!n.is_string()) wrong_type(path, "a string", n);
  return n.as_string()->get();
}

/// v, unless it lies outside [lo, hi] (hi defaults to Int's maximum).
template <class Int>
auto in_range(std::int64_t v, const std::string& path, std::int64_t lo, std::optional<std::int64_t> hi) -> Int {
  if (hi) {
    if (v < lo || v > *hi)
      fail(path, "must be in [" + std::to_string(lo) + ", " + std::to_string(*hi) + "], got " + std::to_string(v));
  } else if (v < lo) {
    fail(path, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  }
  if constexpr (sizeof(Int) < sizeof(std::int64_t)) {
    constexpr auto max = std::int64_t{std::numeric_limits<Int>::max()};
    if (v > max) fail(path, "must be <= " + std::to_string(max) + ", got " + std::to_string(v));
  }
  return static_cast<Int>(v);
}

/// "512MiB", "4GB", "100 MB", "1024": a count of bytes, exact (no fractions).
auto parse_byte_size(std::string_view text, const std::string& path) -> std::int64_t {
  struct unit { std::string_view name; std::int64_t bytes; };
  constexpr std::array units = {
      unit{"", 1},           unit{"B", 1},          unit{"KB", 1'000},     unit{"MB", 1'000'000},
      unit{"GB", 1'000'000'000}, unit{"TB", 1'000'000'000'000}, unit{"KiB", std::int64_t{1} << 10},
      unit{"MiB", std::int64_t{1} << 20}, unit{"GiB", std::int64_t{1} << 30}, unit{"TiB", std::int64_t{1} << 40}};
  const auto bad = [&] {
    fail(path, "cannot read \"" + std::string(text) +
                   "\" as a size: an integer with an optional unit B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  };
  auto s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty() || s.front() < '0' || s.front() > '9') bad();
  std::int64_t count = 0;
  auto [rest, ec] = std::from_chars(s.data(), s.data() + s.size(), count);
  if (ec != std::errc{}) bad();
  auto suffix = s.substr(static_cast<std::size_t>(rest - s.data()));
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  for (const auto& u : units) {
    if (u.name != suffix) continue;
    if (count > std::numeric_limits<std::int64_t>::max() / u.bytes)
      fail(path, "\"" + std::string(text) + "\" is too large");
    return count * u.bytes;
  }
  bad();
  return 0; // not reached: bad() throws
}

using apply_fn = std::function<void(const toml::node&, const std::string& path, server_config&)>;

template <class Int>
auto integer(Int server_config::*field, std::int64_t lo, std::optional<std::int64_t> hi = std::nullopt)
    -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    c.*field = in_range<Int>(as_integer(n, path), path, lo, hi);
  };
}

/// A duration in seconds: > 0, or >= 0 where zero_ok; finite either way.
auto seconds(double server_config::*field, bool zero_ok) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    const auto v = as_number(n, path);
    if (zero_ok ? !(v >= 0) : !(v > 0)) fail(path, (zero_ok ? "must be >= 0, got " : "must be > 0, got ") + show(v));
    if (!std::isfinite(v)) fail(path, "must be finite, got " + show(v));
    c.*field = v;
  };
}

auto text(std::string server_config::*field, bool allow_empty) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    const auto& s = as_string(n, path);
    if (s.empty() && !allow_empty) fail(path, "must not be empty");
    c.*field = s;
  };
}

void apply_chat_template(const toml::node& n, const std::string& path, server_config& c) {
  const auto& s = as_string(n, path);
  if (!s.empty() && !parse_chat_format(s))
    fail(path, "unknown chat template \"" + s + "\"; known: " + chat_format_names());
  c.chat_template = s;
}

void apply_executor(const toml::node& n, const std::string& path, server_config& c) {
  const auto& s = as_string(n, path);
  if (s != "cpu" && s != "zero") fail(path, "unknown executor \"" + s + "\"; known: cpu, zero");
  c.executor = s;
}

void apply_devices(const toml::node& n, const std::string& path, server_config& c) {
  if (!n.is_array()) wrong_type(path, "an array of strings", n);
  const auto& list = *n.as_array();
  if (list.empty()) fail(path, "must not be empty");
  auto devices = std::vector<std::string>{};
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& name = as_string(list[i], path + "[" + std::to_string(i) + "]");
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
  c.devices = std::move(devices);
}

void apply_weights(const toml::node& n, const std::string& path, server_config& c) {
  if (!n.is_array()) wrong_type(path, "an array of numbers", n);
  std::vector<double> out;
  std::size_t i = 0;
  for (const auto& e : *n.as_array()) {
    const auto at = path + "[" + std::to_string(i++) + "]";
    const auto v = as_number(e, at);
    if (!(v > 0) || !std::isfinite(v)) fail(at, "must be > 0, got " + show(v));
    out.push_back(v);
  }
  c.router_weights = std::move(out);
}

void apply_dtype(const toml::node& n, const std::string& path, server_config& c) {
  const auto& s = as_string(n, path);
  if (s != "bfloat16" && s != "float32") fail(path, "unknown dtype \"" + s + "\"; known: bfloat16, float32");
  c.dtype = s;
}

/// One of the built-in policies of a kind, by name; where `paths`, a path
/// names an out-of-tree policy instead, loaded (and checked) at start-up.
auto policy_name(std::string server_config::*field, const char* kind, std::vector<std::string> known,
                 bool paths = true) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    const auto& s = as_string(n, path);
    if (!(paths && s.find('/') != std::string::npos) && std::find(known.begin(), known.end(), s) == known.end())
      fail(path, "unknown " + std::string(kind) + " policy \"" + s + "\"; known: " + joined(known));
    c.*field = s;
  };
}

auto boolean(bool server_config::*field) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    if (!n.is_boolean()) wrong_type(path, "a boolean", n);
    c.*field = n.as_boolean()->get();
  };
}

/// A size in bytes: an integer, or a string like "512MiB".
auto byte_size(std::int64_t server_config::*field, std::int64_t min) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    std::int64_t bytes = 0;
    if (n.is_integer()) bytes = n.as_integer()->get();
    else if (n.is_string()) bytes = parse_byte_size(n.as_string()->get(), path);
    else wrong_type(path, "an integer or a size string like \"512MiB\"", n);
    c.*field = in_range<std::int64_t>(bytes, path, min, std::nullopt);
  };
}

// An array of inline tables, each with these keys only; `each` reads one.
template <class T>
auto table_array(std::vector<T> server_config::*field, std::vector<std::string_view> keys,
                 void (*each)(const toml::table&, const std::string&, T&)) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
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
      each(*e.as_table(), at, t);
      out.push_back(std::move(t));
    }
    c.*field = std::move(out);
  };
}

auto string_at(const toml::table& t, const std::string& at, std::string_view key, bool required) -> std::string {
  const auto* n = t.get(key);
  const auto path = at + "." + std::string(key);
  if (n == nullptr) {
    if (required) fail(path, "missing");
    return {};
  }
  const auto& s = as_string(*n, path);
  if (required && s.empty()) fail(path, "must not be empty");
  return s;
}

auto int_at(const toml::table& t, const std::string& at, std::string_view key, std::int32_t fallback,
            std::int64_t lo, std::optional<std::int64_t> hi) -> std::int32_t {
  const auto* n = t.get(key);
  if (n == nullptr) return fallback;
  const auto path = at + "." + std::string(key);
  return in_range<std::int32_t>(as_integer(*n, path), path, lo, hi);
}

void read_model_entry(const toml::table& t, const std::string& at, model_entry& m) {
  m.dir = string_at(t, at, "dir", true);
  m.name = string_at(t, at, "name", false);
  m.version = string_at(t, at, "version", false);
  m.canary_percent = int_at(t, at, "canary_percent", 0, 0, 100);
  m.replicas = int_at(t, at, "replicas", 1, 1, std::nullopt);
}

void read_capability_rule(const toml::table& t, const std::string& at, capability_rule& r) {
  r.model = string_at(t, at, "model", true);
  r.small = string_at(t, at, "small", true);
  r.large = string_at(t, at, "large", true);
  r.max_prompt_tokens = int_at(t, at, "max_prompt_tokens", 0, 0, std::nullopt);
  r.max_tokens = int_at(t, at, "max_tokens", 0, 0, std::nullopt);
  if (const auto* n = t.get("tiers")) {
    if (!n->is_array()) wrong_type(at + ".tiers", "an array of strings", *n);
    for (const auto& e : *n->as_array()) r.tiers.push_back(as_string(e, at + ".tiers"));
  }
}

/// "none" (a fixed fleet), or a built-in autoscaling policy.
auto autoscaling_names() -> std::vector<std::string> {
  auto known = policy::autoscaling_policy_names();
  known.insert(known.begin(), "none");
  return known;
}

// A plain number >= lo (an integer is taken too).
auto number(double server_config::*field, double lo) -> apply_fn {
  return [=](const toml::node& n, const std::string& path, server_config& c) {
    const auto v = as_number(n, path);
    if (!(v >= lo)) fail(path, "must be >= " + show(lo) + ", got " + show(v));
    c.*field = v;
  };
}

void apply_preemption_mode(const toml::node& n, const std::string& path, server_config& c) {
  const auto& s = as_string(n, path);
  if (s != "recompute" && s != "swap") fail(path, "unknown preemption mode \"" + s + "\"; known: recompute, swap");
  c.preemption_mode = s;
}

struct key_spec {
  std::string_view section;
  std::string_view key;
  apply_fn apply;
  bool takes_string = false; ///< an override's text is always the plain string
};

/// Every key the file may hold, in config/default.toml's order.
auto key_specs() -> const std::vector<key_spec>& {
  using c = server_config;
  static const auto specs = std::vector<key_spec>{
      {"server", "host", text(&c::host, false), true},
      {"server", "port", integer(&c::port, 0, 65535)},
      {"server", "http_threads", integer(&c::http_threads, 1)},
      {"server", "max_body_bytes", integer(&c::max_body_bytes, 1024)},
      {"server", "idle_timeout_s", seconds(&c::idle_timeout_s, false)},
      {"server", "drain_timeout_s", seconds(&c::drain_timeout_s, true)},
      {"server", "stall_timeout_s", seconds(&c::stall_timeout_s, false)},
      {"server", "admin_api", boolean(&c::admin_api)},
      {"server", "tenants", text(&c::tenants_file, true), true},
      {"server", "tenants_poll_s", seconds(&c::tenants_poll_s, true)},
      {"server", "response_cache", byte_size(&c::response_cache_bytes, 0)},
      {"server", "response_cache_ttl_s", seconds(&c::response_cache_ttl_s, false)},
      {"server", "websocket_max_buffered", byte_size(&c::websocket_max_buffered_bytes, 1024)},
      {"server", "websocket_idle_timeout_s", seconds(&c::websocket_idle_timeout_s, false)},
      {"model", "dir", text(&c::model_dir, false), true},
      {"model", "served_model_name", text(&c::served_model_name, true), true},
      {"model", "chat_template", apply_chat_template, true},
      {"model", "version", text(&c::model_version, true), true},
      {"model", "more", table_array<model_entry>(&c::more_models, {"dir", "name", "version", "canary_percent", "replicas"},
                                                  read_model_entry)},
      {"engine", "executor", apply_executor, true},
      {"engine", "zero_step_us", integer(&c::zero_step_us, 0)},
      {"engine", "devices", apply_devices},
      {"engine", "replicas", integer(&c::replicas, 1)},
      {"engine", "threads", integer(&c::threads, 0)},
      {"engine", "huge_pages", boolean(&c::huge_pages)},
      {"engine", "step_log", text(&c::step_log, true), true},
      {"engine", "dtype", apply_dtype, true},
      {"engine", "cuda_graphs", boolean(&c::cuda_graphs)},
      {"engine", "tensor_parallel_size", integer(&c::tensor_parallel_size, 1)},
      {"scheduler", "max_num_seqs", integer(&c::max_num_seqs, 1)},
      {"scheduler", "max_num_batched_tokens", integer(&c::max_num_batched_tokens, 1)},
      {"scheduler", "long_prefill_token_threshold", integer(&c::long_prefill_token_threshold, 0)},
      {"scheduler", "max_num_partial_prefills", integer(&c::max_num_partial_prefills, 0)},
      {"scheduler", "block_size", integer(&c::block_size, 1, 1024)},
      {"scheduler", "kv_memory", byte_size(&c::kv_memory_bytes, 1)},
      {"scheduler", "max_waiting_requests", integer(&c::max_waiting_requests, 1)},
      {"scheduler", "max_waiting_tokens", integer(&c::max_waiting_tokens, 1)},
      {"scheduler", "max_model_len", integer(&c::max_model_len, 0)},
      {"scheduler", "max_input_tokens", integer(&c::max_input_tokens, 0)},
      {"scheduler", "max_output_tokens", integer(&c::max_output_tokens, 0)},
      {"scheduler", "policy", policy_name(&c::policy, "scheduling", policy::scheduling_policy_names()), true},
      {"scheduler", "eviction", policy_name(&c::eviction, "eviction", policy::eviction_policy_names()), true},
      {"scheduler", "enable_prefix_caching", boolean(&c::enable_prefix_caching)},
      {"scheduler", "watermark_blocks", integer(&c::watermark_blocks, 0)},
      {"scheduler", "preemption_mode", apply_preemption_mode, true},
      {"scheduler", "swap_space", byte_size(&c::swap_space_bytes, 0)},
      {"router", "policy", policy_name(&c::router_policy, "routing", policy::routing_policy_names()), true},
      {"router", "weights", apply_weights},
      {"router", "health_check_interval_s", seconds(&c::health_check_interval_s, false)},
      {"router", "health_check_timeout_s", seconds(&c::health_check_timeout_s, false)},
      {"router", "unhealthy_after", integer(&c::unhealthy_after, 1)},
      {"router", "healthy_after", integer(&c::healthy_after, 1)},
      {"router", "max_retries", integer(&c::max_retries, 0)},
      {"router", "worker_port", integer(&c::worker_port, -1, 65535)},
      {"router", "capability_rules",
       table_array<capability_rule>(&c::capability_rules,
                                    {"model", "small", "large", "max_prompt_tokens", "max_tokens", "tiers"},
                                    read_capability_rule)},
      {"autoscaler", "policy", policy_name(&c::autoscaler_policy, "autoscaling", autoscaling_names(), false), true},
      {"autoscaler", "target", number(&c::autoscaler_target, 0)},
      {"autoscaler", "min_replicas", integer(&c::min_replicas, 1)},
      {"autoscaler", "max_replicas", integer(&c::max_replicas, 1)},
      {"autoscaler", "interval_s", seconds(&c::autoscaler_interval_s, false)},
      {"autoscaler", "scale_in_delay_s", seconds(&c::scale_in_delay_s, true)},
      {"autoscaler", "warm_pool", integer(&c::warm_pool, 0)},
      {"actors", "tokenizers", integer(&c::tokenizers, 0)},
      {"actors", "caf_threads", integer(&c::caf_threads, 0)},
  };
  return specs;
}

/// Throws "<section>: unknown section; known: ..." unless some key lives there.
void check_section(std::string_view section) {
  auto known = std::string{};
  for (const auto& s : key_specs()) {
    if (s.section == section) return;
    if (known.find(s.section) == std::string::npos) known += (known.empty() ? "" : ", ") + std::string(s.section);
  }
  fail(std::string(section), "unknown section; known: " + known);
}

/// The spec of section.key; throws "<section>.<key>: unknown key; known: ...".
auto find_key(std::string_view section, std::string_view key) -> const key_spec& {
  check_section(section);
  auto known = std::string{};
  for (const auto& s : key_specs()) {
    if (s.section != section) continue;
    if (s.key == key) return s;
    known += (known.empty() ? "" : ", ") + std::string(s.key);
  }
  fail(std::string(section) + "." + std::string(key), "unknown key; known: " + known);
}

void apply_override(const config_override& o, server_config& c) {
  const auto& [path, value] = o;
  const auto dot = path.find('.');
  if (dot == std::string::npos) fail(path, "an override names section.key");
  const auto& spec = find_key(std::string_view(path).substr(0, dot), std::string_view(path).substr(dot + 1));
  // Parsed as the right-hand side of one key; anything else (a bare word, a
  // path, text that smuggles in more keys) is the plain string.
  auto doc = toml::table{};
  try {
    doc = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
  }
  const toml::node* node = doc.size() == 1 ? doc.get("v") : nullptr;
  if (node == nullptr || (spec.takes_string && !node->is_string())) {
    doc = toml::table{};
    doc.insert_or_assign("v", value);
    node = doc.get("v");
  }
  spec.apply(*node, path, c);
}

} // namespace

auto parse_server_config(std::string_view toml_text, std::string_view origin,
                         const std::vector<config_override>& overrides) -> server_config {
  const auto root = parse_toml(toml_text, origin);
  auto config = server_config{};
  for (const auto& [section_key, section] : root) {
    const auto section_name = std::string(section_key.str());
    check_section(section_name);
    if (!section.is_table()) wrong_type(section_name, "a table", section);
    for (const auto& [key, value] : *section.as_table())
      find_key(section_name, key.str()).apply(value, section_name + "." + std::string(key.str()), config);
  }
  for (const auto& o : overrides) apply_override(o, config);
  if (config.min_replicas > config.max_replicas)
    fail("autoscaler.min_replicas", "(" + std::to_string(config.min_replicas) + ") is over max_replicas (" +
                                        std::to_string(config.max_replicas) + ")");
  return config;
}

auto load_server_config(const std::filesystem::path& path, const std::vector<config_override>& overrides)
    -> server_config {
  return parse_server_config(read_config_file(path), path.string(), overrides);
}

auto read_config_file(const std::filesystem::path& path) -> std::string {
  std::error_code ec;
  auto in = std::ifstream(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) throw config_error(path.string() + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

auto parse_toml(std::string_view text, std::string_view origin) -> toml::table {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw config_error(std::string(origin) + ": line " + std::to_string(at.line) + ", column " +
                       std::to_string(at.column) + ": " + std::string(e.description()));
  }
}

auto toml_type_name(const toml::node& n) -> std::string {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

} // namespace troupe
