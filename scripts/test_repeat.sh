#!/usr/bin/env bash
# make test-repeat N=5: runs the integration tests (the real server with
# real clients: integration/*, browser/*, cli*) N times and prints every
# failure with the end of its log. A test that fails once in N runs is a
# bug to find, not one to retry.
set -uo pipefail
build=${BUILD:-build}
rounds=${N:-5}
jobs=${JOBS:-2}
mapfile -t tests < <(meson test -C "$build" --list 2>/dev/null | grep -E '^(integration/|browser/|cli)')
[ "${#tests[@]}" -gt 0 ] || { echo "test-repeat: no integration tests found in $build"; exit 1; }
echo "test-repeat: ${#tests[@]} tests x $rounds rounds: ${tests[*]}"
failures=0
for ((round = 1; round <= rounds; round++)); do
  rm -f "$build/meson-logs/testlog.json"
  start=$SECONDS
  meson test -C "$build" --num-processes "$jobs" "${tests[@]}" >/dev/null 2>&1
  found=$(python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
bad = 0
try:
    lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except OSError:
    print("  (no test log: the run did not start)"); sys.exit(1)
for t in lines:
    if t["result"] not in ("OK", "SKIP", "EXPECTEDFAIL"):
        bad += 1
        out = ((t.get("stdout") or "") + (t.get("stderr") or "")).splitlines()
        fails = [l for l in out if l.startswith("FAIL")]
        print(f"  FAILED {t['name']} ({t['result']}, {t['duration']:.1f} s): {len(fails)} failed check(s)")
        for line in fails:
            print("    " + line)
        print("   the end of its output:")
        for line in out[-15:]:
            print("    " + line)
sys.exit(bad)
PY
)
  bad=$?
  echo "round $round: $((${#tests[@]} - bad)) passed, $bad failed ($((SECONDS - start)) s)"
  [ -n "$found" ] && echo "$found"
  failures=$((failures + bad))
done
echo "test-repeat: $failures failures in $rounds rounds"
[ "$failures" -eq 0 ]
