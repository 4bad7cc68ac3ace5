#!/usr/bin/env python3
"""make bench-routing: routing policies on 4 real replicas (the tiny model,
4 CPU devices, each its own KV cache), on a multi-turn chat workload.

48 conversations, 6 turns each, 8 in flight at a time; every conversation
starts with one of 4 system prompts, and each turn resends the whole
conversation with a new user message (x-session-id names the conversation).
Per policy: the share of looked-up prompt blocks found in the prefix cache
(the server's own counters, summed over devices) and TTFT p50/p90 (streamed,
measured by this client). One seeded workload, the same for every policy.
"""
import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from troupe_harness import make_tiny, server, use_troupe  # noqa: E402

use_troupe(os.environ.get("TROUPE", "build/troupe"))
POLICIES = ["round_robin", "least_tokens", "consistent_hash", "prefix_affinity"]
CONVERSATIONS, TURNS, CONCURRENCY = 48, 6, 8


def serve(model, policy):
    return server(model, 'engine.devices=["cpu", "cpu", "cpu", "cpu"]', "engine.threads=1",
                  "scheduler.kv_memory=24MiB", "router.policy=" + policy)


def ttft_of(port, session, messages):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"messages": messages, "max_tokens": 24, "stream": True, "ignore_eos": True})
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json", "x-session-id": session})
    r = c.getresponse()
    first, text = None, ""
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().strip()
        if line == "data: [DONE]":
            break
        if not line.startswith("data: "):
            continue
        delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content")
        if delta:
            if first is None:
                first = time.perf_counter() - t0
            text += delta
    c.close()
    return first, text


def run(model, policy):
    srv = serve(model, policy)
    rng = random.Random(7)
    systems = [" ".join(rng.choice(["licence", "program", "copy", "work", "notice", "terms", "source", "modify"])
                        for _ in range(160)) for _ in range(4)]
    plans = [(f"conv-{i}", systems[i % 4], [" ".join(rng.choice(["what", "may", "I", "do", "with", "the", "code",
                                                                  "and", "its", "copies"]) for _ in range(12))
                                             for _ in range(TURNS)]) for i in range(CONVERSATIONS)]
    ttfts, lock = [], threading.Lock()
    todo = list(plans)

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                session, system, questions = todo.pop(0)
            messages = [{"role": "system", "content": system}]
            for q in questions:
                messages.append({"role": "user", "content": q})
                t, answer = ttft_of(srv.port, session, messages)
                with lock:
                    ttfts.append(t)
                messages.append({"role": "assistant", "content": answer})

    try:
        q0, h0 = srv.metric("troupe_prefix_cache_queries_total"), srv.metric("troupe_prefix_cache_hits_total")
        threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        q1, h1 = srv.metric("troupe_prefix_cache_queries_total"), srv.metric("troupe_prefix_cache_hits_total")
    finally:
        srv.stop(timeout=120)
    ttfts = sorted(t for t in ttfts if t is not None)
    return (h1 - h0) / max(q1 - q0, 1), statistics.median(ttfts), ttfts[int(0.9 * (len(ttfts) - 1))], len(ttfts)


def main():
    model = make_tiny(tempfile.mkdtemp(prefix="troupe-bench-routing-"))
    print(f"{CONVERSATIONS} conversations x {TURNS} turns, {CONCURRENCY} at a time, 4 system prompts; "
          f"4 replicas on 4 CPU devices (tiny model, 24 MiB of KV each)")
    print(f"{'policy':>16} {'hit rate':>9} {'TTFT p50 ms':>12} {'TTFT p90 ms':>12} {'requests':>9}")
    for policy in POLICIES:
        hit, p50, p90, n = run(model, policy)
        print(f"{policy:>16} {100 * hit:>8.1f}% {1e3 * p50:>12.1f} {1e3 * p90:>12.1f} {n:>9}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
