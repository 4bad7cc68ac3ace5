#!/usr/bin/env python3
"""make bench-request-path: the serving path's own latency at low load.

`troupe serve` on the tiny model with the zero executor (tokens without a
model: what is left is the request's path through the gateway, the tokenizer
pool, the router, the scheduler and the sink). One client sends streamed chat
requests one at a time (max_tokens 4); TTFT is the time from sending the
request to the first content delta, end-to-end the time to [DONE]. Beside it,
in the same run and interleaved request by request, the floor: GET /health on
the same keep-alive connection kind (a new connection each, as the chat
requests), an HTTP round trip with no model work.

Medians and 90th percentiles over ROUNDS requests after 20 of warm-up.

Usage: bench_request_path.py TROUPE [ROUNDS]"""

import http.client
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
from troupe_harness import make_tiny, server, use_troupe  # noqa: E402


def chat(port, i):
    """(seconds to the first content delta, seconds to [DONE])."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"messages": [{"role": "user", "content": f"hello number {i}"}], "max_tokens": 4, "stream": True}
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"chat failed: {r.status} {r.read()[:200]!r}")
    first = None
    for raw in r:
        line = raw.decode().strip()
        if line == "data: [DONE]":
            break
        if first is None and line.startswith("data: ") and '"content"' in line:
            first = time.perf_counter() - t0
    done = time.perf_counter() - t0
    c.close()
    return first if first is not None else done, done


def health(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.perf_counter()
    c.request("GET", "/health")
    c.getresponse().read()
    dt = time.perf_counter() - t0
    c.close()
    return dt


def line(name, xs):
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"  {name:<28} median {statistics.median(xs) * 1e3:7.3f} ms   p90 {p90 * 1e3:7.3f} ms"


def main():
    use_troupe(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    with tempfile.TemporaryDirectory() as tmp:
        srv = server(make_tiny(tmp), "engine.executor=zero")
        try:
            for i in range(20):
                chat(srv.port, i)
                health(srv.port)
            ttft, e2e, floor = [], [], []
            for i in range(rounds):
                a, b = chat(srv.port, i)
                ttft.append(a)
                e2e.append(b)
                floor.append(health(srv.port))
        finally:
            srv.stop()
    print(f"request path, zero executor, tiny model, {rounds} streamed chat requests one at a time "
          "(max_tokens 4), interleaved with GET /health:")
    print(line("TTFT", ttft))
    print(line("end to end (4 tokens)", e2e))
    print(line("GET /health (the floor)", floor))
    print(f"  TTFT above the floor: {(statistics.median(ttft) - statistics.median(floor)) * 1e3:.3f} ms (medians)")


if __name__ == "__main__":
    main()
