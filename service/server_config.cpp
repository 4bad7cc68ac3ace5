#include "service/server_config.hpp"

#include "settings/toml_settings.hpp"
#include "service/server_config_keys.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <string>

namespace troupe {
namespace {

using namespace config_keys;

/// Throws "<section>: unknown section; known: ..." unless it is one.
void check_section(std::string_view section) {
  auto known = std::string{};
  for (const auto& s : k_sections) {
    if (s.name == section) return;
    known += (known.empty() ? "" : ", ") + std::string(s.name);
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

/// An override into the document, over the file's value: a string-valued
/// key takes the text as it is; the others read it as a TOML value.
void apply_override(const config_override& o, toml::table& root) {
  const auto& [path, value] = o;
  const auto dot = path.find('.');
  if (dot == std::string::npos) fail(path, "an override names section.key");
  const auto& spec = find_key(std::string_view(path).substr(0, dot), std::string_view(path).substr(dot + 1));
  settings::set_path(root, path, *settings::override_value(value, spec.io.takes_string).get("v"), "--set " + path);
}

// The column where a line's comment starts (as long as what comes before fits).
constexpr std::size_t k_comment_column = 28;

/// `line`, then "# " and the description's first line at k_comment_column;
/// its other lines beneath, aligned.
void append_described(std::string& out, const std::string& line, std::string_view description) {
  out += line;
  auto width = line.size();
  if (description.empty()) out += "\n";
  while (!description.empty()) {
    const auto end = std::min(description.find('\n'), description.size());
    out += std::string(width < k_comment_column ? k_comment_column - width : 1, ' ');
    out += "# " + std::string(description.substr(0, end)) + "\n";
    description.remove_prefix(std::min(end + 1, description.size()));
    width = 0;
  }
}

} // namespace

auto server_config_keys() -> std::vector<config_key> {
  std::vector<config_key> out;
  for (const auto& s : key_specs())
    out.push_back({std::string(s.section) + "." + std::string(s.key), s.description});
  return out;
}

auto render_server_config(const server_config& c, std::string_view header) -> std::string {
  std::string out(header);
  for (const auto& section : k_sections) {
    out += "\n";
    append_described(out, "[" + std::string(section.name) + "]", section.description);
    for (const auto& s : key_specs())
      if (s.section == section.name) append_described(out, std::string(s.key) + " = " + s.io.render(c), s.description);
  }
  return out;
}

auto default_server_config_toml() -> std::string {
  return render_server_config(server_config{},
                              "# troupe server settings: every key with its default. troupe serve reads no\n"
                              "# file unless given --config FILE, whose keys override these; override one key\n"
                              "# with `--set section.key=value` (TOML syntax; a bare word is a string).\n"
                              "# Written by `troupe config --defaults`.\n");
}

auto parse_server_config(std::string_view toml_text, std::string_view origin,
                         const std::vector<config_override>& overrides) -> server_config {
  auto root = settings::parse(toml_text, origin);
  for (const auto& o : overrides) apply_override(o, root);
  auto config = server_config{};
  for (const auto& [section_key, section] : root) {
    const auto section_name = std::string(section_key.str());
    check_section(section_name);
    if (!section.is_table()) wrong_type(section_name, "a table", section);
    for (const auto& [key, value] : *section.as_table())
      find_key(section_name, key.str()).io.apply(value, section_name + "." + std::string(key.str()), config);
  }
  // Metrics thought internal but served on the main port: refused, not guessed.
  if (!config.server.metrics_host.empty() && config.server.metrics_port < 0)
    fail("server.metrics_host", "\"" + config.server.metrics_host +
                                    "\" is set, but server.metrics_port is -1 (/metrics on the main port); set it");
  const int tls_parts = !config.router.worker_tls_cert.empty() + !config.router.worker_tls_key.empty() + !config.router.worker_tls_ca.empty();
  if (tls_parts != 0 && tls_parts != 3)
    fail("router.worker_tls_cert", "worker_tls_cert, worker_tls_key and worker_tls_ca go together (mutual TLS)");
  if (config.autoscaler.min_replicas > config.autoscaler.max_replicas)
    fail("autoscaler.min_replicas", "(" + std::to_string(config.autoscaler.min_replicas) + ") is over max_replicas (" +
                                        std::to_string(config.autoscaler.max_replicas) + ")");
  return config;
}

auto load_server_config(const std::filesystem::path& path, const std::vector<config_override>& overrides)
    -> server_config {
  return parse_server_config(settings::read_file(path), path.string(), overrides);
}

auto default_server_config(const std::vector<config_override>& overrides) -> server_config {
  return parse_server_config("", "the defaults", overrides);
}

} // namespace troupe
