#!/usr/bin/env bash
# make bench-isolation: tenant isolation under vtc. A light tenant sends a
# steady trickle; a heavy tenant floods at 4x its share of the server (both
# have weight 1, so its share is half). Reported: the light tenant's p95 TTFT
# alone (solo) and beside the flood, under vtc and, for contrast, fcfs, each
# the median of RUNS runs (default 3). Target: vtc's p95 at most 10% over solo.
#
# The engine is the zero executor at a fixed 10 ms a step with a budget of
# 256 tokens a step: a saturated accelerator whose capacity the scheduler
# shares out (25,600 prompt tokens/s), so that what is measured is the
# scheduling policy, not this 2-core machine's HTTP and client threads.
# Chunked prefill as vLLM does it: 128 tokens of a prompt a step at most,
# one prompt in a partial prefill at a time (else the flood's long prompts
# hold every step's budget and new requests wait for them, whatever order
# the policy gives the waiting queue).
# Prompts: light 32 tokens (16 out, 4 req/s), heavy 1,024 tokens (16 out)
# at 49 req/s = 51,000 tokens/s = 4 x the heavy tenant's half of the capacity.
set -euo pipefail
troupe=${TROUPE:-build/troupe}
work=${BENCH_DIR:-/tmp/troupe-bench-isolation}
runs=${RUNS:-3}
mkdir -p "$work"
source "$(dirname "$0")/serve_lib.sh"
ensure_model tiny "$work/tiny"

light_key=sk-bench-light-$RANDOM$RANDOM
heavy_key=sk-bench-heavy-$RANDOM$RANDOM
hash() { echo "$1" | "$troupe" hash-key; }
cat >"$work/tenants.toml" <<TOML
[tenants.light]
$(hash "$light_key")
[tenants.heavy]
$(hash "$heavy_key")
TOML

light_bench() {
  "$troupe" bench --url "http://127.0.0.1:$port" --api-key "$light_key" --request-rate 4 --num-prompts 60 \
    --random-input-len 32 --random-output-len 16 --seed "$1" >"$work/light.out"
  sed -n 's|^P95 TTFT (ms): *\([0-9.]*\)$|\1|p' "$work/light.out"
}
heavy_bench() {
  "$troupe" bench --url "http://127.0.0.1:$port" --api-key "$heavy_key" --request-rate 49 --num-prompts 900 \
    --random-input-len 1024 --random-output-len 16 --seed "$1" >"$work/heavy.out" 2>&1
}
serve() {
  start_server --model "$work/tiny" --set server.tenants="$work/tenants.toml" --set engine.executor=zero \
    --set engine.zero_step_us=10000 --set scheduler.max_num_batched_tokens=256 --set scheduler.long_prefill_token_threshold=128 --set scheduler.max_num_partial_prefills=1 \
    --set scheduler.max_num_seqs=256 \
    --set scheduler.policy="$1"
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for policy in vtc fcfs; do
  serve "$policy"
  solo=() flood=()
  light_bench 100 >/dev/null # warm-up
  for r in $(seq "$runs"); do
    solo+=("$(light_bench "$r")")
    heavy_bench "$((r + 50))" &
    hb=$!
    sleep 2 # the flood's backlog builds first
    flood+=("$(light_bench "$r")")
    kill "$hb" 2>/dev/null || true
    wait "$hb" 2>/dev/null || true
    sleep 3 # (the heavy backlog drains: aborted on disconnect)
  done
  stop_server
  s=$(printf '%s\n' "${solo[@]}" | median)
  f=$(printf '%s\n' "${flood[@]}" | median)
  echo "$policy: light p95 TTFT solo ${solo[*]} ms (median $s); beside the flood ${flood[*]} ms (median $f)"
  awk -v s="$s" -v f="$f" -v p="$policy" 'BEGIN { printf "%s: light p95 TTFT beside the flood / solo = %.2fx (%+.0f%%)%s\n", p, f / s, 100 * (f / s - 1), p == "vtc" ? " (target: at most +10%)" : "" }'
done
