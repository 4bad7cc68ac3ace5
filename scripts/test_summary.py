#!/usr/bin/env python3
"""Prints `N passed, N failed` from meson's testlog.json (and any more files
of its shape, e.g. make fuzz's results), last (the line CI reads), after a
line counting the skipped tests (GPU tests where no device is found).
Before them, each failed test's name and its own `FAIL` lines (or its last
lines when it printed none), so a failure can be read from the end of CI's
output alone."""
import json
import sys

passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                test = json.loads(line)
                result = test["result"]
                if result in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif result == "SKIP":
                    skipped += 1
                else:
                    failed += 1
                    failures.append(test)
    except OSError:
        failed += 1  # the build failed before any test ran (or the fuzzers did not run)
for test in failures:
    out = (test.get("stdout") or "").splitlines()
    said = [l for l in out if l.startswith("FAIL")] or out[-8:]
    print(f"failed: {test.get('name', '?')} ({test['result']})")
    for l in said[:10]:
        print("  " + l[:300])
if skipped:
    print(f"{skipped} skipped (they need a CUDA device)")
print(f"{passed} passed, {failed} failed")
