#pragma once
// The step log (`troupe serve --step-log FILE`): what one replica's
// scheduler core was given and what it decided, one line per event, so that
//  - the simulator's calibrated cost model can be fitted to real step times
//    (the `step` lines: sim/cost_model.hpp), and
//  - a replay can drive the same core with the same inputs and check that it
//    schedules exactly the same batches (the `schedule` lines).
//
//   # troupe step log v1
//   config policy=fcfs block_size=16 ... share=N eos=2
//   lease <t> <block,...>            blocks added to the replica's lease
//   shrink <t> <keep>                free lease blocks beyond keep handed back
//   submit <t> <status> <id> <tenant> <priority> <arrival_s> <max_tokens>
//          <ignore_eos> <stop ids|-> <prompt ids> <matched blocks|-> [<group>/<choice>]
//   abort <t> <id>
//   schedule <t> <now_s> <plan>      the core's scheduler_output, as plan_of() writes it
//   step <t> <duration> <swapped blocks> <id>/<computed>/<tokens>/<sample 0|1>...
//   sampled <id>:<token>[+<forced>...]...  the executor's result, applied with update()
//                                    (+: tokens a grammar forced after it, jump-forward)
//
// Times are seconds since the replica started. Lines are in the order the
// replica's actor handled the events.

#include "engine/core/batch_scheduler.hpp"
#include "engine/core/kv_cache_manager.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace troupe::step_log {

/// What a replay needs to build the same core.
struct setup {
  std::string policy = "fcfs";
  scheduler_limits limits;
  kv_cache_options kv;
  std::int64_t share = 0; ///< the lease's capacity
  std::vector<token_id> eos_ids;
};

/// A scheduler_output as one line of text: equal outputs, equal text.
auto plan_of(const scheduler_output& out) -> std::string;

/// A `step` line: when the step started, how long it took, the blocks it
/// swapped, and each chunk's (computed, tokens, sample).
struct step_timing {
  struct chunk {
    std::int64_t computed = 0, tokens = 0;
    bool sample = false;
  };
  double start = 0, duration = 0;
  std::int64_t swapped_blocks = 0;
  std::vector<chunk> chunks;
};
/// Parses a line starting with "step "; "" when it is well formed, else what is wrong.
auto parse_step(const std::string& line, step_timing& out) -> std::string;

class writer {
public:
  /// Creates (truncates) the file; throws std::runtime_error naming it.
  writer(const std::filesystem::path& file, const setup& s);
  writer(const writer&) = delete;
  auto operator=(const writer&) -> writer& = delete;

  void lease(double t, std::span<const block_id> blocks);
  void shrink(double t, std::int64_t keep);
  /// `r` as submitted (matched_blocks included), and the core's answer.
  void submit(double t, const request& r, int status);
  void abort(double t, request_id id);
  void schedule(double t, double now_s, const scheduler_output& out);
  void step(double start, double duration, const scheduler_output& out, const step_result& result);
  void flush();

private:
  struct closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  void put(); ///< writes line_; flushes every few hundred lines, so a crash loses little
  std::unique_ptr<std::FILE, closer> f_;
  std::string line_;
  std::int64_t unflushed_ = 0;
};

/// One line of a step log.
struct event {
  enum class kind : std::uint8_t { lease, shrink, submit, abort, schedule, step, sampled };
  kind type = kind::lease;
  double t = 0;
  std::vector<block_id> blocks; ///< lease
  std::int64_t keep = 0;        ///< shrink
  int status = 0;               ///< submit
  request req;                  ///< submit (id: abort too)
  double now_s = 0;             ///< schedule
  std::string plan;             ///< schedule
  double duration = 0;          ///< step: its seconds (t: its start)
  step_result result;           ///< sampled
};

class reader {
public:
  /// Opens the file and reads its config line; throws std::runtime_error
  /// naming the file and line of anything malformed.
  explicit reader(const std::filesystem::path& file);
  auto config() const -> const setup& { return setup_; }
  /// The next event; nullopt at the end.
  auto next() -> std::optional<event>;
  auto line_number() const -> std::int64_t { return line_no_; }

private:
  [[noreturn]] void fail(const std::string& what) const;
  /// The next line that is neither empty, blank nor a comment, of any
  /// length, without its newline; false at the end.
  auto read_line(std::string& line) -> bool;
  /// A submit line's fields after its time, into e.req (and e.status).
  void read_submit(const std::vector<std::string>& w, event& e) const;
  /// A sampled line's <id>:<token>[+<forced token>...] fields, into e.result.
  void read_sampled(const std::vector<std::string>& w, event& e) const;
  std::filesystem::path file_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
  std::int64_t line_no_ = 0;
  setup setup_;
};

} // namespace troupe::step_log
