#!/usr/bin/env bash
# make bench-serve: the serving runtime's figures.
#  1. Its overhead: a zero-cost executor (no model) and 1,000 concurrent SSE
#     streams; target >= 100,000 streamed tokens/s with p99 ITL under 5 ms.
#     Also the server's CPU time per streamed token (from /proc), so runs on
#     a noisy machine can be compared.
#  2. The stories110m preset (random weights, real compute) at a few
#     Poisson request rates.
#  3. A TinyLlama-shaped GGUF file served as Q4_K_M beside BF16, and the
#     tokens a 256 MiB KV cache holds with f32 and q8_0 keys and values.
set -euo pipefail
troupe=${TROUPE:-build/troupe}
work=${BENCH_DIR:-/tmp/troupe-bench-serve}
mkdir -p "$work"

source "$(dirname "$0")/serve_lib.sh"
cpu_ticks() { awk '{print $14 + $15}' /proc/$1/stat; }

ensure_model tiny models/tiny
echo "== serving overhead: zero-cost executor, 1000 concurrent streams (tiny model's tokenizer)"
start_server --model models/tiny --set engine.executor=zero --set scheduler.max_num_seqs=1024
"$troupe" bench --url "http://127.0.0.1:$port" --num-prompts 200 --max-concurrency 200 \
  --random-input-len 32 --random-output-len 32 >/dev/null # warm-up
t0=$(cpu_ticks $pid)
"$troupe" bench --url "http://127.0.0.1:$port" --num-prompts 3000 --max-concurrency 1000 \
  --random-input-len 32 --random-output-len 256 | tee "$work/zero.txt"
t1=$(cpu_ticks $pid)
stop_server
tokens=$(awk -F: '/Total generated tokens/ {print $2+0}' "$work/zero.txt")
tps=$(awk -F: '/Output token throughput/ {print $2+0}' "$work/zero.txt")
itl=$(awk -F: '/P99 ITL/ {print $2+0}' "$work/zero.txt")
ticks=$(getconf CLK_TCK)
awk -v a="$t0" -v b="$t1" -v hz="$ticks" -v n="$tokens" \
  'BEGIN { printf "server CPU per streamed token: %.1f us (%d tokens, %.2f CPU-s)\n", (b-a)/hz/n*1e6, n, (b-a)/hz }'
# The same traffic shape with nothing but sockets: one writer thread sending
# one event per connection per round, one epoll reader (troupe bench-loopback).
"$troupe" bench-loopback --streams 1000 --events 256 | tee "$work/loopback.txt"
raw=$(awk -F: '/Events\/s/ {print $2+0}' "$work/loopback.txt")
rawgap=$(awk -F: '/P99 gap/ {print $2+0}' "$work/loopback.txt")
awk -v t="$tps" -v i="$itl" -v r="$raw" -v g="$rawgap" 'BEGIN {
  printf "target >= 100000 tokens/s: %s (%.0f, %.2fx the raw loopback events/s)\n", (t >= 100000 ? "met" : "NOT met"), t, t / r
  printf "target p99 ITL < 5 ms: %s (%.2f ms; raw loopback p99 gap %.2f ms)\n", (i < 5 ? "met" : "NOT met"), i, g }'

echo "== stories110m (F32, random weights, CPU executor, all cores)"
ensure_model stories110m "$work/stories110m"
start_server --model "$work/stories110m" --set scheduler.max_num_seqs=64 --set scheduler.kv_memory=1GiB
for rate in ${RATES:-1 4 16}; do
  echo "-- request rate $rate/s (Poisson), 32 prompts of 128 words, 64 tokens each"
  "$troupe" bench --url "http://127.0.0.1:$port" --num-prompts 32 --request-rate "$rate" --seed 1 \
    --random-input-len 128 --random-output-len 64 --goodput ttft:2000,tpot:200 |
    grep -E "duration|throughput|goodput|Median|P99"
done
stop_server

# 3. A GGUF file: the TinyLlama-1.1B shape (random weights) served as
#    Q4_K_M beside the same weights in BF16, 16 requests at a time; then the
#    sequences of its 2048-token context that a 256 MiB KV cache holds, with
#    f32 and q8_0 keys and values (the server's own kv_cache_capacity_tokens).
write_gguf=${WRITE_GGUF:-build/tests/write_gguf}
tl="$work/tinyllama-1.1b"
ensure_model tinyllama-1.1b "$tl"
for kind in q4_k_m bf16; do
  [ -f "$tl.$kind.gguf" ] || "$write_gguf" --type "$kind" "$tl" "$tl.$kind.gguf"
done
for kind in q4_k_m bf16; do
  echo "== TinyLlama-1.1B shape, $kind GGUF, concurrency 16, 48 prompts of 128 words, 64 tokens each"
  start_server --model "$tl.$kind.gguf" --set scheduler.max_num_seqs=16
  "$troupe" bench --url "http://127.0.0.1:$port" --num-prompts 48 --max-concurrency 16 --seed 1 \
    --random-input-len 128 --random-output-len 64 | grep -E "duration|throughput|Median|P99"
  stop_server
done
for kv in f32 q8_0; do
  start_server --model "$tl.q4_k_m.gguf" --set scheduler.kv_memory=256MiB --set scheduler.kv_cache_dtype=$kv
  tokens=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^troupe_kv_cache_capacity_tokens/ {t = $2} END {print t + 0}')
  stop_server
  awk -v kv="$kv" -v t="$tokens" 'BEGIN {
    printf "kv_memory 256MiB, kv_cache_dtype %s: %d tokens, %.1f sequences of 2048 tokens\n", kv, t, t / 2048 }'
done
