#pragma once
// A small command-line parser: `--name value` options and `--flag` switches,
// each declared up front so that anything else is a usage error.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::cli {

/// A usage error: main prints the message and the command's usage, exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// --help or -h among a command's arguments: main prints its usage to
/// stdout and exits 0.
struct help_requested : std::exception {};

/// "1,8,32" -> {1, 8, 32}: comma-separated non-negative integers; a
/// usage_error naming --name otherwise.
auto parse_list(const std::string& s, const std::string& name) -> std::vector<int>;

class args {
public:
  /// Parses argv after the subcommand: up to max_positional plain
  /// arguments, options (given more than once: the last wins, all() has
  /// every one) and flags. Throws usage_error for an unknown option, a
  /// missing value or a stray positional argument; help_requested for
  /// --help or -h (where it is not an option's value).
  args(std::span<char* const> argv, const std::set<std::string>& options,
       const std::set<std::string>& flags, std::size_t max_positional = 0);

  auto has(const std::string& name) const -> bool;
  auto str(const std::string& name, const std::string& fallback) const -> std::string;
  auto required(const std::string& name) const -> std::string;
  auto integer(const std::string& name, std::int64_t fallback) const -> std::int64_t;
  auto real(const std::string& name, double fallback) const -> double;
  auto maybe_real(const std::string& name) const -> std::optional<double>;
  auto all(const std::string& name) const -> std::vector<std::string>;
  auto positional() const -> const std::vector<std::string>& { return positional_; }
  /// Every --set KEY=VALUE, split at its first '='.
  auto key_values(const std::string& name) const -> std::vector<std::pair<std::string, std::string>>;

private:
  auto last(const std::string& name) const -> const std::string*; ///< the option's last value, or nullptr
  std::map<std::string, std::vector<std::string>> all_; ///< every value of each option, in order
  std::vector<std::string> positional_;
  std::set<std::string> flags_;
};

} // namespace troupe::cli
