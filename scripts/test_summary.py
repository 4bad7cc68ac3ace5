#!/usr/bin/env python3
"""Prints `N passed, N failed` from meson's testlog.json, last (the line CI reads),
after a line counting the skipped tests (GPU tests where no device is found)."""
import json
import sys

passed = failed = skipped = 0
try:
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.strip():
                continue
            result = json.loads(line)["result"]
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
except OSError:
    failed = 1  # the build failed before any test ran
if skipped:
    print(f"{skipped} skipped (they need a CUDA device)")
print(f"{passed} passed, {failed} failed")
