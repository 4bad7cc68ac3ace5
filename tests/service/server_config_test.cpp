#include "service/server_config.hpp"

#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <toml++/toml.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

using namespace troupe;

namespace {

const auto default_toml = std::filesystem::path(__FILE__).parent_path() / "../../config/default.toml";

/// what() of the config_error that parsing `text` (then `overrides`) throws;
/// "no error" when it throws none.
auto error_of(std::string_view text, const std::vector<config_override>& overrides = {}) -> std::string {
  try {
    parse_server_config(text, "test.toml", overrides);
  } catch (const config_error& e) {
    return e.what();
  }
  return "no error";
}

/// "" when a and b are equal; else their first differing line, numbered.
auto first_difference(const std::string& a, const std::string& b) -> std::string {
  std::istringstream in_a(a), in_b(b);
  std::string line_a, line_b;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(in_a, line_a));
    const bool more_b = static_cast<bool>(std::getline(in_b, line_b));
    if (!more_a && !more_b) return a == b ? "" : "the same lines, but not the same bytes";
    if (more_a != more_b || line_a != line_b)
      return "line " + std::to_string(n) + ": \"" + (more_a ? line_a : "(end)") + "\" vs \"" +
             (more_b ? line_b : "(end)") + "\"";
  }
}

auto with(std::string key, std::string value) -> server_config {
  return parse_server_config("", "test.toml", {{std::move(key), std::move(value)}});
}

} // namespace

TEST_CASE("config/default.toml gives exactly the struct's defaults") {
  const auto c = load_server_config(default_toml);
  const auto d = server_config{};
  CHECK(c.server.host == d.server.host);
  CHECK(c.server.port == d.server.port);
  CHECK(c.server.http_threads == d.server.http_threads);
  CHECK(c.server.max_body_bytes == d.server.max_body_bytes);
  CHECK(c.server.idle_timeout_s == d.server.idle_timeout_s);
  CHECK(c.server.drain_timeout_s == d.server.drain_timeout_s);
  CHECK(c.server.stall_timeout_s == d.server.stall_timeout_s);
  CHECK(c.model.dir == d.model.dir);
  CHECK(c.model.served_model_name == d.model.served_model_name);
  CHECK(c.model.chat_template == d.model.chat_template);
  CHECK(c.engine.executor == d.engine.executor);
  CHECK(c.engine.zero_step_us == d.engine.zero_step_us);
  CHECK(c.engine.devices == d.engine.devices);
  CHECK(c.engine.replicas == d.engine.replicas);
  CHECK(c.engine.threads == d.engine.threads);
  CHECK(c.engine.huge_pages == d.engine.huge_pages);
  CHECK(c.engine.step_log == d.engine.step_log);
  CHECK(c.scheduler.max_num_seqs == d.scheduler.max_num_seqs);
  CHECK(c.scheduler.max_num_batched_tokens == d.scheduler.max_num_batched_tokens);
  CHECK(c.scheduler.block_size == d.scheduler.block_size);
  CHECK(c.scheduler.kv_memory_bytes == d.scheduler.kv_memory_bytes);
  CHECK(c.scheduler.max_waiting_requests == d.scheduler.max_waiting_requests);
  CHECK(c.scheduler.max_waiting_tokens == d.scheduler.max_waiting_tokens);
  CHECK(c.scheduler.max_model_len == d.scheduler.max_model_len);
  CHECK(c.scheduler.max_input_tokens == d.scheduler.max_input_tokens);
  CHECK(c.scheduler.max_output_tokens == d.scheduler.max_output_tokens);
  CHECK(c.scheduler.policy == d.scheduler.policy);
  CHECK(c.scheduler.eviction == d.scheduler.eviction);
  CHECK(c.scheduler.enable_prefix_caching == d.scheduler.enable_prefix_caching);
  CHECK(c.scheduler.watermark_blocks == d.scheduler.watermark_blocks);
  CHECK(c.scheduler.preemption_mode == d.scheduler.preemption_mode);
  CHECK(c.scheduler.swap_space_bytes == d.scheduler.swap_space_bytes);
  CHECK(c.actors.tokenizers == d.actors.tokenizers);
  CHECK(c.actors.caf_threads == d.actors.caf_threads);
  // The defaulted == also covers any field added later.
  CHECK(c == d);
  CHECK(d.model.dir == "models/tiny");
}

TEST_CASE("config/default.toml spells out every key, each with a description") {
  const auto doc = toml::parse_file(default_toml.string());
  const auto keys = server_config_keys();
  for (const auto& k : keys) {
    CAPTURE(k.path);
    CHECK(doc.at_path(k.path).node() != nullptr);
    CHECK_FALSE(k.description.empty());
  }
  std::size_t num_keys = 0;
  for (const auto& [name, section] : doc) num_keys += section.as_table()->size();
  CHECK(num_keys == keys.size());
}

TEST_CASE("config/default.toml is what `troupe config --defaults` writes") {
  std::ifstream in(default_toml, std::ios::binary);
  const auto file = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  INFO("regenerate it: build/troupe config --defaults > config/default.toml");
  CHECK(first_difference(file, default_server_config_toml()) == "");
}

TEST_CASE("the defaults: each key, its value and its description on one line; more lines aligned beneath") {
  const auto text = default_server_config_toml();
  CHECK(text.starts_with("# troupe server settings: every key with its default."));
  for (const auto* line : {
           "\n[server]                    # HTTP: ",
           "\nhost = \"127.0.0.1\"          # address to listen on\n",
           "\nport = 8080                 # 0: pick a free port and print it\n",
           "\nidle_timeout_s = 30.0       # close a keep-alive",
           "\nresponse_cache = \"64MiB\"    # the exact-repeat",
           "\nkv_memory = \"256MiB\"        # KV cache size",
           "\nswap_space = \"4GiB\"         # host memory",
           "\nmax_body_bytes = 1048576    # larger",
           "\ndevices = [\"cpu\"]           # ",
           "\nmore = []                   # more models",
           "\nworker_port = -1            # remote replicas",
           "\nresponse_cache_ttl_s = 600.0 # an answer",
           "\ntarget = 0.0                # the policy's target",
           "\nenable_prefix_caching = true # share",
           "\n                            # keys, quotas, tiers. Reloaded on SIGHUP and when the file changes.\n",
           "\n                            #   more = [{ dir = \"models/small\", name = \"small\" },\n",
           "\npolicy = \"fcfs\"             # scheduling policy: fcfs, priority, sjf, vtc, static; or a plug-in's path\n",
       }) {
    CAPTURE(line);
    CHECK(text.find(line) != std::string::npos);
  }
}

TEST_CASE("a rendered config reads back as the same config") {
  CHECK(parse_server_config(render_server_config(server_config{}, ""), "rendered") == server_config{});
  auto c = server_config{};
  c.server.host = "h \"q\" \\ n\nt\tc\x01\x7f \xc3\xa9";
  c.server.port = 0;
  c.server.admin_api = true;
  c.server.idle_timeout_s = 0.1;
  c.server.drain_timeout_s = 0;
  c.server.stall_timeout_s = 1e300;
  c.server.response_cache_bytes = 0;
  c.server.websocket_max_buffered_bytes = 1536;
  c.scheduler.kv_memory_bytes = std::int64_t{3} << 40;
  c.scheduler.swap_space_bytes = 1000;
  c.server.tenants_file = "/etc/troupe/tenants.toml";
  c.model.dir = "models/x y";
  c.model.served_model_name = "2024";
  c.model.chat_template = "chatml";
  c.model.more = {{"models/a", "", "", 0, 1}, {"models/b", "tiny", "v2", 10, 2}};
  c.engine.executor = "zero";
  c.engine.devices = {"cuda:0", "cuda:1"};
  c.engine.tensor_parallel_size = 2;
  c.engine.huge_pages = false;
  c.engine.dtype = "float32";
  c.scheduler.policy = "./build/liblongest_wait_first.so";
  c.scheduler.preemption_mode = "swap";
  c.router.policy = "weighted";
  c.router.weights = {2.0, 0.5, 1.0 / 3};
  c.router.capability_rules = {{"auto", "small", "large", 64, 0, {"free", "x"}}, {"a", "s", "l", 0, 9, {}}};
  c.router.worker_port = 0;
  c.server.metrics_host = "::1";
  c.server.metrics_port = 9090;
  c.autoscaler.policy = "queue_depth";
  c.autoscaler.target = 2.5;
  c.autoscaler.min_replicas = 2;
  c.autoscaler.max_replicas = 3;
  c.actors.caf_threads = 7;
  const auto text = render_server_config(c, "# a header\n");
  CAPTURE(text);
  CHECK(text.starts_with("# a header\n\n[server]"));
  CHECK(parse_server_config(text, "rendered") == c);
  CHECK(text.find("\nwebsocket_max_buffered = 1536 ") != std::string::npos);
  CHECK(text.find("\nkv_memory = \"3TiB\" ") != std::string::npos);
  CHECK(text.find("\nresponse_cache = 0 ") != std::string::npos);
  CHECK(text.find("\nmore = [{ dir = \"models/a\" }, { dir = \"models/b\", name = \"tiny\", version = \"v2\", "
                  "canary_percent = 10, replicas = 2 }] ") != std::string::npos);
  CHECK(text.find("\ncapability_rules = [{ model = \"auto\", small = \"small\", large = \"large\", "
                  "max_prompt_tokens = 64, tiers = [\"free\", \"x\"] }, { model = \"a\", small = \"s\", large = \"l\", "
                  "max_tokens = 9 }] ") != std::string::npos);
}

TEST_CASE("no file: the defaults, with the overrides") {
  CHECK(default_server_config() == server_config{});
  const auto c = default_server_config({{"server.port", "0"}, {"model.dir", "m"}});
  CHECK(c.server.port == 0);
  CHECK(c.model.dir == "m");
  CHECK_THROWS_WITH_AS(default_server_config({{"server.port", "x"}}), "server.port: expected an integer, got string",
                       config_error);
}

TEST_CASE("a file sets what it names and leaves the rest at the defaults") {
  const auto c = parse_server_config(R"(
[server]
port = 0
idle_timeout_s = 5      # an integer for a duration
drain_timeout_s = 0.25
[engine]
executor = "zero"
devices = ["cpu", "cpu"]
huge_pages = false
[scheduler]
block_size = 1024
)",
                                     "test.toml");
  CHECK(c.server.port == 0);
  CHECK(c.server.idle_timeout_s == 5.0);
  CHECK(c.server.drain_timeout_s == 0.25);
  CHECK(c.engine.executor == "zero");
  CHECK(c.engine.devices == std::vector<std::string>{"cpu", "cpu"});
  CHECK_FALSE(c.engine.huge_pages);
  CHECK(c.scheduler.block_size == 1024);
  auto expected = server_config{};
  expected.server.port = 0;
  expected.server.idle_timeout_s = 5.0;
  expected.server.drain_timeout_s = 0.25;
  expected.engine.executor = "zero";
  expected.engine.devices = {"cpu", "cpu"};
  expected.engine.huge_pages = false;
  expected.scheduler.block_size = 1024;
  CHECK(c == expected);
}

TEST_CASE("overrides: TOML values, else the plain string, applied in order after the file") {
  CHECK(with("server.port", "9000").server.port == 9000);
  CHECK(with("server.stall_timeout_s", "2.5").server.stall_timeout_s == 2.5);
  CHECK(with("model.dir", "models/x").model.dir == "models/x");
  CHECK(with("model.dir", "\"quoted dir\"").model.dir == "quoted dir");
  CHECK(with("model.served_model_name", "2024").model.served_model_name == "2024");
  CHECK(with("model.served_model_name", "").model.served_model_name.empty());
  CHECK(with("engine.devices", R"(["cpu", "cpu"])").engine.devices == std::vector<std::string>{"cpu", "cpu"});
  CHECK_FALSE(with("engine.huge_pages", "false").engine.huge_pages);
  CHECK(server_config{}.engine.jump_forward);
  CHECK_FALSE(with("engine.jump_forward", "false").engine.jump_forward);
  CHECK(with("engine.executor", "zero").engine.executor == "zero");
  CHECK(with("model.chat_template", "chatml").model.chat_template == "chatml");

  // The file says 7000; overrides follow, the last one winning.
  const auto c = parse_server_config("[server]\nport = 7000\nhttp_threads = 3\n", "test.toml",
                                     {{"server.port", "7001"}, {"server.port", "7002"}});
  CHECK(c.server.port == 7002);
  CHECK(c.server.http_threads == 3);

  // Text that would smuggle a second key in is one plain string.
  CHECK(with("server.host", "h\nport = 1").server.host == "h\nport = 1");
  CHECK(error_of("", {{"server.port", "1\nhttp_threads = 9"}}) == "server.port: expected an integer, got string");
}

TEST_CASE("kv_memory takes bytes or a size with a unit") {
  const auto kv = [](std::string v) { return with("scheduler.kv_memory", std::move(v)).scheduler.kv_memory_bytes; };
  CHECK(kv("1024") == 1024);
  CHECK(kv("\"1024\"") == 1024);
  CHECK(kv("512MiB") == std::int64_t{512} << 20);
  CHECK(kv("1GiB") == std::int64_t{1} << 30);
  CHECK(kv("4GB") == 4'000'000'000);
  CHECK(kv("100MB") == 100'000'000);
  CHECK(kv("\"64 KiB\"") == 65536);
  CHECK(kv("2TiB") == std::int64_t{2} << 40);
  CHECK(kv("7B") == 7);
  CHECK(parse_server_config("[scheduler]\nkv_memory = \"1GiB\"\n", "test.toml").scheduler.kv_memory_bytes ==
        std::int64_t{1} << 30);
  CHECK(parse_server_config("[scheduler]\nkv_memory = 3000\n", "test.toml").scheduler.kv_memory_bytes == 3000);

  const auto bad_size = [](std::string v) {
    return "scheduler.kv_memory: cannot read \"" + v +
           "\" as a size: an integer with an optional unit B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
  };
  CHECK(error_of("", {{"scheduler.kv_memory", "1.5GiB"}}) == bad_size("1.5GiB"));
  CHECK(error_of("", {{"scheduler.kv_memory", "12XB"}}) == bad_size("12XB"));
  CHECK(error_of("", {{"scheduler.kv_memory", "mib"}}) == bad_size("mib"));
  CHECK(error_of("", {{"scheduler.kv_memory", "\"-1MiB\""}}) == bad_size("-1MiB"));
  CHECK(error_of("", {{"scheduler.kv_memory", "0MiB"}}) == "scheduler.kv_memory: must be >= 1, got 0");
  CHECK(error_of("", {{"scheduler.kv_memory", "-5"}}) == "scheduler.kv_memory: must be >= 1, got -5");
  CHECK(error_of("", {{"scheduler.kv_memory", "9000000TiB"}}) == "scheduler.kv_memory: \"9000000TiB\" is too large");
  CHECK(error_of("[scheduler]\nkv_memory = 1.5\n") ==
        "scheduler.kv_memory: expected an integer or a size string like \"512MiB\", got float");
}

TEST_CASE("preemption by swap: a mode and a swap space size") {
  CHECK(with("scheduler.preemption_mode", "swap").scheduler.preemption_mode == "swap");
  CHECK(with("scheduler.swap_space", "2GiB").scheduler.swap_space_bytes == std::int64_t{2} << 30);
  CHECK(with("scheduler.swap_space", "0").scheduler.swap_space_bytes == 0);
  CHECK(error_of("", {{"scheduler.preemption_mode", "spill"}}) ==
        "scheduler.preemption_mode: unknown preemption mode \"spill\"; known: recompute, swap");
  CHECK(error_of("", {{"scheduler.swap_space", "-1"}}) == "scheduler.swap_space: must be >= 0, got -1");
}

TEST_CASE("unknown sections and keys are named, in the file and in overrides alike") {
  const auto section = std::string("serverr: unknown section; known: server, model, engine, scheduler, router, autoscaler, actors");
  CHECK(error_of("[serverr]\nport = 1\n") == section);
  CHECK(error_of("", {{"serverr.port", "1"}}) == section);
  CHECK(error_of("port = 1\n") == "port: unknown section; known: server, model, engine, scheduler, router, autoscaler, actors");

  const auto key = std::string(
      "server.prot: unknown key; known: host, port, http_threads, max_body_bytes, idle_timeout_s, "
      "drain_timeout_s, stall_timeout_s, admin_api, tenants, tenants_poll_s, response_cache, response_cache_ttl_s, "
      "responses_store, reasoning_key_file, unknown_fields, responses_ttl_s, websocket_max_buffered, websocket_idle_timeout_s, metrics_host, "
      "metrics_port");
  CHECK(error_of("[server]\nprot = 1\n") == key);
  CHECK(error_of("", {{"server.prot", "1"}}) == key);
  CHECK(error_of("[model]\nmodel_dir = \"x\"\n") ==
        "model.model_dir: unknown key; known: dir, served_model_name, chat_template, tool_parser, reasoning_parser, version, more");
  CHECK(error_of("[server.tls]\ncert = \"x\"\n") ==
        "server.tls: unknown key; known: host, port, http_threads, max_body_bytes, idle_timeout_s, "
        "drain_timeout_s, stall_timeout_s, admin_api, tenants, tenants_poll_s, response_cache, "
        "response_cache_ttl_s, responses_store, reasoning_key_file, unknown_fields, responses_ttl_s, websocket_max_buffered, "
        "websocket_idle_timeout_s, metrics_host, metrics_port");
  CHECK(error_of("", {{"port", "1"}}) == "port: an override names section.key");
  CHECK(error_of("", {{"server.unknown_fields", "\"ignore\""}}).find("server.unknown_fields") != std::string::npos);
  CHECK(error_of("server = 1\n") == "server: expected a table, got integer");
}

TEST_CASE("wrong types name the key, what it wants and what it got") {
  CHECK(error_of("[server]\nport = \"80\"\n") == "server.port: expected an integer, got string");
  CHECK(error_of("[server]\nport = 80.0\n") == "server.port: expected an integer, got float");
  CHECK(error_of("[server]\nhost = 1\n") == "server.host: expected a string, got integer");
  CHECK(error_of("[server]\nidle_timeout_s = \"30s\"\n") == "server.idle_timeout_s: expected a number, got string");
  CHECK(error_of("[engine]\nhuge_pages = 1\n") == "engine.huge_pages: expected a boolean, got integer");
  CHECK(error_of("[engine]\ndevices = \"cpu\"\n") == "engine.devices: expected an array of strings, got string");
  CHECK(error_of("[engine]\ndevices = [\"cpu\", 0]\n") == "engine.devices[1]: expected a string, got integer");
  CHECK(error_of("[actors]\ntokenizers = [1]\n") == "actors.tokenizers: expected an integer, got array");
  CHECK(error_of("[model]\ndir = 2024-01-01\n") == "model.dir: expected a string, got date");
  CHECK(error_of("", {{"server.port", "eighty"}}) == "server.port: expected an integer, got string");
  CHECK(error_of("", {{"engine.huge_pages", "yes"}}) == "engine.huge_pages: expected a boolean, got string");
}

TEST_CASE("out-of-range values say the range and the value") {
  CHECK(error_of("[scheduler]\nmax_num_seqs = 0\n") == "scheduler.max_num_seqs: must be >= 1, got 0");
  CHECK(error_of("[server]\nport = 65536\n") == "server.port: must be in [0, 65535], got 65536");
  CHECK(error_of("[server]\nport = -1\n") == "server.port: must be in [0, 65535], got -1");
  CHECK(with("server.port", "65535").server.port == 65535);
  CHECK(error_of("[server]\nhttp_threads = 0\n") == "server.http_threads: must be >= 1, got 0");
  CHECK(error_of("[server]\nmax_body_bytes = 1023\n") == "server.max_body_bytes: must be >= 1024, got 1023");
  CHECK(with("server.max_body_bytes", "1024").server.max_body_bytes == 1024);
  CHECK(error_of("[server]\nidle_timeout_s = 0\n") == "server.idle_timeout_s: must be > 0, got 0");
  CHECK(error_of("[server]\nstall_timeout_s = -0.5\n") == "server.stall_timeout_s: must be > 0, got -0.5");
  CHECK(error_of("[server]\ndrain_timeout_s = -1\n") == "server.drain_timeout_s: must be >= 0, got -1");
  CHECK(with("server.drain_timeout_s", "0").server.drain_timeout_s == 0.0);
  CHECK(with("server.drain_timeout_s", "9007199254740993").server.drain_timeout_s == 9007199254740992.0);
  CHECK(error_of("[server]\ndrain_timeout_s = nan\n") == "server.drain_timeout_s: must be >= 0, got nan");
  CHECK(error_of("[server]\nidle_timeout_s = inf\n") == "server.idle_timeout_s: must be finite, got inf");
  CHECK(error_of("[server]\nhost = \"\"\n") == "server.host: must not be empty");
  CHECK(error_of("[server]\nmetrics_port = 65536\n") == "server.metrics_port: must be in [-1, 65535], got 65536");
  CHECK(error_of("[server]\nmetrics_port = -2\n") == "server.metrics_port: must be in [-1, 65535], got -2");
  CHECK(with("server.metrics_port", "0").server.metrics_port == 0);
  CHECK(error_of("[server]\nmetrics_port = 0\nmetrics_host = \"internal\"\n") ==
        "server.metrics_host: \"internal\" is not an IP address");
  CHECK(error_of("[server]\nmetrics_port = 0\nmetrics_host = \"10.0.0.300\"\n") ==
        "server.metrics_host: \"10.0.0.300\" is not an IP address");
  CHECK(parse_server_config("[server]\nmetrics_port = 0\nmetrics_host = \"10.0.0.5\"\n", "t").server.metrics_host == "10.0.0.5");
  CHECK(error_of("[server]\nmetrics_host = \"127.0.0.1\"\n") ==
        "server.metrics_host: \"127.0.0.1\" is set, but server.metrics_port is -1 (/metrics on the main port); set it");
  CHECK(error_of("[model]\ndir = \"\"\n") == "model.dir: must not be empty");
  CHECK(error_of("[engine]\nzero_step_us = -1\n") == "engine.zero_step_us: must be >= 0, got -1");
  CHECK(error_of("[engine]\nreplicas = 0\n") == "engine.replicas: must be >= 1, got 0");
  CHECK(error_of("[engine]\nthreads = -1\n") == "engine.threads: must be >= 0, got -1");
  CHECK(error_of("[engine]\ndevices = []\n") == "engine.devices: must not be empty");
  CHECK(error_of("[engine]\ndevices = [\"cpu\", \"cuda:0\"]\n") ==
        "engine.devices: \"cpu\" and CUDA devices cannot be mixed");
  CHECK(with("engine.devices", "[\"cuda:0\", \"cuda:1\"]").engine.devices.size() == 2);
  CHECK(with("engine.tensor_parallel_size", "2").engine.tensor_parallel_size == 2);
  CHECK(error_of("[engine]\ntensor_parallel_size = 0\n") == "engine.tensor_parallel_size: must be >= 1, got 0");
  CHECK(with("router.policy", "consistent_hash").router.policy == "consistent_hash");
  CHECK(error_of("[router]\npolicy = \"random\"\n") ==
        "router.policy: unknown routing policy \"random\"; known: round_robin, least_requests, least_tokens, "
        "consistent_hash, prefix_affinity, weighted");
  CHECK(error_of("[engine]\ndevices = [\"gpu0\"]\n") ==
        "engine.devices: unknown device \"gpu0\"; known: \"cpu\", \"cuda:N\" (N >= 0)");
  CHECK(error_of("[engine]\ndevices = [\"cuda:x\"]\n") ==
        "engine.devices: unknown device \"cuda:x\"; known: \"cpu\", \"cuda:N\" (N >= 0)");
  CHECK(with("engine.devices", "[\"cuda:1\"]").engine.devices == std::vector<std::string>{"cuda:1"});
  CHECK(with("engine.devices", "[\"cpu\", \"cpu\"]").engine.devices.size() == 2);
  CHECK(error_of("[engine]\ndtype = \"fp8\"\n") == "engine.dtype: unknown dtype \"fp8\"; known: bfloat16, float32");
  CHECK(with("engine.dtype", "float32").engine.dtype == "float32");
  CHECK_FALSE(with("engine.cuda_graphs", "false").engine.cuda_graphs);
  CHECK(error_of("[scheduler]\nmax_num_batched_tokens = 0\n") ==
        "scheduler.max_num_batched_tokens: must be >= 1, got 0");
  CHECK(with("scheduler.max_num_batched_tokens", "1").scheduler.max_num_batched_tokens == 1);
  CHECK(error_of("[scheduler]\nblock_size = 0\n") == "scheduler.block_size: must be in [1, 1024], got 0");
  CHECK(error_of("[scheduler]\nblock_size = 1025\n") == "scheduler.block_size: must be in [1, 1024], got 1025");
  CHECK(error_of("[scheduler]\nmax_waiting_requests = 0\n") == "scheduler.max_waiting_requests: must be >= 1, got 0");
  CHECK(error_of("[scheduler]\nmax_waiting_tokens = 0\n") == "scheduler.max_waiting_tokens: must be >= 1, got 0");
  CHECK(error_of("[scheduler]\nmax_model_len = -1\n") == "scheduler.max_model_len: must be >= 0, got -1");
  CHECK(error_of("[scheduler]\nmax_num_seqs = 3000000000\n") ==
        "scheduler.max_num_seqs: must be <= 2147483647, got 3000000000");
  CHECK(error_of("[actors]\ntokenizers = -1\n") == "actors.tokenizers: must be >= 0, got -1");
  CHECK(error_of("[actors]\ncaf_threads = -2\n") == "actors.caf_threads: must be >= 0, got -2");
  CHECK(error_of("[scheduler]\npolicy = \"lottery\"\n") ==
        "scheduler.policy: unknown scheduling policy \"lottery\"; known: fcfs, priority, sjf, vtc, static");
  CHECK(error_of("[scheduler]\neviction = \"fifo\"\n") ==
        "scheduler.eviction: unknown eviction policy \"fifo\"; known: lru, lfu, priority");
  CHECK(error_of("[scheduler]\nenable_prefix_caching = 1\n") ==
        "scheduler.enable_prefix_caching: expected a boolean, got integer");
}

TEST_CASE("chat templates and executors are checked by name") {
  CHECK(error_of("[model]\nchat_template = \"alpaca\"\n") ==
        "model.chat_template: unknown chat template \"alpaca\"; known: llama-2, chatml, zephyr");
  CHECK(error_of("", {{"model.chat_template", "vicuna"}}) ==
        "model.chat_template: unknown chat template \"vicuna\"; known: llama-2, chatml, zephyr");
  for (const auto* name : {"llama-2", "chatml", "zephyr"})
    CHECK(with("model.chat_template", name).model.chat_template == name);
  CHECK(error_of("[engine]\nexecutor = \"cuda\"\n") == "engine.executor: unknown executor \"cuda\"; known: cpu, zero");
  CHECK(error_of("", {{"engine.executor", "gpu"}}) == "engine.executor: unknown executor \"gpu\"; known: cpu, zero");
}

TEST_CASE("bad TOML names the origin and the line") {
  CHECK(error_of("[server]\nport = 1\nhost = \n") ==
        "test.toml: line 3, column 8: Error while parsing key-value pair: expected value, saw '\\n'");
  CHECK(error_of("[server]\nport = 1\nport = 2\n") ==
        "test.toml: line 3, column 8: Error while parsing key-value pair: cannot redefine existing integer 'port'");
  CHECK(error_of("[server\n") == "test.toml: line 1, column 8: Error while parsing table header: expected ']', saw '\\n'");
}

TEST_CASE("files: a missing or unreadable one cannot be read; a real one loads with its overrides") {
  const testing::temp_dir dir;
  const auto missing = dir / "nope.toml";
  try {
    load_server_config(missing);
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()) == missing.string() + ": cannot read");
  }
  try {
    load_server_config(dir.path());
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()) == dir.path().string() + ": cannot read");
  }

  const auto file = dir / "troupe.toml";
  std::ofstream(file) << "[server]\nport = 1234\n[scheduler]\nkv_memory = \"1MiB\"\n";
  const auto c = load_server_config(file, {{"engine.threads", "4"}});
  CHECK(c.server.port == 1234);
  CHECK(c.scheduler.kv_memory_bytes == 1 << 20);
  CHECK(c.engine.threads == 4);

  const auto broken = dir / "broken.toml";
  std::ofstream(broken) << "[server]\n\nport = = 1\n";
  try {
    load_server_config(broken);
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()).starts_with(broken.string() + ": line 3, column 8: "));
  }

  const auto empty = dir / "empty.toml";
  std::ofstream(empty) << "";
  CHECK(load_server_config(empty) == server_config{});
}

TEST_CASE("more models and capability rules: arrays of tables, each key checked") {
  const auto c = parse_server_config(R"([model]
more = [{ dir = "models/small", name = "small" },
        { dir = "models/v2", name = "tiny", version = "v2", canary_percent = 10, replicas = 2 }]
[router]
capability_rules = [{ model = "auto", small = "small", large = "tiny", max_prompt_tokens = 64, tiers = ["free"] }]
)",
                                     "test");
  REQUIRE(c.model.more.size() == 2);
  CHECK(c.model.more[0] == model_entry{"models/small", "small", "", 0, 1});
  CHECK(c.model.more[1] == model_entry{"models/v2", "tiny", "v2", 10, 2});
  REQUIRE(c.router.capability_rules.size() == 1);
  CHECK(c.router.capability_rules[0] == capability_rule{"auto", "small", "tiny", 64, 0, {"free"}});
  // An override sets the whole array.
  const auto o = parse_server_config("", "test", {{"model.more", R"([{ dir = "x" }])"}});
  REQUIRE(o.model.more.size() == 1);
  CHECK(o.model.more[0].dir == "x");

  CHECK(error_of("[model]\nmore = [{ name = \"x\" }]\n") == "model.more[0].dir: missing");
  CHECK(error_of("[model]\nmore = [{ dir = \"x\", canary_percent = 101 }]\n") ==
        "model.more[0].canary_percent: must be in [0, 100], got 101");
  CHECK(error_of("[model]\nmore = [{ dir = \"x\", gpu = 1 }]\n") ==
        "model.more[0].gpu: unknown key; known: dir, name, version, canary_percent, replicas");
  CHECK(with("router.weights", "[2, 0.5]").router.weights == std::vector<double>{2.0, 0.5});
  CHECK(error_of("[router]\nweights = [1, 0]\n") == "router.weights[1]: must be > 0, got 0");
  CHECK(error_of("[router]\nweights = [\"x\"]\n") == "router.weights[0]: expected a number, got string");
  CHECK(error_of("[autoscaler]\npolicy = \"magic\"\n") ==
        "autoscaler.policy: unknown autoscaling policy \"magic\"; known: none, queue_depth, ttft_slo, tokens_per_second");
  CHECK(error_of("[autoscaler]\nmin_replicas = 5\nmax_replicas = 2\n") ==
        "autoscaler.min_replicas: (5) is over max_replicas (2)");
  CHECK(error_of("[autoscaler]\ntarget = -1\n") == "autoscaler.target: must be >= 0, got -1");
  CHECK(error_of("[model]\nmore = \"x\"\n") == "model.more: expected an array of tables, got string");
  CHECK(error_of("[router]\ncapability_rules = [{ model = \"auto\", small = \"s\" }]\n") ==
        "router.capability_rules[0].large: missing");
  CHECK(error_of("[router]\ncapability_rules = [{ model = \"a\", small = \"s\", large = \"l\", tiers = \"free\" }]\n") ==
        "router.capability_rules[0].tiers: expected an array of strings, got string");
}
