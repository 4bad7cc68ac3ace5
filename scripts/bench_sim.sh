#!/usr/bin/env bash
# make bench-sim: the simulator's speed on a chat workload on one replica
# (config/sim/chat.toml: ShareGPT-like lengths, Poisson arrivals at 30/s,
# Llama-3-8B on an H100 by the roofline model, prefix caching on).
# One warm-up run of 100,000 requests, then RUNS runs of 1,000,000; each
# run's figure is requests simulated per wall-clock second on one core.
# Targets (issue 5): >= 100,000 requests/s; a million requests in under a minute.
set -euo pipefail
TROUPE=${TROUPE:-build/troupe}
RUNS=${RUNS:-3}
N=${N:-1000000}
run() {
  "$TROUPE" sim config/sim/chat.toml --set sim.num_requests="$1" --set arrival.rate=30 2>&1 >/dev/null |
    sed -n 's/.* simulated in \([0-9.]*\) s (\([0-9]*\) requests\/s).*/\1 \2/p'
}
run 100000 >/dev/null
rates=() secs=()
for i in $(seq "$RUNS"); do
  read -r s r < <(run "$N")
  echo "run $i: $N requests in $s s ($r requests/s)"
  rates+=("$r") secs+=("$s")
done
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }
echo "median of $RUNS: $(median "${rates[@]}") simulated requests/s (target >= 100000); $N requests in $(median "${secs[@]}") s (target < 60 s)"
