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
[ -f "$work/stories110m/tokenizer.model" ] || "$troupe" make-model --preset stories110m --out "$work/stories110m" >/dev/null

run() { # label, server --set options, bench options
  start_server --model "$work/stories110m" --set scheduler.kv_memory=1GiB $2
  echo "-- $1"
  "$troupe" bench --url "http://127.0.0.1:$port" $3 |
    grep -E "Successful|duration|Output token|Median TTFT|P99 TTFT|Mean TPOT|tenant-" || true
  kill -TERM $pid; wait $pid || true
}

echo "== 1. continuous vs static batching (48 ShareGPT-like requests at once, max_num_seqs 16)"
trace="--dataset sharegpt-like --num-prompts 48 --seed 2"
run "continuous (fcfs)" "--set scheduler.max_num_seqs=16" "$trace"
run "static" "--set scheduler.max_num_seqs=16 --set scheduler.policy=static" "$trace"

echo "== 2. prefix caching, a 300-word shared system prompt (32 requests, 2/s)"
trace="--num-prompts 32 --request-rate 2 --seed 3 --random-input-len 16 --random-output-len 16 --shared-prefix-len 300"
run "prefix caching on" "--set scheduler.max_num_seqs=16" "$trace"
run "prefix caching off" "--set scheduler.max_num_seqs=16 --set scheduler.enable_prefix_caching=false" "$trace"

echo "== 3. fairness: tenants weighted 4:1 (80 requests, 8/s, max_num_seqs 8)"
trace="--num-prompts 80 --request-rate 8 --seed 4 --random-input-len 64 --random-output-len 48 --tenant-weights 4,1"
run "fcfs" "--set scheduler.max_num_seqs=8" "$trace"
run "vtc" "--set scheduler.max_num_seqs=8 --set scheduler.policy=vtc" "$trace"
