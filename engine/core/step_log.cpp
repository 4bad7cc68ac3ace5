#include "engine/core/step_log.hpp"

#include <charconv>
#include <cstring>
#include <stdexcept>

namespace troupe::step_log {
namespace {

// An integer, or the shortest text that reads back as exactly the double
// (a replay's clock equals the server's).
template <class Number>
void put_number(std::string& s, Number v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

template <class Int>
void put_list(std::string& s, std::span<const Int> v) {
  if (v.empty()) {
    s += '-';
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    put_number(s, v[i]);
  }
}

void put_copies(std::string& s, const std::vector<block_copy>& v) {
  if (v.empty()) {
    s += '-';
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    put_number(s, v[i].from);
    s += '>';
    put_number(s, v[i].to);
  }
}

auto split(const std::string& line) -> std::vector<std::string> {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const auto j = line.find(' ', i);
    if (i < line.size()) out.push_back(line.substr(i, j == std::string::npos ? std::string::npos : j - i));
    i = j == std::string::npos ? line.size() : j;
  }
  return out;
}

template <class T>
auto parse_num(const std::string& s, T& v) -> bool {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

// A list of numbers between `sep`s; "-" is the empty list.
template <class Int>
auto parse_list(const std::string& s, std::vector<Int>& out, char sep = ',') -> bool {
  out.clear();
  if (s == "-") return true;
  std::size_t i = 0;
  while (i <= s.size()) {
    const auto j = std::min(s.find(sep, i), s.size());
    Int v{};
    if (!parse_num(s.substr(i, j - i), v)) return false;
    out.push_back(v);
    i = j + 1;
  }
  return true;
}

} // namespace

auto plan_of(const scheduler_output& out) -> std::string {
  if (out.empty()) return "empty";
  std::string s = "new=";
  std::vector<request_id> ids;
  for (const auto& n : out.new_requests) ids.push_back(n.id);
  put_list<request_id>(s, ids);
  s += " fin=";
  put_list<request_id>(s, out.finished);
  s += " out=";
  put_copies(s, out.swap_out);
  s += " in=";
  put_copies(s, out.swap_in);
  s += " chunks=";
  if (out.scheduled.empty()) s += '-';
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const auto& c = out.scheduled[i];
    if (i) s += ';';
    put_number(s, c.id);
    s += '/';
    put_number(s, c.num_computed_tokens);
    s += '/';
    put_number(s, c.num_tokens);
    s += c.sample ? "/1/" : "/0/";
    s += c.reset_blocks ? 'r' : 'a';
    put_list<block_id>(s, out.new_blocks_of(c));
  }
  return s;
}

writer::writer(const std::filesystem::path& file, const setup& st) : f_(std::fopen(file.c_str(), "w")) {
  if (!f_) throw std::runtime_error(file.string() + ": cannot write the step log: " + std::strerror(errno));
  const auto& l = st.limits;
  std::string s = "# troupe step log v1\nconfig policy=" + st.policy;
  const auto kv = [&s](const char* k, std::int64_t v) {
    s += ' ';
    s += k;
    s += '=';
    put_number(s, v);
  };
  kv("block_size", st.kv.block_size);
  kv("watermark_blocks", st.kv.watermark_blocks);
  kv("prefix_caching", st.kv.enable_prefix_caching);
  if (st.kv.sliding_window_tokens > 0) kv("sliding_window", st.kv.sliding_window_tokens);
  kv("max_num_seqs", l.max_num_seqs);
  kv("max_num_batched_tokens", l.max_num_batched_tokens);
  kv("max_model_len", l.max_model_len);
  kv("max_waiting_requests", l.max_waiting_requests);
  kv("max_waiting_tokens", l.max_waiting_tokens);
  kv("max_input_tokens", l.max_input_tokens);
  kv("max_output_tokens", l.max_output_tokens);
  kv("swap", l.preemption == preemption_mode::swap);
  kv("host_blocks", l.num_host_blocks);
  kv("first_host_block", l.first_host_block);
  kv("long_prefill_token_threshold", l.long_prefill_token_threshold);
  kv("max_num_partial_prefills", l.max_num_partial_prefills);
  s += " prefill_chunk_cost=";
  put_number(s, l.prefill_chunk_cost);
  kv("share", st.share);
  s += " eos=";
  put_list<token_id>(s, st.eos_ids);
  s += '\n';
  std::fputs(s.c_str(), f_.get());
}

void writer::lease(double t, std::span<const block_id> blocks) {
  line_ = "lease ";
  put_number(line_, t);
  line_ += ' ';
  put_list<block_id>(line_, blocks);
  line_ += '\n';
  put();
}

void writer::shrink(double t, std::int64_t keep) {
  line_ = "shrink ";
  put_number(line_, t);
  line_ += ' ';
  put_number(line_, keep);
  line_ += '\n';
  put();
}

void writer::submit(double t, const request& r, int status) {
  line_ = "submit ";
  put_number(line_, t);
  line_ += ' ';
  put_number(line_, status);
  line_ += ' ';
  put_number(line_, r.id);
  line_ += ' ';
  put_number(line_, r.tenant); // unsigned: a hash of the user's name
  line_ += ' ';
  put_number(line_, r.priority);
  line_ += ' ';
  put_number(line_, r.arrival_s);
  line_ += ' ';
  put_number(line_, r.sampling.max_tokens);
  line_ += r.sampling.ignore_eos ? " 1 " : " 0 ";
  put_list<token_id>(line_, r.sampling.stop_token_ids);
  line_ += ' ';
  put_list<token_id>(line_, r.prompt);
  line_ += ' ';
  put_list<block_id>(line_, r.matched_blocks);
  if (r.group != 0) { // one choice of several: its fork group and index
    line_ += ' ';
    put_number(line_, r.group);
    line_ += '/';
    put_number(line_, r.choice);
  }
  line_ += '\n';
  put();
}

void writer::abort(double t, request_id id) {
  line_ = "abort ";
  put_number(line_, t);
  line_ += ' ';
  put_number(line_, static_cast<std::int64_t>(id));
  line_ += '\n';
  put();
}

void writer::schedule(double t, double now_s, const scheduler_output& out) {
  line_ = "schedule ";
  put_number(line_, t);
  line_ += ' ';
  put_number(line_, now_s);
  line_ += ' ';
  line_ += plan_of(out);
  line_ += '\n';
  put();
}

auto parse_step(const std::string& line, step_timing& out) -> std::string {
  const auto w = split(line);
  out = {};
  if (w.size() < 4 || w[0] != "step" || !parse_num(w[1], out.start) || !parse_num(w[2], out.duration) ||
      !parse_num(w[3], out.swapped_blocks) || out.duration < 0)
    return "expected step <start s> <duration s> <swapped blocks> <chunk>...";
  for (std::size_t i = 4; i < w.size(); ++i) {
    // <id>/<computed>/<tokens>/<sample 0|1>
    std::vector<std::int64_t> f;
    std::size_t p = 0;
    bool ok = true;
    while (ok && p <= w[i].size() && f.size() < 5) {
      const auto q = std::min(w[i].find('/', p), w[i].size());
      std::int64_t v = 0;
      ok = parse_num(w[i].substr(p, q - p), v);
      f.push_back(v);
      p = q + 1;
    }
    if (!ok || f.size() != 4 || f[1] < 0 || f[2] < 1 || (f[3] != 0 && f[3] != 1))
      return "chunk \"" + w[i] + "\" is not <id>/<computed>/<tokens>/<sample 0|1>";
    out.chunks.push_back({f[1], f[2], f[3] == 1});
  }
  return "";
}

void writer::step(double start, double duration, const scheduler_output& out, const step_result& result) {
  line_ = "step ";
  put_number(line_, start);
  line_ += ' ';
  put_number(line_, duration);
  line_ += ' ';
  put_number(line_, static_cast<std::int64_t>(out.swap_out.size() + out.swap_in.size()));
  for (const auto& c : out.scheduled) {
    line_ += ' ';
    put_number(line_, static_cast<std::int64_t>(c.id));
    line_ += '/';
    put_number(line_, c.num_computed_tokens);
    line_ += '/';
    put_number(line_, c.num_tokens);
    line_ += c.sample ? "/1" : "/0";
  }
  line_ += "\nsampled";
  for (const auto& s : result.sampled) {
    line_ += ' ';
    put_number(line_, static_cast<std::int64_t>(s.id));
    line_ += ':';
    put_number(line_, s.result.token);
    for (const auto f : s.result.forced) {
      line_ += '+';
      put_number(line_, f);
    }
  }
  line_ += '\n';
  put();
}

void writer::put() {
  std::fputs(line_.c_str(), f_.get());
  if (++unflushed_ >= 256) flush();
}

void writer::flush() {
  std::fflush(f_.get());
  unflushed_ = 0;
}

reader::reader(const std::filesystem::path& file) : file_(file), f_(std::fopen(file.c_str(), "r"), &std::fclose) {
  if (!f_) throw std::runtime_error(file.string() + ": cannot read the step log");
  // The config line: the first that is not a comment.
  std::string line;
  (void)read_line(line);
  const auto w = split(line);
  if (w.empty() || w[0] != "config") fail("expected the config line of a `troupe serve --step-log` file");
  auto& l = setup_.limits;
  for (std::size_t i = 1; i < w.size(); ++i) {
    const auto eq = w[i].find('=');
    if (eq == std::string::npos) fail("config: \"" + w[i] + "\" is not key=value");
    const auto k = w[i].substr(0, eq), v = w[i].substr(eq + 1);
    std::int64_t n = 0;
    if (k == "policy") setup_.policy = v;
    else if (k == "prefill_chunk_cost") {
      if (!parse_num(v, l.prefill_chunk_cost) || l.prefill_chunk_cost < 0) fail("config: bad prefill_chunk_cost");
    } else if (k == "eos") {
      if (!parse_list(v, setup_.eos_ids)) fail("config: bad eos list");
    } else if (!parse_num(v, n)) fail("config: " + k + " is not an integer");
    else if (k == "block_size") setup_.kv.block_size = static_cast<std::int32_t>(n);
    else if (k == "watermark_blocks") setup_.kv.watermark_blocks = static_cast<std::int32_t>(n);
    else if (k == "prefix_caching") setup_.kv.enable_prefix_caching = n != 0;
    else if (k == "sliding_window") setup_.kv.sliding_window_tokens = static_cast<std::int32_t>(n);
    else if (k == "max_num_seqs") l.max_num_seqs = static_cast<std::int32_t>(n);
    else if (k == "max_num_batched_tokens") l.max_num_batched_tokens = static_cast<std::int32_t>(n);
    else if (k == "max_model_len") l.max_model_len = static_cast<std::int32_t>(n);
    else if (k == "max_waiting_requests") l.max_waiting_requests = static_cast<std::int32_t>(n);
    else if (k == "max_waiting_tokens") l.max_waiting_tokens = n;
    else if (k == "max_input_tokens") l.max_input_tokens = static_cast<std::int32_t>(n);
    else if (k == "max_output_tokens") l.max_output_tokens = static_cast<std::int32_t>(n);
    else if (k == "swap") l.preemption = n ? preemption_mode::swap : preemption_mode::recompute;
    else if (k == "host_blocks") l.num_host_blocks = static_cast<std::int32_t>(n);
    else if (k == "first_host_block") l.first_host_block = static_cast<block_id>(n);
    else if (k == "long_prefill_token_threshold") l.long_prefill_token_threshold = static_cast<std::int32_t>(n);
    else if (k == "max_num_partial_prefills") l.max_num_partial_prefills = static_cast<std::int32_t>(n);
    else if (k == "share") setup_.share = n;
    else fail("config: unknown key " + k);
  }
}

void reader::fail(const std::string& what) const {
  throw std::runtime_error(file_.string() + ":" + std::to_string(line_no_) + ": " + what);
}

auto reader::read_line(std::string& line) -> bool {
  for (;;) {
    line.clear();
    char buf[1 << 14];
    bool got = false;
    while (std::fgets(buf, sizeof buf, f_.get())) {
      got = true;
      line += buf;
      if (line.back() == '\n') break;
    }
    if (!got) return false;
    ++line_no_;
    if (line.back() == '\n') line.pop_back();
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    return true;
  }
}

void reader::read_submit(const std::vector<std::string>& w, event& e) const {
  auto& r = e.req;
  int ignore_eos = 0;
  if (!parse_num(w[2], e.status) || !parse_num(w[3], r.id) || !parse_num(w[4], r.tenant) ||
      !parse_num(w[5], r.priority) || !parse_num(w[6], r.arrival_s) || !parse_num(w[7], r.sampling.max_tokens) ||
      !parse_num(w[8], ignore_eos) || !parse_list(w[9], r.sampling.stop_token_ids) || !parse_list(w[10], r.prompt) ||
      !parse_list(w[11], r.matched_blocks))
    fail("submit: malformed");
  r.sampling.ignore_eos = ignore_eos != 0;
  if (w.size() > 12) {
    const auto slash = w[12].find('/');
    if (slash == std::string::npos || !parse_num(w[12].substr(0, slash), r.group) ||
        !parse_num(w[12].substr(slash + 1), r.choice) || r.group == 0)
      fail("submit: \"" + w[12] + "\" is not <group>/<choice>");
  }
}

void reader::read_sampled(const std::vector<std::string>& w, event& e) const {
  for (std::size_t i = 1; i < w.size(); ++i) {
    const auto colon = w[i].find(':');
    sampled_token s;
    // <token>, then the tokens a grammar forced after it, each after a '+'.
    std::vector<token_id> tokens;
    const bool ok = colon != std::string::npos && parse_num(w[i].substr(0, colon), s.id) &&
                    w[i].compare(colon + 1, std::string::npos, "-") != 0 &&
                    parse_list(w[i].substr(colon + 1), tokens, '+');
    if (!ok) fail("sampled: \"" + w[i] + "\" is not <id>:<token>[+<forced token>...]");
    s.result.token = tokens.front();
    s.result.forced.assign(tokens.begin() + 1, tokens.end());
    e.result.sampled.push_back(s);
  }
}

auto reader::next() -> std::optional<event> {
  std::string line;
  if (!read_line(line)) return std::nullopt;
  event e;
  if (line.starts_with("step ")) { // its duration paces the replayed core (batch_scheduler::observe_step)
    step_timing timing;
    if (const auto why = parse_step(line, timing); !why.empty()) fail(why);
    e.type = event::kind::step;
    e.t = timing.start;
    e.duration = timing.duration;
    return e;
  }
  const auto w = split(line);
  const auto need = [&](std::size_t n) {
    if (w.size() < n) fail(w[0] + ": expected " + std::to_string(n - 1) + " fields");
  };
  const auto time = [&] {
    need(2);
    if (!parse_num(w[1], e.t)) fail(w[0] + ": bad time \"" + w[1] + "\"");
  };
  if (w[0] == "lease") {
    e.type = event::kind::lease;
    time();
    need(3);
    if (!parse_list(w[2], e.blocks)) fail("lease: bad block list");
  } else if (w[0] == "shrink") {
    e.type = event::kind::shrink;
    time();
    need(3);
    if (!parse_num(w[2], e.keep)) fail("shrink: bad count");
  } else if (w[0] == "submit") {
    e.type = event::kind::submit;
    time();
    need(12);
    read_submit(w, e);
  } else if (w[0] == "abort") {
    e.type = event::kind::abort;
    time();
    need(3);
    if (!parse_num(w[2], e.req.id)) fail("abort: bad id");
  } else if (w[0] == "schedule") {
    e.type = event::kind::schedule;
    time();
    need(4);
    if (!parse_num(w[2], e.now_s)) fail("schedule: bad clock");
    for (std::size_t i = 3; i < w.size(); ++i) e.plan += (i > 3 ? " " : "") + w[i];
  } else if (w[0] == "sampled") {
    e.type = event::kind::sampled;
    read_sampled(w, e);
  } else {
    fail("unknown event \"" + w[0] + "\"");
  }
  return e;
}

} // namespace troupe::step_log
