#!/usr/bin/env bash
# The real `troupe` binary on the built-in tiny model: commands, streaming
# output, seeds, chat, and the exit codes of every kind of bad input.
set -u
troupe=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
exit_code() { "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; }

check "no command: usage, exit 2" test "$(exit_code "$troupe")" = 2
check "unknown command: exit 2" test "$(exit_code "$troupe" frobnicate)" = 2
check "unknown command is named" grep -q "unknown command 'frobnicate'" "$tmp/err"
check "usage is printed" grep -q "usage: troupe" "$tmp/err"
check "bad flag: exit 2" test "$(exit_code "$troupe" generate --bogus 1)" = 2
check "bad flag is named" grep -q "unknown option --bogus" "$tmp/err"
check "missing --model: exit 2" test "$(exit_code "$troupe" generate --prompt hi)" = 2
check "unknown preset: exit 2" test "$(exit_code "$troupe" make-model --preset nope --out "$tmp/x")" = 2

# Every command is in `troupe --help`; `troupe CMD --help` and `-h` print its
# usage on stdout and exit 0 (and `troupe help CMD` the same).
commands="serve worker config bench bench-loopback bench-scheduler sim generate render-template hash-key make-model bench-engine bench-grammar tokenize"
check "--help: exit 0" test "$(exit_code "$troupe" --help)" = 0
cp "$tmp/out" "$tmp/help"
check "--help: the overview on stdout" grep -q "^usage: troupe <command>" "$tmp/help"
listed=$(sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' "$tmp/help")
check "--help lists exactly the commands" test "$(echo $listed | tr ' ' '\n' | sort)" = "$(echo $commands | tr ' ' '\n' | sort)"
for cmd in $commands; do
  check "$cmd --help: exit 0" test "$(exit_code "$troupe" "$cmd" --help)" = 0
  check "$cmd --help: its usage" grep -q "^usage: troupe $cmd " "$tmp/out"
  check "$cmd --help: its options" grep -qE -- "--[a-z]+" "$tmp/out"
  check "$cmd --help: nothing on stderr" test ! -s "$tmp/err"
  cp "$tmp/out" "$tmp/cmd_help"
  check "$cmd -h: the same" test "$(exit_code "$troupe" "$cmd" -h)" = 0 -a -z "$(cmp "$tmp/out" "$tmp/cmd_help")"
  check "help $cmd: the same" test "$(exit_code "$troupe" help "$cmd")" = 0 -a -z "$(cmp "$tmp/out" "$tmp/cmd_help")"
done
check "--help as an option's value is that value" test "$(exit_code "$troupe" config --config --help)" = 1
check "a usage error: exit 2" test "$(exit_code "$troupe" make-model --preset tiny)" = 2
check "a usage error: the problem, then the command's usage" \
  test "$(head -1 "$tmp/err")" = "troupe make-model: --out is required" -a "$(sed -n 2p "$tmp/err" | cut -c1-24)" = "usage: troupe make-model"

# The settings: config/default.toml is `troupe config --defaults`, word for
# word (regenerate: troupe config --defaults > config/default.toml).
src=$(cd "$(dirname "$0")/../.." && pwd)
check "config --defaults: exit 0" test "$(exit_code "$troupe" config --defaults)" = 0
check "config/default.toml is troupe config --defaults" diff "$tmp/out" "$src/config/default.toml"
# docs/configuration.md documents every key: each section's keys appear in
# its table as `key`.
undocumented=$(awk '/^\[/ { sec = $1 } /^[a-z_]+ = / { print sec, $1 }' "$src/config/default.toml" |
  while read -r sec key; do
    awk -v h="## $sec" -v k="| \`$key\` |" '$0 == h { on = 1; next } /^## / { on = 0 } on && index($0, k) == 1 { found = 1 }
      END { exit !found }' "$src/docs/configuration.md" || echo "$sec $key"
  done)
check "docs/configuration.md has every key in its section's table${undocumented:+ (missing: $undocumented)}" test -z "$undocumented"
check "config with options: what serve would run with" \
  test "$(exit_code "$troupe" config models/x --port 0 --set scheduler.kv_memory=1GiB)" = 0
check "config with options: the options' values" \
  test -n "$(grep -x 'port = 0 .*' "$tmp/out")" -a -n "$(grep '^dir = "models/x" ' "$tmp/out")" \
  -a -n "$(grep '^kv_memory = "1GiB" ' "$tmp/out")"
check "config --defaults with an option: exit 2" test "$(exit_code "$troupe" config --defaults --port 1)" = 2
check "config, a missing file: exit 1" test "$(exit_code "$troupe" config --config "$tmp/nope.toml")" = 1
check "config, a missing file: one line" test "$(cat "$tmp/err")" = "troupe config: $tmp/nope.toml: cannot read"

# troupe serve needs no file: the defaults, and the model as DIR or --model.
mkdir -p "$tmp/nowhere"
check "serve, no model here: exit 1" test "$(cd "$tmp/nowhere" && exit_code "$troupe" serve --port 0)" = 1
check "serve, no model here: one line" test "$(wc -l <"$tmp/err")" = 1
check "serve, no model here: names models/tiny, how to make one" \
  grep -q "no model directory or GGUF file 'models/tiny'.*troupe make-model --preset tiny --out models/tiny" "$tmp/err"
check "serve DIR and --model DIR: exit 2" test "$(exit_code "$troupe" serve "$tmp/a" --model "$tmp/b")" = 2
check "serve DIR and --model DIR: said so" grep -qx "troupe serve: give the model directory once: as an argument or with --model" "$tmp/err"
check "serve, two directories: exit 2" test "$(exit_code "$troupe" serve "$tmp/a" "$tmp/b")" = 2
check "worker, no model here: exit 1" \
  test "$(cd "$tmp/nowhere" && exit_code "$troupe" worker --join 127.0.0.1:1 --model nope)" = 1
check "worker, no model here: names it" grep -q "no model directory or GGUF file 'nope' (give one: troupe worker DIR|FILE.gguf" "$tmp/err"

check "make-model tiny" test "$(exit_code "$troupe" make-model --preset tiny --out "$tmp/tiny")" = 0
for f in config.json model.safetensors tokenizer.model tokenizer_config.json; do
  check "tiny has $f" test -s "$tmp/tiny/$f"
done
check "tiny is a few MB" test "$(stat -c %s "$tmp/tiny/model.safetensors")" -lt 8000000

gen() { "$troupe" generate --model "$tmp/tiny" --threads 1 "$@"; }
check "generate runs" test "$(exit_code gen --prompt "This License" --max-tokens 20 --seed 7)" = 0
check "generate prints text" test -s "$tmp/out"
check "generate reports speed" grep -qE 'prompt: [0-9]+ tokens, [0-9.]+ tokens/s; decode: 20 tokens' "$tmp/err"
cp "$tmp/out" "$tmp/first"
gen --prompt "This License" --max-tokens 20 --seed 7 >"$tmp/second" 2>/dev/null
check "same seed, same text" cmp -s "$tmp/first" "$tmp/second"
gen --prompt "This License" --max-tokens 20 --seed 7 --no-huge-pages >"$tmp/third" 2>/dev/null
check "huge pages or not, same text" cmp -s "$tmp/first" "$tmp/third"
check "chat mode runs" test "$(exit_code gen --prompt "What is a licence?" --chat --max-tokens 8)" = 0
check "chat template by name" test "$(exit_code gen --prompt hi --chat --chat-template chatml --max-tokens 4)" = 0
check "unknown chat template: exit 2" test "$(exit_code gen --prompt hi --chat --chat-template nope)" = 2
check "bad temperature: exit 2" test "$(exit_code gen --prompt hi --temperature -1)" = 2
check "bad temperature is named" grep -q "temperature" "$tmp/err"
check "non-numeric max-tokens: exit 2" test "$(exit_code gen --prompt hi --max-tokens many)" = 2
check "too long for the context: exit 1" test "$(exit_code gen --prompt hi --max-tokens 100000)" = 1
check "context error is one line" test "$(wc -l <"$tmp/err")" = 1
check "huge max-tokens, block size 1: exit 1" test "$(exit_code gen --prompt hi --max-tokens 2147483647 --block-size 1)" = 1
check "huge max-tokens names the context" grep -q "context" "$tmp/err"
check "max-tokens past int32: exit 2" test "$(exit_code gen --prompt hi --max-tokens 99999999999)" = 2

check "bench-engine runs" test "$(exit_code "$troupe" bench-engine --model "$tmp/tiny" --batches 1,4 \
  --threads 1 --runs 1 --decode-steps 2 --prefill-tokens 8)" = 0
check "bench-engine prints the bandwidth" grep -qE '^ +1 +1 .* [0-9.]+%' "$tmp/out"
check "bench-engine states the targets" grep -qE "^1 thread: batch-1 decode at [0-9]+% of read bandwidth \(target 85%\)" "$tmp/out"
check "bench-engine bad list: exit 2" test "$(exit_code "$troupe" bench-engine --batches 1,x)" = 2
# A mixture of experts: what a batch's step reads (the distinct experts its
# tokens route to) and so the most it can run at over batch 1, and its goals.
check "make-model small olmoe" test "$(exit_code "$troupe" make-model --preset olmoe-1b-7b --small --layers 1 \
  --vocab 512 --out "$tmp/moe")" = 0
check "bench-engine on experts runs" test "$(exit_code "$troupe" bench-engine --model "$tmp/moe" --batches 1,4 \
  --threads 1 --runs 1 --decode-steps 2 --prefill-tokens 8)" = 0
check "bench-engine: a batch's expert reads" \
  grep -qE "^batch 4 reads about [0-9]+ of 16 experts a layer .* it runs at most [0-9.]+x batch 1$" "$tmp/out"
check "bench-engine: the experts' goals" grep -qE "^1 thread: batch-1 decode at [0-9]+% of read bandwidth \(target 75%\)" "$tmp/out"

check "bench-loopback runs" test "$(exit_code "$troupe" bench-loopback --streams 8 --events 16)" = 0
check "bench-loopback prints events/s" grep -qE '^Events/s: +[0-9]+' "$tmp/out"
check "bench-loopback bad count: exit 2" test "$(exit_code "$troupe" bench-loopback --streams 0)" = 2

check "bench-scheduler runs" test "$(exit_code "$troupe" bench-scheduler --running 8 --waiting 4 --steps 20)" = 0
check "bench-scheduler states the target" grep -qE "^target <= 20 us per step: " "$tmp/out"
check "bench-scheduler unknown policy: exit 2" test "$(exit_code "$troupe" bench-scheduler --policy nope)" = 2

# The simulator: every scenario under config/sim/ runs (shortened); the same
# seed writes the same bytes; bad input is one line.
for scenario in "$src"/config/sim/*.toml; do
  name=$(basename "$scenario" .toml)
  check "sim $name runs" test "$(exit_code "$troupe" sim "$scenario" --quiet --set sim.num_requests=300)" = 0
  check "sim $name prints its table" grep -qE "^run +done +req/s" "$tmp/out"
done
"$troupe" sim "$src/config/sim/chat.toml" --quiet --set sim.num_requests=300 --out "$tmp/sim1" >/dev/null
"$troupe" sim "$src/config/sim/chat.toml" --quiet --set sim.num_requests=300 --out "$tmp/sim2" >/dev/null
check "sim writes summary.json, CSVs and plots" test -s "$tmp/sim1/summary.json" -a -s "$tmp/sim1/base/requests.csv" \
  -a -s "$tmp/sim1/base/steps.csv" -a -s "$tmp/sim1/base/latency_cdf.svg" -a -s "$tmp/sim1/base/timeline.svg"
check "sim: same seed, byte-identical results" diff -r "$tmp/sim1" "$tmp/sim2"
check "sim plots are SVG" grep -q "<svg" "$tmp/sim1/base/latency_cdf.svg"
check "sim without a scenario: exit 2" test "$(exit_code "$troupe" sim)" = 2
check "sim missing scenario: exit 1" test "$(exit_code "$troupe" sim "$tmp/nope.toml")" = 1
check "sim missing scenario: one line naming it" test "$(wc -l <"$tmp/err")" = 1 -a -n "$(grep nope.toml "$tmp/err")"
check "sim bad value: exit 1" test "$(exit_code "$troupe" sim "$src/config/sim/chat.toml" --set arrival.rate=0)" = 1
check "sim bad value: the key and the problem" grep -qx "troupe sim: arrival.rate: must be > 0, got 0" "$tmp/err"
printf 'arrival_s,prompt_tokens,output_tokens\n0,5,5\n0.1,five,5\n' >"$tmp/bad.csv"
check "sim malformed trace: exit 1" test "$(exit_code "$troupe" sim "$src/config/sim/chat.toml" \
  --set arrival.process=trace --set "arrival.trace=$tmp/bad.csv")" = 1
check "sim malformed trace: the line named" grep -q "bad.csv:3: prompt_tokens" "$tmp/err"

# The server's own config simulated: its [scheduler], [router] and
# [autoscaler] keys, its model's KV blocks; the traffic from a trace.
printf '[model]\ndir = "%s"\n[engine]\nreplicas = 2\n[scheduler]\nmax_input_tokens = 100\n[router]\npolicy = "least_requests"\n' \
  "$tmp/tiny" >"$tmp/server.toml"
trace="$src/tests/sim/example_trace.csv"
check "sim --server-config --trace: exit 0" \
  test "$(exit_code "$troupe" sim --server-config "$tmp/server.toml" --trace "$trace" --quiet --out "$tmp/simsrv")" = 0
check "sim --server-config: the config's replicas, on the cpu preset" \
  grep -q "^server: 2 replicas" "$tmp/out"
long=$(awk -F, 'NR > 1 && $2 > 100 { n++ } END { print n + 0 }' "$trace")
check "sim --server-config: scheduler.max_input_tokens refuses the longer prompts (400), as the server" \
  test "$long" -gt 0 -a "$(awk -F, 'NR > 1 && $4 == 400 { n++ } END { print n + 0 }' "$tmp/simsrv/server/requests.csv")" = "$long"
check "sim --server-config with a scenario: its traffic and cost model" test "$(exit_code "$troupe" sim \
  "$src/config/sim/chat.toml" --server-config "$tmp/server.toml" --set sim.num_requests=100 --quiet)" = 0
check "sim --server-config without traffic: exit 2" test "$(exit_code "$troupe" sim --server-config "$tmp/server.toml")" = 2
check "sim --server-config without traffic: says what is missing" \
  grep -q "troupe sim: --server-config needs the traffic: a scenario file, or --trace FILE" "$tmp/err"
check "sim --trace with a scenario: exit 2" \
  test "$(exit_code "$troupe" sim "$src/config/sim/chat.toml" --server-config "$tmp/server.toml" --trace "$trace")" = 2
check "sim unknown hardware preset: exit 1" test "$(exit_code "$troupe" sim --server-config "$tmp/server.toml" \
  --trace "$trace" --hardware tpu)" = 1
check "sim unknown hardware preset: one line naming the known ones" \
  test "$(cat "$tmp/err")" = 'troupe sim: unknown hardware preset "tpu"; known: h100, h200, a100, l40s, l4, cpu'
printf 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,72,18,90,Conversation log
45,ChatGPT,87,0,87,Conversation log\n118,GPT-4,41,27,68,API log\n130,GPT-4,40,20,60,API log\n' >"$tmp/burst.csv"
check "sim --server-config a BurstGPT trace, scaled and cut: exit 0" test "$(exit_code "$troupe" sim --server-config \
  "$tmp/server.toml" --trace "$tmp/burst.csv" --time-scale 0.1 --max-rows 2 --out "$tmp/simburst")" = 0
check "sim a BurstGPT trace: the failed request left out and counted" grep -q "a burstgpt trace, 1 failed requests left out" "$tmp/err"
check "sim a BurstGPT trace: two rows, the second at (118 - 5) x 0.1 s" \
  test "$(cut -d, -f5 "$tmp/simburst/server/requests.csv" | tail -n +2 | tr '\n' ' ')" = "0.000000 11.300000 "
check "sim --trace-format unknown: exit 2" test "$(exit_code "$troupe" sim --server-config "$tmp/server.toml" \
  --trace "$tmp/burst.csv" --trace-format csv)" = 2
check "sim --trace-format unknown: the formats listed" \
  grep -q "troupe sim: --trace-format is one of auto, troupe, azure, burstgpt, mooncake" "$tmp/err"
check "sim a trace read as another format: exit 1, the line" test "$(exit_code "$troupe" sim --server-config \
  "$tmp/server.toml" --trace "$tmp/burst.csv" --trace-format azure)" = 1 -a -n "$(grep -F 'burst.csv:1: a burstgpt trace, not azure' "$tmp/err")"
printf '[model]\ndir = "%s"\n[autoscaler]\npolicy = "queue_depth"\nmin_replicas = 2\n' "$tmp/tiny" >"$tmp/scaled.toml"
check "sim --server-config: a bad fleet is refused as the server refuses it" test "$(exit_code "$troupe" sim \
  --server-config "$tmp/scaled.toml" --trace "$trace")" = 1 -a "$(wc -l <"$tmp/err")" = 1

mkdir -p "$tmp/empty"
check "missing model: exit 1" test "$(exit_code "$troupe" generate --model "$tmp/empty" --prompt hi)" = 1
check "missing model names config.json" grep -q "config.json" "$tmp/err"
check "missing model error is one line" test "$(wc -l <"$tmp/err")" = 1
cp -r "$tmp/tiny" "$tmp/broken"
head -c 100 "$tmp/tiny/model.safetensors" >"$tmp/broken/model.safetensors"
check "truncated weights: exit 1" test "$(exit_code "$troupe" generate --model "$tmp/broken" --prompt hi)" = 1
check "truncated weights named" grep -q "model.safetensors" "$tmp/err"
printf 'GGUF\003\000\000\000' >"$tmp/short.gguf"
check "truncated GGUF file: exit 1" test "$(exit_code "$troupe" generate --model "$tmp/short.gguf" --prompt hi)" = 1
check "truncated GGUF file: one line naming it" \
  test "$(cat "$tmp/err")" = "troupe: $tmp/short.gguf: truncated: 8 bytes, shorter than a GGUF header"

# A CUDA device named where there is none (or no backend library): one line, exit 1.
serve_cuda() { timeout 120 "$troupe" serve --config "$src/config/default.toml" --model "$tmp/tiny" --port 0 --set 'engine.devices=["cuda:0"]' "$@"; }
if ! nvidia-smi -L >/dev/null 2>&1; then
  check "cuda:0 without a device: exit 1" test "$(exit_code serve_cuda)" = 1
  check "cuda:0 without a device: why, in one line" test "$(grep -c "troupe serve: " "$tmp/err")" = 1
  check "cuda:0 without a device: names it" grep -qE "troupe serve: (cuda:0|the CUDA backend)" "$tmp/err"
fi
check "no backend library: exit 1" test "$(TROUPE_CUDA_LIB=$tmp/none.so exit_code serve_cuda)" = 1
check "no backend library: named" grep -q "TROUPE_CUDA_LIB=$tmp/none.so cannot be loaded" "$tmp/err"
check "unknown device: exit 1" test "$(exit_code "$troupe" serve --config "$src/config/default.toml" --model "$tmp/tiny" --set 'engine.devices=["gpu"]')" = 1
check "unknown device: named" grep -q 'unknown device "gpu"' "$tmp/err"

echo "$fails failed"
[ "$fails" -eq 0 ]
