#include "cli/args.hpp"

#include <sstream>

#include <charconv>
#include <cstdlib>

namespace troupe::cli {

args::args(std::span<char* const> argv, const std::set<std::string>& options,
           const std::set<std::string>& flags, std::size_t max_positional) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") throw help_requested{};
    if (a.rfind("--", 0) != 0) {
      if (positional_.size() >= max_positional) throw usage_error("unexpected argument '" + a + "'");
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    if (flags.contains(name)) {
      if (has_value) throw usage_error("--" + name + " takes no value");
      flags_.insert(name);
    } else if (options.contains(name)) {
      if (!has_value) {
        if (i + 1 >= argv.size()) throw usage_error("--" + name + " needs a value");
        value = argv[++i];
      }
      all_[name].push_back(value);
    } else {
      throw usage_error("unknown option --" + name);
    }
  }
}

auto args::all(const std::string& name) const -> std::vector<std::string> {
  const auto it = all_.find(name);
  return it == all_.end() ? std::vector<std::string>{} : it->second;
}

auto args::last(const std::string& name) const -> const std::string* {
  const auto it = all_.find(name);
  return it == all_.end() ? nullptr : &it->second.back();
}

auto args::key_values(const std::string& name) const -> std::vector<std::pair<std::string, std::string>> {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& v : all(name)) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw usage_error("--" + name + " expects key=value, got '" + v + "'");
    out.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  return out;
}

auto args::has(const std::string& name) const -> bool {
  return flags_.contains(name) || all_.contains(name);
}

auto args::str(const std::string& name, const std::string& fallback) const -> std::string {
  const auto* v = last(name);
  return v == nullptr ? fallback : *v;
}

auto args::required(const std::string& name) const -> std::string {
  const auto* v = last(name);
  if (v == nullptr) throw usage_error("--" + name + " is required");
  return *v;
}

auto args::integer(const std::string& name, std::int64_t fallback) const -> std::int64_t {
  const auto* value = last(name);
  if (value == nullptr) return fallback;
  std::int64_t v = 0;
  const auto& s = *value;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size())
    throw usage_error("--" + name + " expects an integer, got '" + s + "'");
  return v;
}

auto args::maybe_real(const std::string& name) const -> std::optional<double> {
  const auto* value = last(name);
  if (value == nullptr) return std::nullopt;
  const auto& s = *value;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size())
    throw usage_error("--" + name + " expects a number, got '" + s + "'");
  return v;
}

auto args::real(const std::string& name, double fallback) const -> double {
  return maybe_real(name).value_or(fallback);
}

auto parse_list(const std::string& s, const std::string& name) -> std::vector<int> {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size() || out.back() < 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw usage_error("--" + name + " expects comma-separated non-negative integers");
    }
  }
  if (out.empty()) throw usage_error("--" + name + " is empty");
  return out;
}

} // namespace troupe::cli
