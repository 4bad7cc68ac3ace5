#!/usr/bin/env python3
"""integration/soak: the server keeps nothing per request. The real
`troupe serve` (zero-cost executor, the tiny model's tokenizer) serves a
warm-up, then 20,000 requests from 8 keep-alive clients (completions and
chat, streamed and not, prompts unique); its resident memory may grow by
less than a small bound. Memory is not timing: the bound is 4 MiB, over ten
times the growth measured after the warm-up (~0.3 MiB), against ~52 MiB
that the sinks leaked before (2.6 KB a request, kept by the replica's
monitor attachables)."""

import concurrent.futures
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import check, make_tiny, server, sse_events, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])

BOUND_KIB = 4096


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def client(port, first, count):
    """count requests on one keep-alive connection; returns how many were answered in full."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    good = 0
    for i in range(first, first + count):
        if i % 2:
            path, body = "/v1/completions", {"prompt": f"soak {i}", "max_tokens": 5}
        else:
            path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": f"soak {i}"}], "max_tokens": 5}
        body["stream"] = i % 4 < 2
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        if r.status == 200 and (not body["stream"] or sse_events(text)[-1:] == ["[DONE]"]):
            good += 1
    c.close()
    return good


def serve_many(srv, first, n, clients=8):
    per = n // clients
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(lambda k: client(srv.port, first + k * per, per), range(clients)))


def main():
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="troupe-soak-test-")
    try:
        model = make_tiny(tmp)
        srv = server(model, "engine.executor=zero", "scheduler.enable_prefix_caching=false", "server.response_cache=0")
        try:
            good = serve_many(srv, 0, 4000)
            before = rss_kib(srv.proc.pid)
            marks = [before]
            for k in range(4):
                good += serve_many(srv, 4000 + k * 5000, 5000)
                marks.append(rss_kib(srv.proc.pid))
            check(good == 24000, f"every request answered in full ({good} of 24000)")
            grew = marks[-1] - before
            check(grew < BOUND_KIB, f"resident memory grows by less than {BOUND_KIB} KiB over 20,000 requests "
                                    f"after a warm-up of 4,000 (KiB every 5,000: {marks}; grew {grew})")
        finally:
            rc = srv.stop()
            check(rc == 0, f"the server stops on SIGTERM with exit 0 (got {rc})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
