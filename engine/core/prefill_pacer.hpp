#pragma once
// Paces prefill against decoding (scheduler.prefill_chunk_cost): steps that
// decode spend on prefill, over time, at most `cost` times what their
// decodes take, as measured. Each such step earns cost x a decode step's
// time and spends what its prefill chunks took beyond the decodes; a step
// takes the prefill tokens its credit buys, and none while the credit is
// spent or being saved up for a chunk of min_chunk tokens. With cost 1,
// streams keep half their token rate or more while a long prompt prefills.
// A prompt alone prefills in steps of about solo_step_s (at a long context
// a budget-sized chunk can take seconds, and a request that arrives waits
// for the step under way).
//
// A prefill token's cost is measured, not assumed: it grows with the
// context a chunk attends to and differs by model and machine by orders of
// magnitude (a CPU computes a prompt token at about a fifth of a weight
// read, a GPU at a few thousandths). A chunk also costs a part fixed per
// chunk (reading its context's KV: on a CPU at 20k tokens a one-token chunk
// costs several decode steps), so the credit is saved for chunks of
// min_chunk tokens or more, which pay that part a few times per prompt's
// thousand tokens, not once per token. Decode-only steps just after a
// chunk are charged what they take past the decodes' time (the chunk's KV
// in the caches, its memory traffic); later ones measure that time.
//
// Fed each step's shape and duration (the server: the wall clock, at the
// scheduler actor; the simulator: its cost model; a replay: the step log's
// `step` lines), it is deterministic in them.

#include <cstdint>

namespace troupe {

class prefill_pacer {
public:
  /// cost: decode steps' worth of prefill a decoding step may carry (0: no
  /// pacing); max_chunk: the most tokens it ever allows (the step's budget).
  prefill_pacer(double cost, std::int32_t max_chunk);

  /// A step ended: its tokens of requests decoding and of prefill chunks,
  /// how long it took, and whether a prefill was under way or waiting
  /// beside it (a decode-only step then counts against the prefill for
  /// what it took past the decodes' own time).
  /// `admitted`: those of prefill_tokens that newly admitted requests took
  /// (a step with any does not update a token's cost: a new prompt's
  /// tokens cost little beside a long prompt's, at its context).
  void observe(std::int64_t decode_tokens, std::int64_t prefill_tokens, double seconds, bool prefill_pending = false,
               std::int64_t admitted = 0);
  /// The prefill tokens a step that decodes may take, in all: 0 while the
  /// credit is spent, or saved up for a chunk of min_chunk tokens;
  /// first_chunk before the first measurements; max_chunk without pacing.
  auto allowance() const -> std::int32_t;
  /// Whether the next step that decodes should carry no prefill: the time
  /// of decodes alone is unknown, or was last measured probe_every steps
  /// ago (the batch changes; a prompt that arrives before any stream
  /// decodes alone would otherwise never see it).
  auto probe() const -> bool;
  auto enabled() const -> bool { return cost_ > 0; }
  /// The prefill tokens a step may take with nothing beside it: about
  /// solo_step_s of them at the measured cost of a token (max_chunk before
  /// one is measured, or without pacing). A request that arrives meanwhile
  /// waits for that step, not for a whole budget's chunk at a long context.
  auto solo_allowance() const -> std::int32_t;

  /// The smallest chunk a paced step takes (or what its credit buys, if
  /// more): a chunk's fixed part is then a fifth of its time or less at
  /// a CPU's long context.
  static constexpr std::int32_t min_chunk = 64;
  /// Until a prefill token has been measured: about one chunk of vLLM's.
  static constexpr std::int32_t first_chunk = 256;
  static constexpr std::int32_t probe_every = 16;
  static constexpr double solo_step_s = 0.2;

private:
  void earn(double spent); ///< a step that decoded: its share of prefill time, less what it spent
  auto share() const -> double { return cost_ * decode_s_; }
  /// Decodes alone, as measured (scaled by the tokens when more decode now:
  /// errs large, as a step's cost grows slower than its tokens).
  auto decode_time(std::int64_t decode_tokens) const -> double;
  /// The credit a paced chunk waits for: min_chunk tokens' worth, or one
  /// step's share if more (at most solo_step_s).
  auto saving_target() const -> double;
  auto tokens_for(double seconds) const -> std::int32_t;

  double cost_;
  std::int32_t max_chunk_;
  /// A decode-only step's seconds without a prefill beside it (moving
  /// average; < 0: none yet), and its decode tokens.
  double decode_s_ = -1;
  double decode_tokens_ = -1;
  /// Decayed sums of chunks' tokens and of their seconds past the decodes:
  /// their ratio is a token's cost (chunk_s_ < 0: none measured yet).
  double chunk_tokens_ = 0;
  double chunk_s_ = -1;
  std::int32_t since_decode_only_ = 0; ///< steps with both since the last decode-only one
  std::int32_t since_chunk_ = 0;       ///< decode-only steps since the last with a prefill
  double credit_s_ = 0;                 ///< prefill time earned and not spent
};

} // namespace troupe
