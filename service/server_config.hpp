#pragma once
// The server's settings, fixed at start-up: the built-in defaults (the
// struct's initialisers), the keys of a TOML file when one is given, then
// `--set section.key=value` overrides. `troupe config --defaults` writes every
// key with its default and description (config/default.toml is its output).
// Plain C++: nothing here knows CAF or Beast.

#include "engine/core/fleet_lifecycle.hpp"
#include "engine/core/scheduler_config.hpp"
#include "settings/error.hpp"

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {

/// Thrown at start-up; what() is one line "<key path>: <reason>" (e.g.
/// "scheduler.max_num_seqs: must be >= 1, got 0") or
/// "<file>: line L, column C: <TOML parse error>": the settings reader's
/// error (settings/toml_settings.hpp).
using config_error = settings::error;

/// One more model served beside [model] (key model.more): its own replicas,
/// executors, KV cache and router. One whose name is already served is a new
/// version of it that takes canary_percent of its traffic (sticky per session).
struct model_entry {
  std::string dir;                ///< non-empty
  std::string name;               ///< "": the dir's last path component
  std::string version;            ///< the x-model-version tag; "": name@content hash
  std::int32_t canary_percent = 0; ///< [0, 100]; > 0 only for a new version of a served name
  std::int32_t replicas = 1;      ///< >= 1, per device
  friend auto operator==(const model_entry&, const model_entry&) -> bool = default;
};

/// Capability routing (key router.capability_rules): requests for `model` (a
/// name of its own) go to `small` when the prompt has at most
/// max_prompt_tokens tokens and max_tokens is given and at most max_tokens,
/// or when their tier (x-troupe-tier) is one of `tiers`; else to `large`.
struct capability_rule {
  std::string model, small, large;      ///< non-empty; small and large are served models (checked at start-up)
  std::int32_t max_prompt_tokens = 0;   ///< >= 0 (0: the length test never passes)
  std::int32_t max_tokens = 0;          ///< >= 0
  std::vector<std::string> tiers;
  friend auto operator==(const capability_rule&, const capability_rule&) -> bool = default;
};

/// [server]
struct server_section {
  std::string host = "127.0.0.1";          ///< non-empty
  std::uint16_t port = 8080;               ///< 0: pick a free port (the server prints it)
  std::int32_t http_threads = 1;           ///< >= 1: Beast io_context threads
  std::int64_t max_body_bytes = 1 << 20;   ///< >= 1024; larger request bodies get 413
  double idle_timeout_s = 30.0;            ///< > 0: keep-alive idle / slow request read
  double drain_timeout_s = 30.0;           ///< >= 0: SIGTERM grace for in-flight streams
  double stall_timeout_s = 60.0;           ///< > 0: /health/ready 503 when queued work saw no step this long
  bool admin_api = false;                  ///< /admin/replicas: list, drain, resume, and inject faults (tests)
  std::string tenants_file;                ///< key "tenants": "" none (no API keys); else a tenants TOML file
  double tenants_poll_s = 1.0;             ///< >= 0: how often the tenants file is checked for changes (0: SIGHUP only)
  std::int64_t response_cache_bytes = 64 << 20; ///< key "response_cache": >= 0 (0: off); for tenants that opt in
  double response_cache_ttl_s = 600.0;     ///< > 0
  std::int64_t responses_store_bytes = 64 << 20; ///< key "responses_store": >= 0 (0: off); POST /v1/responses' store
  /// A file of 64 hex digits: the key that seals reasoning for stateless
  /// clients (docs/api.md); "": a random key per start.
  std::string reasoning_key_file;
  std::string unknown_fields = "accept";   ///< "accept" (shown: log, metric, header) or "refuse" (a 400)
  double responses_ttl_s = 3600.0;         ///< > 0: a stored response is kept this long
  std::int64_t websocket_max_buffered_bytes = 1 << 20; ///< key "websocket_max_buffered": >= 1024 unsent per socket
  double websocket_idle_timeout_s = 60.0;  ///< > 0: a silent WebSocket is pinged at half of it, closed at it
  std::string metrics_host;                ///< "" or an IP address: where metrics_port listens ("": host)
  std::int32_t metrics_port = -1;          ///< [-1, 65535]: /metrics on a listener of its own (-1: on port; 0: any free port)
  friend auto operator==(const server_section&, const server_section&) -> bool = default;
};

/// [model]
struct model_section {
  std::string dir = "models/tiny";         ///< non-empty
  std::string served_model_name;           ///< "": the model dir's last path component (resolved by the caller)
  std::string chat_template;               ///< "": from the model; else a parse_chat_format name
  std::string tool_parser = "auto";        ///< "auto" (read from the template), "none", or a tools::make_tool_parser family
  std::string reasoning_parser = "auto";   ///< "auto" (a template with <think>), "none", "think"
  std::string version;                     ///< the x-model-version tag; "": name@content hash
  std::vector<model_entry> more;           ///< models served beside this one (array of tables)
  friend auto operator==(const model_section&, const model_section&) -> bool = default;
};

/// [engine]
struct engine_section {
  std::string executor = "cpu";            ///< "cpu" | "zero" (returns tokens without running a model)
  std::int32_t zero_step_us = 0;           ///< >= 0: the zero executor's simulated step time, µs
  std::vector<std::string> devices = {"cpu"}; ///< non-empty: "cpu"s, or "cuda:N"s (as many as tensor_parallel_size)
  std::int32_t replicas = 1;               ///< >= 1, per device
  std::int32_t threads = 0;                ///< >= 0 compute threads; 0: all cores
  bool huge_pages = true;                  ///< copy weights into 2 MiB pages
  bool jump_forward = true;                ///< a grammar's forced tokens are appended without a model step
  std::string step_log;                    ///< "": none; else a file per replica (FILE, FILE.1, ...)
  std::string dtype = "bfloat16";          ///< on a CUDA device: "bfloat16" | "float32" (the CPU computes in float32)
  std::string weight_dtype = "auto";       ///< "auto" (as stored) | "q8_0" | "q4_k": quantize float matrices on load (CPU)
  bool cuda_graphs = true;                 ///< on a CUDA device: decode steps replay captured graphs
  std::int32_t tensor_parallel_size = 1;   ///< >= 1: CUDA devices one executor spans (NCCL)
  friend auto operator==(const engine_section&, const engine_section&) -> bool = default;
};

/// [scheduler]: the scheduler's and KV cache's keys, shared with the
/// simulator's [[replicas]] (engine/core/scheduler_config.hpp), and how much
/// memory the KV cache takes.
struct scheduler_section : scheduler_config {
  std::int64_t kv_memory_bytes = 256 << 20; ///< key "kv_memory"; >= 1; integer bytes or "512MiB"
  std::string kv_cache_dtype = "auto";     ///< "auto" (CPU: f32; CUDA: engine.dtype) | "f32" | "bf16" | "f16" | "q8_0"
  std::int64_t swap_space_bytes = std::int64_t{4} << 30; ///< key "swap_space"; >= 0; host memory for swap, per device
  friend auto operator==(const scheduler_section&, const scheduler_section&) -> bool = default;
};

/// [router]
struct router_section {
  std::string policy = "round_robin";      ///< a routing policy's name (policies/registry.hpp), or a plug-in's path
  std::vector<double> weights;             ///< > 0 each, by replica index (the rest 1): `weighted`'s capacities
  double health_check_interval_s = 5.0;    ///< > 0: a deep check (a one-token inference) per replica this often
  double health_check_timeout_s = 30.0;    ///< > 0: a check not answered within this fails
  std::int32_t unhealthy_after = 3;        ///< >= 1 consecutive failed checks take a replica out of rotation
  std::int32_t healthy_after = 2;          ///< >= 1 consecutive passed checks bring it back
  std::int32_t max_retries = 2;            ///< >= 0: a request whose replica fails before its first token is retried elsewhere
  std::vector<capability_rule> capability_rules; ///< (array of tables)
  std::int32_t worker_port = -1;           ///< [-1, 65535]: where `troupe worker --join` connects (-1: none; 0: any free port)
  std::string worker_secret_file;          ///< the fleet's shared secret (a file, >= 16 bytes); needed with worker_port and by workers
  std::string worker_tls_cert;             ///< PEM: this node's certificate; with key and ca, the workers' link is mutual TLS
  std::string worker_tls_key;              ///< PEM: its private key
  std::string worker_tls_ca;               ///< PEM: the CA that signs every node's certificate
  friend auto operator==(const router_section&, const router_section&) -> bool = default;
};

/// [actors]
struct actors_section {
  std::int32_t tokenizers = 0;             ///< >= 0 tokenizer pool size; 0: cores
  std::int32_t caf_threads = 0;            ///< >= 0 CAF scheduler.max-threads; 0: cores
  friend auto operator==(const actors_section&, const actors_section&) -> bool = default;
};

/// Every field holds a valid value after loading: one struct per section,
/// its fields named as the keys (cfg.router.policy is router.policy) but
/// where a unit is spelled out (scheduler.kv_memory: kv_memory_bytes;
/// server.tenants: tenants_file). A key's description lives beside its spec
/// in server_config_keys.cpp (key_specs()). Relative paths stay as written
/// (relative to the working directory), and nothing on disk is checked here.
struct server_config {
  server_section server;
  model_section model;
  engine_section engine;
  scheduler_section scheduler;
  router_section router;
  /// [autoscaler] (the [model]'s replicas; CPU and zero executors): the
  /// simulator's [autoscaler] is the same struct (engine/core/fleet_lifecycle.hpp).
  autoscaler_config autoscaler;
  actors_section actors;

  friend auto operator==(const server_config&, const server_config&) -> bool = default;
};

/// One `--set` override: ("section.key", value). The value is TOML syntax
/// ("512", "\"x\"", "true", "[\"cpu\"]"); text that is not a TOML value, and
/// any text given for a string-valued key, is taken as the plain string, so
/// `model.dir=models/x` and `model.served_model_name=2024` need no quotes.
using config_override = std::pair<std::string, std::string>;

/// Reads `path` (a TOML file), then applies `overrides` in order (a later one
/// wins). Absent keys keep the struct's defaults. Throws config_error naming
/// the key path for an unknown section or key (in the file or an override),
/// a wrong type or an out-of-range value; "<path>: cannot read" when the file
/// cannot be read; "<path>: line L, column C: ..." for bad TOML.
auto load_server_config(const std::filesystem::path& path,
                        const std::vector<config_override>& overrides = {}) -> server_config;

/// The same from TOML text (for tests); `origin` names it in parse errors.
auto parse_server_config(std::string_view toml_text, std::string_view origin,
                         const std::vector<config_override>& overrides = {}) -> server_config;

/// The built-in defaults with `overrides` applied; no file is read.
auto default_server_config(const std::vector<config_override>& overrides = {}) -> server_config;

/// One key of the file.
struct config_key {
  std::string path;        ///< "section.key"
  std::string description; ///< what it does: one line, or several separated by '\n'
};

/// Every key, in the order render_server_config writes them.
auto server_config_keys() -> std::vector<config_key>;

/// `c` as a TOML file that parse_server_config reads back to `c`: `header`
/// (comment lines, each ending in '\n'), then each [section] and every key
/// in it as `key = value   # description` (further description lines
/// beneath, aligned). Sizes in bytes are written like "256MiB" where a
/// binary unit divides them.
auto render_server_config(const server_config& c, std::string_view header) -> std::string;

/// render_server_config(server_config{}) with its header: what
/// `troupe config --defaults` prints, and config/default.toml holds.
auto default_server_config_toml() -> std::string;

} // namespace troupe
