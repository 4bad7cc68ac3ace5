#!/usr/bin/env bash
# make bench-isolation: tenant isolation. A light tenant sends a steady
# trickle; a heavy tenant floods at 4x its share of the server (both have
# weight 1, so its share is half the capacity, which is measured first in
# the same run: the heavy tenant's requests alone, all at once). Reported:
# the light tenant's p95 TTFT alone (solo) and beside the flood, under vtc and
# fcfs, each the median of RUNS runs (default 3) after a warm-up. Target:
# vtc's at most 10% over solo.
#
# The engine is the zero executor at a fixed step time with a small token
# budget: a saturated accelerator whose capacity the scheduler shares out, so
# that what is measured is scheduling, not this 2-core machine's HTTP and
# client threads. Chunked prefill as vLLM does it: 128 tokens of a prompt a
# step at most, one prompt in a partial prefill at a time (else a flood of
# long prompts holds every step's budget, whatever order the policy gives).
# Two floods:
#   long: the heavy tenant's prompts are 1,024 tokens (the light one's 32);
#   same: the heavy tenant's requests are shaped like the light one's, so
#         only the policy's order can keep the light tenant's TTFT.
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

field() { sed -n "s|^$1 *\([0-9.]*\)\$|\1|p" "$2"; }
light_bench() { # seed: prints the light tenant's p95 TTFT (ms)
  "$troupe" bench --url "http://127.0.0.1:$port" --api-key "$light_key" --request-rate 4 --num-prompts 60 \
    --random-input-len 32 --random-output-len 16 --seed "$1" >"$work/light.out"
  field "P95 TTFT (ms):" "$work/light.out"
}
heavy_bench() { # rate, prompts, seed (exec: in the background, $! is the bench itself, which kill then stops)
  exec "$troupe" bench --url "http://127.0.0.1:$port" --api-key "$heavy_key" --request-rate "$1" --num-prompts "$2" \
    --random-input-len "$heavy_len" --random-output-len 16 --seed "$3" >"$work/heavy.out" 2>&1
}
serve() { # policy
  start_server --model "$work/tiny" --set server.tenants="$work/tenants.toml" --set engine.executor=zero \
    --set engine.zero_step_us="$step_us" --set scheduler.max_num_batched_tokens="$budget" \
    --set scheduler.long_prefill_token_threshold=128 --set scheduler.max_num_partial_prefills=1 \
    --set scheduler.max_num_seqs=256 --set scheduler.policy="$1"
}
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for flood in long same; do
  if [ "$flood" = long ]; then heavy_len=1024 step_us=10000 budget=256; else heavy_len=32 step_us=20000 budget=64; fi
  for policy in vtc fcfs; do
    serve "$policy"
    (heavy_bench inf 200 7)
    capacity=$(field "Request throughput (req/s):" "$work/heavy.out")
    rate=$(awk -v c="$capacity" 'BEGIN { printf "%.1f", 2 * c }') # 4 x (c / 2)
    solo=() flood_p95=()
    light_bench 100 >/dev/null # warm-up
    for r in $(seq "$runs"); do
      solo+=("$(light_bench "$r")")
      heavy_bench "$rate" "$(awk -v x="$rate" 'BEGIN { printf "%d", x * 40 }')" "$((r + 50))" &
      hb=$!
      sleep 2 # the flood's backlog builds first
      flood_p95+=("$(light_bench "$r")")
      kill "$hb" 2>/dev/null || true
      wait "$hb" 2>/dev/null || true
      sleep 3 # (the heavy backlog is aborted as its connections close)
    done
    stop_server
    s=$(printf '%s\n' "${solo[@]}" | median)
    f=$(printf '%s\n' "${flood_p95[@]}" | median)
    echo "flood '$flood', $policy: capacity $capacity req/s (heavy alone), heavy sends $rate req/s;" \
         "light p95 TTFT solo ${solo[*]} ms, beside the flood ${flood_p95[*]} ms"
    awk -v s="$s" -v f="$f" -v p="$policy" -v fl="$flood" 'BEGIN {
      printf "flood %s, %s: light p95 TTFT %.2f ms solo, %.2f ms beside the flood: %.2fx (%+.0f%%)%s\n",
             fl, p, s, f, f / s, 100 * (f / s - 1), p == "vtc" ? " (target: at most +10%)" : "" }'
  done
done
