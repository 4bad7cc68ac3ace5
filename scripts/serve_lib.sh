# Sourced by the serving benchmarks: $troupe and $work must be set.

# start_server [serve options...]: starts `troupe serve` on a free port in
# the background and waits until it is ready; sets $pid and $port. Exits
# with the server's log if it dies first.
start_server() {
  # Emptied first, here: the background job's own redirection may come after
  # the first look below, which would then find an earlier run's "ready:".
  : >"$work/server.log"
  "$troupe" serve --config config/default.toml --port 0 "$@" >"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "ready:" "$work/server.log" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || { cat "$work/server.log"; exit 1; }
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$work/server.log")
}

# stop_server: SIGTERM to the server start_server began; waits for it.
stop_server() {
  kill -TERM $pid
  wait $pid || true
}

# ensure_model PRESET DIR: writes the preset's model directory unless it is there.
ensure_model() {
  [ -f "$2/tokenizer.model" ] || "$troupe" make-model --preset "$1" --out "$2" >/dev/null
}
