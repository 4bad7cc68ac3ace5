#!/usr/bin/env bash
# make soak N=1000000: N streamed requests against the zero-cost executor
# (the tiny model's tokenizer), 10,000 at a time through `troupe bench` with
# C of them concurrent (default 256), printing the server's resident memory
# after every 10,000. A server that keeps nothing per request is flat after
# its warm-up.
set -euo pipefail
troupe=${TROUPE:-build/troupe}
work=${BENCH_DIR:-/tmp/troupe-soak}
total=${N:-1000000}
concurrency=${C:-256}
mkdir -p "$work"
source "$(dirname "$0")/serve_lib.sh"
rss() { awk '/^VmRSS:/ {print $2}' /proc/$pid/status; }

ensure_model tiny models/tiny
start_server --model models/tiny --set engine.executor=zero --set scheduler.max_num_seqs=1024
echo "soak: $total requests, $concurrency concurrent, 10,000 at a time; the server's RSS (KiB) after each"
printf "%9s %10s %12s\n" requests rss_kib failed
echo "        0 $(rss)"
start=$(rss)
for ((done = 0; done < total; )); do
  n=$((total - done < 10000 ? total - done : 10000))
  "$troupe" bench --url "http://127.0.0.1:$port" --num-prompts "$n" --max-concurrency "$concurrency" \
    --random-input-len 8 --random-output-len 5 --seed "$done" >"$work/chunk.txt"
  done=$((done + n))
  printf "%9d %10d %12s\n" "$done" "$(rss)" "$(awk -F: '/Failed requests/ {print $2+0}' "$work/chunk.txt")"
  [ "$done" -eq "$n" ] && warm=$(rss) # after the first 10,000: the warm-up
done
end=$(rss)
stop_server
awk -v a="$start" -v w="$warm" -v b="$end" -v n="$total" 'BEGIN {
  printf "grew %d KiB over the first 10,000 requests (the warm-up), then %d KiB over the other %d", w - a, b - w, n - 10000
  if (n > 10000) printf " (%.3f bytes a request)", (b - w) * 1024 / (n - 10000)
  printf "\n" }'
