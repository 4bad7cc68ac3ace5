#include "sim/trace.hpp"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

namespace troupe::sim {
namespace {

/// A CSV line's cells, spaces around each trimmed; a double-quoted cell may
/// hold commas ("" is a quote).
auto split(const std::string& s) -> std::vector<std::string> {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') cells.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else cells.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  for (auto& c : cells) {
    while (!c.empty() && c.front() == ' ') c.erase(c.begin());
    while (!c.empty() && c.back() == ' ') c.pop_back();
  }
  return cells;
}

auto integer_of(const std::string& c, std::int64_t& v) -> bool {
  const auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), v);
  return ec == std::errc{} && p == c.data() + c.size();
}

auto number_of(const std::string& c, double& v) -> bool {
  const auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), v);
  return ec == std::errc{} && p == c.data() + c.size() && std::isfinite(v);
}

/// Days from 1970-01-01 to a proleptic Gregorian date.
auto days_from_civil(std::int64_t y, std::int64_t m, std::int64_t d) -> std::int64_t {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/// "YYYY-MM-DD HH:MM:SS[.fraction][Z|±HH:MM]" (a 'T' for the space too;
/// Azure 2024 writes "+00:00"): whole seconds since 1970 (UTC) and the fraction.
auto parse_date_time(std::string s, std::int64_t& whole, double& fraction) -> bool {
  std::int64_t offset_s = 0;
  if (!s.empty() && s.back() == 'Z') {
    s.pop_back();
  } else if (s.size() >= 25 && (s[s.size() - 6] == '+' || s[s.size() - 6] == '-') && s[s.size() - 3] == ':') {
    int oh = 0, om = 0;
    const auto* p = s.data() + s.size() - 5;
    if (std::from_chars(p, p + 2, oh).ptr != p + 2 || std::from_chars(p + 3, p + 5, om).ptr != p + 5) return false;
    offset_s = (s[s.size() - 6] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    s.resize(s.size() - 6);
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  const auto field = [&](std::size_t at, std::size_t n, int& out) {
    if (at + n > s.size()) return false;
    const auto [p, ec] = std::from_chars(s.data() + at, s.data() + at + n, out);
    return ec == std::errc{} && p == s.data() + at + n;
  };
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':')
    return false;
  if (!field(0, 4, y) || !field(5, 2, mo) || !field(8, 2, d) || !field(11, 2, h) || !field(14, 2, mi) ||
      !field(17, 2, sec) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return false;
  fraction = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) return false;
    double scale = 0.1;
    for (std::size_t i = 20; i < s.size(); ++i, scale /= 10) {
      if (s[i] < '0' || s[i] > '9') return false;
      fraction += (s[i] - '0') * scale;
    }
  }
  whole = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  return true;
}

class reader {
public:
  reader(const std::filesystem::path& file, const trace_options& o, std::vector<std::string>& tenants)
    : file_(file), o_(o), tenants_(tenants) {}

  auto where() const -> std::string { return file_.string() + ":" + std::to_string(line_no_) + ": "; }
  [[noreturn]] void fail(const std::string& why) const { throw scenario_error(where() + why); }

  auto full() const -> bool { return o_.max_rows > 0 && static_cast<std::int64_t>(t_.requests.size()) >= o_.max_rows; }

  /// A row's time, rebased (public formats) and scaled; checked to go
  /// forward (`raw`: the time as the file has it, for the message).
  void arrive(sim_request& r, double t, double raw, const std::string& cell, const char* column) {
    if (t < last_) fail(std::string(column) + " goes back in time (" + cell + " after " + std::to_string(last_raw_) + ")");
    last_ = t;
    last_raw_ = raw;
    r.arrival_s = t * o_.time_scale;
  }
  /// A token count of a public format: >= 0 (0 skips the row), at most 2^30.
  auto tokens(const std::string& c, const char* column) const -> std::int32_t {
    std::int64_t v = 0;
    if (!integer_of(c, v) || v < 0 || v > (1 << 30))
      fail(std::string(column) + ": \"" + c + "\" is not an integer in [0, 2^30]");
    return static_cast<std::int32_t>(v);
  }
  /// Keeps a request, or counts a failed one (no prompt or no output).
  void keep(sim_request r, std::vector<std::uint64_t> blocks = {}) {
    if (r.prompt_tokens == 0 || r.output_tokens == 0) {
      ++t_.skipped;
      return;
    }
    r.index = static_cast<std::int64_t>(t_.requests.size());
    t_.requests.push_back(r);
    if (t_.format == "mooncake") t_.blocks.push_back(std::move(blocks));
  }

  auto read() -> trace {
    std::ifstream in(file_);
    if (!in) throw scenario_error(file_.string() + ": cannot read the trace");
    std::string line;
    std::vector<std::string> columns;
    while (!full() && std::getline(in, line)) {
      ++line_no_;
      if (line.empty() || line == "\r" || (line[0] == '#' && t_.format != "mooncake")) continue;
      if (t_.format.empty()) {
        t_.format = format_of(line);
        if (t_.format == "mooncake") {
          mooncake_row(line);
          continue;
        }
        columns = split(line);
        check_columns(columns);
        continue;
      }
      if (t_.format == "mooncake") mooncake_row(line);
      else csv_row(columns, split(line));
    }
    if (t_.requests.empty()) throw scenario_error(file_.string() + ": the trace holds no request");
    return std::move(t_);
  }

private:
  auto format_of(const std::string& first) const -> std::string {
    std::string found;
    if (first.find_first_not_of(" \t") != std::string::npos && first[first.find_first_not_of(" \t")] == '{') {
      found = "mooncake";
    } else {
      const auto cells = split(first);
      const auto has = [&](const char* c) { return std::find(cells.begin(), cells.end(), c) != cells.end(); };
      if (has("arrival_s")) found = "troupe";
      else if (has("TIMESTAMP") && has("ContextTokens") && has("GeneratedTokens")) found = "azure";
      else if (has("Timestamp") && has("Request tokens") && has("Response tokens")) found = "burstgpt";
    }
    if (found.empty())
      fail("the first line matches no trace format (troupe: arrival_s, prompt_tokens, output_tokens, ...; Azure: "
           "TIMESTAMP, ContextTokens, GeneratedTokens; BurstGPT: Timestamp, Model, Request tokens, Response tokens, "
           "...; Mooncake: JSON lines)");
    if (o_.format != "auto" && o_.format != found) fail("a " + found + " trace, not " + o_.format);
    return found;
  }

  void check_columns(const std::vector<std::string>& columns) const {
    if (t_.format != "troupe") return; // the public formats' other columns are theirs
    for (const char* need : {"arrival_s", "prompt_tokens", "output_tokens"})
      if (std::find(columns.begin(), columns.end(), need) == columns.end())
        fail(std::string("the header names no column ") + need +
             " (columns: arrival_s, prompt_tokens, output_tokens, tenant, priority, prefix_group)");
    for (const auto& c : columns)
      if (c != "arrival_s" && c != "prompt_tokens" && c != "output_tokens" && c != "tenant" && c != "priority" &&
          c != "prefix_group")
        fail("unknown column \"" + c + "\"");
  }

  void csv_row(const std::vector<std::string>& columns, const std::vector<std::string>& cells) {
    if (cells.size() != columns.size())
      fail(std::to_string(cells.size()) + " cells, the header has " + std::to_string(columns.size()));
    sim_request r;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const auto& c = cells[i];
      const auto& col = columns[i];
      if (t_.format == "troupe") troupe_cell(r, col, c);
      else if (t_.format == "azure") azure_cell(r, col, c);
      else burstgpt_cell(r, col, c);
    }
    if (t_.format == "troupe" && r.prefix_group >= 0) r.prefix_tokens = std::min(o_.prefix_tokens, r.prompt_tokens - 1);
    keep(r);
  }

  void troupe_cell(sim_request& r, const std::string& col, const std::string& c) {
    const auto integer = [&](std::int64_t lo) {
      std::int64_t v = 0;
      if (!integer_of(c, v) || v < lo || v > (1 << 30))
        fail(col + ": \"" + c + "\" is not an integer in [" + std::to_string(lo) + ", 2^30]");
      return static_cast<std::int32_t>(v);
    };
    if (col == "arrival_s") {
      double v = 0;
      if (!number_of(c, v) || v < 0) fail("arrival_s: \"" + c + "\" is not a time in seconds >= 0");
      arrive(r, v, v, c, "arrival_s");
    } else if (col == "prompt_tokens") {
      r.prompt_tokens = integer(1);
    } else if (col == "output_tokens") {
      r.output_tokens = integer(1);
    } else if (col == "priority" && !c.empty()) {
      r.priority = integer(-1'000'000);
    } else if (col == "prefix_group" && !c.empty()) {
      r.prefix_group = integer(0);
    } else if (col == "tenant" && !c.empty()) {
      const auto at = std::find(tenants_.begin(), tenants_.end(), c) - tenants_.begin();
      if (at == static_cast<std::ptrdiff_t>(tenants_.size())) tenants_.push_back(c);
      r.tenant = static_cast<std::int32_t>(at);
    }
  }

  void azure_cell(sim_request& r, const std::string& col, const std::string& c) {
    if (col == "TIMESTAMP") {
      std::int64_t whole = 0;
      double fraction = 0;
      if (!parse_date_time(c, whole, fraction))
        fail("TIMESTAMP: \"" + c + "\" is not a date and time like 2023-11-16 18:15:46.6805900");
      if (!started_) start_s_ = whole, start_ = fraction, started_ = true;
      const double t = static_cast<double>(whole - start_s_) + (fraction - start_);
      arrive(r, t, t, c, "TIMESTAMP");
    } else if (col == "ContextTokens") {
      r.prompt_tokens = tokens(c, "ContextTokens");
    } else if (col == "GeneratedTokens") {
      r.output_tokens = tokens(c, "GeneratedTokens");
    }
  }

  void burstgpt_cell(sim_request& r, const std::string& col, const std::string& c) {
    if (col == "Timestamp") {
      double v = 0;
      if (!number_of(c, v) || v < 0) fail("Timestamp: \"" + c + "\" is not a time in seconds >= 0");
      if (!started_) start_ = v, started_ = true;
      arrive(r, v - start_, v, c, "Timestamp");
    } else if (col == "Request tokens") {
      r.prompt_tokens = tokens(c, "Request tokens");
    } else if (col == "Response tokens") {
      r.output_tokens = tokens(c, "Response tokens");
    }
  }

  void mooncake_row(const std::string& line) {
    simdjson::padded_string text(line);
    simdjson::dom::element row;
    simdjson::dom::object fields;
    if (parser_.parse(text).get(row) != simdjson::SUCCESS || row.get_object().get(fields) != simdjson::SUCCESS)
      fail("not a JSON object");
    // Qwen-Bailian's rows add a conversation's fields, and their times are
    // seconds; Mooncake's are milliseconds.
    bool bailian = false;
    for (const auto field : fields) {
      const auto k = field.key;
      if (k == "chat_id" || k == "parent_chat_id" || k == "type" || k == "turn") {
        bailian = true;
      } else if (k != "timestamp" && k != "input_length" && k != "output_length" && k != "hash_ids") {
        fail("unknown field \"" + std::string(k) +
             "\" (fields: timestamp, input_length, output_length, hash_ids; Qwen-Bailian's chat_id, parent_chat_id, "
             "type, turn)");
      }
    }
    const auto count = [&](const char* key) -> std::int64_t {
      std::int64_t v = 0;
      if (row[key].get_int64().get(v) != simdjson::SUCCESS || v < 0 || v > (1 << 30))
        fail(std::string(key) + ": missing, or not an integer in [0, 2^30]");
      return v;
    };
    sim_request r;
    double stamp = 0;
    if (row["timestamp"].get_double().get(stamp) != simdjson::SUCCESS || !std::isfinite(stamp) || stamp < 0)
      fail(std::string("timestamp: missing, or not a time in ") + (bailian ? "seconds" : "milliseconds") + " >= 0");
    if (!started_) start_ = stamp, started_ = true;
    arrive(r, (stamp - start_) / (bailian ? 1 : 1000), stamp, std::to_string(stamp), "timestamp");
    r.prompt_tokens = static_cast<std::int32_t>(count("input_length"));
    r.output_tokens = static_cast<std::int32_t>(count("output_length"));
    std::vector<std::uint64_t> ids;
    simdjson::dom::array list;
    if (row["hash_ids"].get_array().get(list) != simdjson::SUCCESS) fail("hash_ids: missing, or not an array");
    for (const auto e : list) {
      std::uint64_t id = 0;
      if (e.get_uint64().get(id) != simdjson::SUCCESS) fail("hash_ids: an id that is not an integer >= 0");
      ids.push_back(id);
    }
    if (r.prompt_tokens == 0 || r.output_tokens == 0) return keep(r); // a failed request: counted, left out
    // One id per block of the prompt, the last one partial.
    const auto blocks = (static_cast<std::int64_t>(r.prompt_tokens) + o_.block_tokens - 1) / o_.block_tokens;
    if (static_cast<std::int64_t>(ids.size()) != blocks)
      fail("hash_ids: " + std::to_string(ids.size()) + " ids for input_length " + std::to_string(r.prompt_tokens) +
           ", which is " + std::to_string(blocks) + " blocks of " + std::to_string(o_.block_tokens) +
           " tokens (another block size? arrival.trace_block_tokens, --trace-block-tokens)");
    keep(r, std::move(ids));
  }

  const std::filesystem::path& file_;
  const trace_options& o_;
  std::vector<std::string>& tenants_;
  trace t_;
  std::int64_t line_no_ = 0;
  double last_ = -INFINITY; ///< the last row's time, before scaling
  double last_raw_ = 0;     ///< and as its file has it
  bool started_ = false;
  double start_ = 0;          ///< burstgpt, mooncake: the first row's time; azure: its fraction of a second
  std::int64_t start_s_ = 0;  ///< azure: the first row's whole seconds
  simdjson::dom::parser parser_;
};

} // namespace

auto trace_format_names() -> std::vector<std::string> { return {"auto", "troupe", "azure", "burstgpt", "mooncake"}; }

auto read_trace(const std::filesystem::path& file, const trace_options& options, std::vector<std::string>& tenants)
    -> trace {
  return reader(file, options, tenants).read();
}

} // namespace troupe::sim
