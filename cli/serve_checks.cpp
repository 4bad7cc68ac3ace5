#include "cli/serve_checks.hpp"

#include "actors/wire.hpp"
#include "actors/worker_gate.hpp"
#include "policies/registry.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <utility>

namespace troupe::cli {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// The served names ([model], then model.more: a name served already is its
// canary version), checked with the capability rules over them.
auto check_fleet_names(const server_config& cfg) -> std::vector<std::string> {
  std::vector<std::string> names{served_name(cfg.model.served_model_name, cfg.model.dir)};
  for (std::size_t i = 0; i < cfg.model.more.size(); ++i) {
    const auto& e = cfg.model.more[i];
    const auto where = "model.more[" + std::to_string(i) + "]";
    const auto name = served_name(e.name, e.dir);
    const bool served = std::find(names.begin(), names.end(), name) != names.end();
    if (served && e.canary_percent == 0)
      throw config_error(where + ": the model '" + name +
                         "' is served already; a new version of it needs a canary_percent");
    if (!served && e.canary_percent > 0)
      throw config_error(where + ": a canary_percent makes a new version of a served model, but no model '" + name +
                         "' comes before it");
    if (served && e.version.empty())
      throw config_error(where + ": a new version of '" + name + "' needs a version tag");
    // (A name is listed twice once it has its stable and its canary version.)
    if (std::count(names.begin(), names.end(), name) > 1)
      throw config_error(where + ": '" + name + "' has a canary version already");
    names.push_back(name);
  }
  for (std::size_t i = 0; i < cfg.router.capability_rules.size(); ++i) {
    const auto& r = cfg.router.capability_rules[i];
    const auto where = "router.capability_rules[" + std::to_string(i) + "]";
    if (std::find(names.begin(), names.end(), r.model) != names.end())
      throw config_error(where + ".model: '" + r.model + "' is a served model's name; a rule needs a name of its own");
    for (const auto& [key, m] : {std::pair{"small", r.small}, {"large", r.large}})
      if (std::find(names.begin(), names.end(), m) == names.end())
        throw config_error(where + "." + key + ": no served model '" + m + "'");
  }
  return names;
}

// model.more[i] as a whole config: [model]'s settings with its dir, name,
// version and replicas (the step log is [model]'s alone).
auto config_of_more(const server_config& cfg, std::size_t i, const std::string& name) -> server_config {
  const auto& e = cfg.model.more[i];
  auto c = cfg;
  c.model.dir = e.dir;
  c.model.served_model_name = name;
  c.model.version = e.version;
  c.engine.replicas = e.replicas;
  c.engine.step_log.clear();
  c.model.more.clear();
  return c;
}

// Opened as the first replica's writer opens it, without emptying it.
void check_step_log(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) throw std::runtime_error(path + ": cannot write the step log: " + std::strerror(errno));
  std::fclose(f);
}

// One model's config checked and its facts read (its config and tokenizer,
// not its weights): what start_engine would refuse once the port is open.
auto plan_model(server_config c, std::string name, std::int32_t canary_percent) -> model_plan {
  model_plan m;
  m.setup = prepare_for_devices(c);
  m.plan = plan_fleet(c, m.setup);
  if (auto t = resolve_chat_template(c.model.chat_template, m.setup.dir.string(), m.setup.gguf.get()))
    m.chat = std::make_shared<const chat_template>(std::move(*t));
  (void)policy::make_routing_policy(c.router.policy); // one named by path loads here
  if (!c.engine.step_log.empty()) check_step_log(c.engine.step_log);
  m.cfg = std::move(c);
  m.name = std::move(name);
  m.canary_percent = canary_percent;
  return m;
}

// A PEM file of router.worker_tls_*, read before OpenSSL loads it
// (check_gate_tls), so that a missing or empty file is named as such.
void check_pem_file(const std::string& key, const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in) throw config_error(key + ": " + path + ": cannot read");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (text.empty()) throw config_error(key + ": " + path + ": the file is empty");
  if (text.find("-----BEGIN ") == std::string::npos)
    throw config_error(key + ": " + path + ": not a PEM file (no \"-----BEGIN\" line)");
}

// router.worker_port's credentials: the fleet's secret, and the TLS files
// where the link is TLS. Returns the secret.
auto check_worker_link(const server_config& cfg) -> std::string {
  auto secret = read_worker_secret(cfg);
  if (!cfg.router.worker_tls_cert.empty()) {
    check_pem_file("router.worker_tls_cert", cfg.router.worker_tls_cert);
    check_pem_file("router.worker_tls_key", cfg.router.worker_tls_key);
    check_pem_file("router.worker_tls_ca", cfg.router.worker_tls_ca);
    check_gate_tls({cfg.router.worker_tls_cert, cfg.router.worker_tls_key, cfg.router.worker_tls_ca});
  }
  return secret;
}

struct listen_probe {
  std::string port_key; // named when its port is another listener's
  std::string bind_key; // named when it cannot bind
  net::ip::address address;
  std::string host;
  std::int64_t port = 0;
};

// Bound and let go at once, never listening: a port another process holds,
// or an address not this machine's, is refused before any port opens.
void probe(const listen_probe& l) {
  net::io_context ioc;
  tcp::acceptor a(ioc);
  const tcp::endpoint ep(l.address, static_cast<std::uint16_t>(l.port));
  boost::system::error_code ec;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (ec)
    throw config_error(l.bind_key + ": cannot listen on " + l.host + ":" + std::to_string(l.port) + ": " +
                       ec.message());
}

// The API's listener, server.metrics_port's and router.worker_port's.
void check_listeners(const server_config& cfg) {
  boost::system::error_code ec;
  const auto host = net::ip::make_address(cfg.server.host, ec);
  if (ec) throw config_error("server.host: '" + cfg.server.host + "' is not an IP address");
  std::vector<listen_probe> ls{{"server.port", "server.port", host, cfg.server.host, cfg.server.port}};
  if (cfg.server.metrics_port >= 0) {
    const auto& mh = cfg.server.metrics_host.empty() ? cfg.server.host : cfg.server.metrics_host;
    const auto address = net::ip::make_address(mh, ec);
    const auto* key = cfg.server.metrics_host.empty() ? "server.metrics_port" : "server.metrics_host";
    if (ec) throw config_error(std::string(key) + ": '" + mh + "' is not an IP address");
    ls.push_back({"server.metrics_port", key, address, mh, cfg.server.metrics_port});
  }
  if (cfg.router.worker_port >= 0)
    ls.push_back({"router.worker_port", "router.worker_port", host, cfg.server.host, cfg.router.worker_port});
  for (std::size_t i = 0; i < ls.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (ls[i].port != 0 && ls[i].port == ls[j].port &&
          (ls[i].address == ls[j].address || ls[i].address.is_unspecified() || ls[j].address.is_unspecified()))
        throw config_error(ls[i].port_key + ": " + std::to_string(ls[i].port) + " is " + ls[j].port_key + " too");
    probe(ls[i]);
  }
}

} // namespace

auto check_serve_config(const server_config& cfg) -> serve_plan {
  serve_plan out;
  const auto names = check_fleet_names(cfg);
  if (cfg.router.worker_port >= 0) out.worker_secret = check_worker_link(cfg);
  out.models.push_back(plan_model(cfg, names.front(), 0));
  for (std::size_t i = 0; i < cfg.model.more.size(); ++i)
    out.models.push_back(
        plan_model(config_of_more(cfg, i, names[i + 1]), names[i + 1], cfg.model.more[i].canary_percent));
  // Last: the ports are probed just before serve binds them.
  check_listeners(cfg);
  return out;
}

} // namespace troupe::cli
