#!/usr/bin/env bash
# make bench-policies: the scheduler's policies compared on the stories110m
# preset (random weights, CPU executor), each pair on the same seeded trace:
#  1. continuous batching (fcfs) vs request-level batching (static);
#  2. prefix caching on vs off, with a 300-word shared system prompt;
#  3. vtc vs fcfs, one tenant sending 4x the requests of another.
set -euo pipefail
troupe=${TROUPE:-build/troupe}
work=${BENCH_DIR:-/tmp/troupe-bench-serve}
mkdir -p "$work"
source "$(dirname "$0")/serve_lib.sh"
ensure_model stories110m "$work/stories110m"

run() { # label, server --set options, bench options; the bench's output also in $work/last.out
  start_server --model "$work/stories110m" --set scheduler.kv_memory=1GiB $2
  echo "-- $1"
  "$troupe" bench --url "http://127.0.0.1:$port" $3 >"$work/last.out" || true
  grep -E "Successful|Failed|duration|Total input|Total generated|Output token|Median TTFT|P99 TTFT|Mean TPOT|tenant-" \
    "$work/last.out" || true
  stop_server
}
field() { sed -n "s|^$1 *\([0-9.]*\)\$|\1|p" "$work/last.out"; }

echo "== 1. continuous vs static batching (48 ShareGPT-like requests at once, max_num_seqs 16)"
# The engine's own rates, measured in this run: what an ideal continuous run
# would achieve (prefill at the best chunk rate, decode at a full batch of
# 16 with short contexts, which only get slower as contexts grow).
engine=$("$troupe" bench-engine --preset stories110m --batches 1,16 --threads 0 --runs 3 --decode-steps 8 \
         --prefill-tokens 256)
prefill_rate=$(echo "$engine" | sed -n 's/.*prefill of 256 tokens: \([0-9.]*\) tokens\/s.*/\1/p')
decode16=$(echo "$engine" | awk '$2 == 16 && $1 ~ /^[0-9]+$/ {print $3}')
step1=$(echo "$engine" | awk '$2 == 1 && $1 ~ /^[0-9]+$/ {print $4}')
step16=$(echo "$engine" | awk '$2 == 16 && $1 ~ /^[0-9]+$/ {print $4}')
echo "engine (stories110m, all threads): prefill $prefill_rate tokens/s; decode step $step1 ms at batch 1," \
     "$step16 ms at batch 16 ($decode16 tokens/s)"
trace="--dataset sharegpt-like --num-prompts 48 --seed 2"
run "continuous (fcfs)" "--set scheduler.max_num_seqs=16" "$trace"
cont_tps=$(field "Output token throughput (tok/s):")
in_tokens=$(field "Total input tokens:")
out_tokens=$(field "Total generated tokens:")
run "static" "--set scheduler.max_num_seqs=16 --set scheduler.policy=static" "$trace"
static_tps=$(field "Output token throughput (tok/s):")
static_s=$(field "Benchmark duration (s):")
awk -v c="$cont_tps" -v s="$static_tps" -v ss="$static_s" -v i="$in_tokens" -v o="$out_tokens" \
    -v p="$prefill_rate" -v d="$decode16" 'BEGIN {
  ideal = i / p + o / d
  printf "continuous / static output tokens/s: %.2fx (target 8x)\n", c / s
  printf "an ideal continuous run at the engine rates above: %.1f s for %d + %d tokens;" \
         " static took %.1f s: at most %.1fx on this machine\n", ideal, i, o, ss, ss / ideal
}'

echo "== 2. prefix caching, a 300-word shared system prompt (32 requests, 2/s)"
trace="--num-prompts 32 --request-rate 2 --seed 3 --random-input-len 16 --random-output-len 16 --shared-prefix-len 300"
run "prefix caching on" "--set scheduler.max_num_seqs=16" "$trace"
run "prefix caching off" "--set scheduler.max_num_seqs=16 --set scheduler.enable_prefix_caching=false" "$trace"

echo "== 3. fairness: tenants weighted 4:1 (80 requests, 8/s, max_num_seqs 8)"
trace="--num-prompts 80 --request-rate 8 --seed 4 --random-input-len 64 --random-output-len 48 --tenant-weights 4,1"
run "fcfs" "--set scheduler.max_num_seqs=8" "$trace"
run "vtc" "--set scheduler.max_num_seqs=8 --set scheduler.policy=vtc" "$trace"
