#!/usr/bin/env python3
"""make bench-long-prefill: a long prompt's prefill beside running streams,
prefill pacing on (scheduler.prefill_chunk_cost = 1, the default) and off
(0), on the server and in the simulator.

Server: the tiny model, context raised to 32,768. Eight clients stream
128-token completions back to back and a ninth sends one-token requests;
after a baseline window, one 20,000-token prompt arrives. Reported per mode,
medians over rounds that alternate the two servers (both up, one loaded at
a time): the streams' token rate and p99 inter-token gap, alone and during
the prefill; short requests started per second (a ninth client sends them
back to back throughout, so the baseline carries the same load less the
prompt); the prefill's time. The issue's bar: during the prefill the
streams keep at least half their rate, and their p99 gap stays within
twice the baseline's plus one step's prefill chunk (the median step that
carried one, from the server's step log).

Simulator: the same shape as a trace, through `troupe sim` with the CPU
roofline of config/sim/long_prefill.toml, pacing off and on: the streams'
rate while the prompt prefills against the same seconds of a run without
it, the p99 step, short requests started a second, the prefill's time.

Usage: bench_long_prefill.py TROUPE [ROUNDS] [PRESET LONG]  (default: tiny
20000; stories110m 4000 is a model whose weights do not fit in the caches)"""

import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
from troupe_harness import ROOT, make_model, request, server, use_troupe  # noqa: E402

STREAMS = 8
LONG = 20000
WINDOW_S = 2.0


def stream_tokens(port, stop, stamps):
    """One client's streams, one after another until `stop`: short chats of
    128 tokens (their context stays short, as the baseline's); appends each
    token's arrival time."""
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 128, "stream": True, "ignore_eos": True,
                       "temperature": 0})
    while not stop.is_set():
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        f = s.makefile("rb")
        while not stop.is_set():
            line = f.readline()
            if not line or line.startswith(b"data: [DONE]"):
                break
            if line.startswith(b"data: {"):
                stamps.append(time.monotonic())
        s.close()


def gaps_in(stamps, t0, t1):
    ts = [t for t in stamps if t0 <= t <= t1]
    return [b - a for a, b in zip(ts, ts[1:])], len(ts)


def p99(xs):
    return sorted(xs)[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("nan")


ROUND = [0]


def chunk_step_ms(log, offset):
    """The median step that carried a chunk of the long prompt past its
    first (the admission's) beside decodes, from the server's step log past
    `offset`: the issue's "one chunk's time"."""
    with open(log) as f:
        f.seek(offset)
        lines = f.read().splitlines()
    times = []
    for line in lines:
        if not line.startswith("step "):
            continue
        w = line.split()
        chunks = [c.split("/") for c in w[4:]]
        if any(len(c) != 4 for c in chunks):  # (a line the server is still writing)
            continue
        if any(int(c[1]) > 0 and int(c[2]) > 1 for c in chunks) and any(c[2] == "1" for c in chunks):
            times.append(float(w[2]) * 1e3)
    return statistics.median(times) if times else 0.0


def one_round(srv, shorts_client=True):
    ROUND[0] += 1
    log = srv.step_log
    offset = os.path.getsize(log) if os.path.exists(log) else 0  # a prompt of its own each round: none is found in the prefix cache
    stop = threading.Event()
    stamps = [[] for _ in range(STREAMS)]
    threads = [threading.Thread(target=stream_tokens, args=(srv.port, stop, stamps[i]), daemon=True)
               for i in range(STREAMS)]
    done = threading.Event()
    shorts = []

    def short_requests():
        while not done.is_set():
            request(srv.port, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 1}, timeout=300)
            shorts.append(time.monotonic())

    # The short requests run from the start: the baseline carries the same
    # load beside the streams as the prefill's window, less the prompt.
    short = threading.Thread(target=short_requests, daemon=True)
    for t in threads:
        t.start()
    if shorts_client:
        short.start()
    time.sleep(1.0)  # all running
    b0 = time.monotonic()
    time.sleep(WINDOW_S)
    b1 = time.monotonic()
    p0 = time.monotonic()
    r, _ = request(srv.port, "POST", "/v1/completions",
                   {"prompt": [5 + (i * 7 + ROUND[0] * 13 + i * i) % 1000 for i in range(LONG)],
                    "max_tokens": 1}, timeout=600)
    p1 = time.monotonic()
    done.set()
    if shorts_client:
        short.join()
    stop.set()
    for t in threads:
        t.join(timeout=5)
    base_gaps, during_gaps, base_n, during_n = [], [], 0, 0
    for st in stamps:
        g, n = gaps_in(st, b0, b1)
        base_gaps += g
        base_n += n
        g, n = gaps_in(st, p0, p1)
        during_gaps += g
        during_n += n
    return {"status": r.status, "base_rate": base_n / (b1 - b0), "during_rate": during_n / (p1 - p0),
            "base_p99_ms": p99(base_gaps) * 1e3, "during_p99_ms": p99(during_gaps) * 1e3,
            "base_shorts_per_s": len([t for t in shorts if b0 <= t <= b1]) / (b1 - b0),
            "shorts_per_s": len([t for t in shorts if p0 <= t <= p1]) / (p1 - p0), "prefill_s": p1 - p0,
            "chunk_ms": chunk_step_ms(log, offset) if os.path.exists(log) else 0.0}


def sim_trace(path, with_long):
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens,tenant,priority,prefix_group\n")
        for i in range(STREAMS):
            f.write("0.0,16,8000,,,\n")
        if with_long:
            f.write(f"2.0,{LONG},1,,,\n")
        for k in range(400):
            f.write(f"{2.0 + 0.05 * k:.2f},8,1,,,\n")


def sim_run(troupe, tmp, name, trace, cost):
    out = os.path.join(tmp, name)
    n = sum(1 for _ in open(trace)) - 1
    subprocess.run([troupe, "sim", os.path.join(ROOT, "config", "sim", "long_prefill.toml"), "--quiet",
                    "--out", out, "--set", f"arrival.trace={trace}", "--set", f"sim.num_requests={n}",
                    "--set", f"replicas.prefill_chunk_cost={cost}"], check=True, stdout=subprocess.DEVNULL)
    run = os.path.join(out, json.load(open(os.path.join(out, "summary.json")))["runs"][0]["folder"])
    return list(csv.DictReader(open(os.path.join(run, "requests.csv")))), \
        list(csv.DictReader(open(os.path.join(run, "steps.csv"))))


def sim_rows(troupe, tmp):
    """The same shape in the simulator: streams of 8,000 tokens from 0 s,
    the long prompt at 2 s, a short request every 50 ms. The streams' rate
    while it prefills is compared with theirs over the same seconds of a run
    without it (the counterfactual: their contexts grow meanwhile); also
    the p99 step, short requests started a second, and the prefill's time."""
    with_long, without = os.path.join(tmp, "with.csv"), os.path.join(tmp, "without.csv")
    sim_trace(with_long, True)
    sim_trace(without, False)

    def window(steps, t0, t1):
        inside = [s for s in steps if t0 <= float(s["start_s"]) < t1]
        return sum(int(s["decode_tokens"]) for s in inside) / (t1 - t0), p99([float(s["duration_s"]) for s in inside])
    rows = {}
    for cost in ("0", "1"):
        reqs, steps = sim_run(troupe, tmp, f"sim{cost}", with_long, cost)
        _, alone = sim_run(troupe, tmp, f"alone{cost}", without, cost)
        long = next(r for r in reqs if int(r["prompt_tokens"]) == LONG)
        p0, p1 = float(long["arrival_s"]), float(long["first_token_s"])
        rate0, gap0 = window(alone, p0, p1)
        rate1, gap1 = window(steps, p0, p1)
        shorts = [r for r in reqs if int(r["prompt_tokens"]) == 8 and p0 <= float(r["first_token_s"]) < p1]
        chunked = [float(s["duration_s"]) for s in steps if p0 <= float(s["start_s"]) < p1
                   and int(s["prefill_tokens"]) > 16 and int(s["decode_tokens"]) > 0]  # (the prompt's, not a short's)
        chunk = statistics.median(chunked) if chunked else 0.0
        rows[cost] = (rate0, rate1, gap0 * 1e3, gap1 * 1e3, len(shorts) / (p1 - p0), p1 - p0, chunk * 1e3)
    return rows


def main():
    troupe = use_troupe(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    preset = sys.argv[3] if len(sys.argv) > 3 else "tiny"
    global LONG
    LONG = int(sys.argv[4]) if len(sys.argv) > 4 else LONG
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(os.path.join(tmp, preset), preset)
        common = ["scheduler.max_model_len=32768", "engine.threads=1"]
        if preset != "tiny":  # (a larger model's blocks: room for the long prompt beside the streams)
            common.append("scheduler.kv_memory=2GiB")
        servers = {}
        for name, cost in (("paced (prefill_chunk_cost 1)", "1"), ("unpaced (prefill_chunk_cost 0)", "0")):
            log = os.path.join(tmp, f"steps{cost}.log")  # (each step's shape and time: a chunk's step)
            servers[name] = server(model, *common, f"scheduler.prefill_chunk_cost={cost}", f"engine.step_log={log}")
            servers[name].step_log = log
        results = {k: [] for k in servers}
        try:
            for name, srv in servers.items():  # warm-up
                one_round(srv)
            for _ in range(rounds):
                for name, srv in servers.items():
                    results[name].append(one_round(srv))
        finally:
            for srv in servers.values():
                srv.stop()
        print(f"Long prefill beside {STREAMS} streams: a {LONG}-token prompt, {preset}, 1 engine thread; "
              f"medians of {rounds} rounds, the two servers alternating")
        print("(a ninth client sends one-token requests back to back throughout; the bar: kept >= 0.5, and the p99 "
              "gap during <= twice the p99 gap alone + the median step carrying a chunk of the prompt)")
        print(f"{'mode':32} {'rate alone':>11} {'rate during':>12} {'kept':>6} {'p99 gap alone':>14} "
              f"{'p99 during':>11} {'bar':>9} {'chunk step':>11} {'short/s alone':>14} {'during':>7} {'prefill s':>10}")
        for name, rs in results.items():
            m = {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "status"}
            bar = 2 * m["base_p99_ms"] + m["chunk_ms"]
            print(f"{name:32} {m['base_rate']:9.0f}/s {m['during_rate']:10.0f}/s {m['during_rate'] / m['base_rate']:6.2f} "
                  f"{m['base_p99_ms']:11.1f} ms {m['during_p99_ms']:8.1f} ms {bar:6.1f} ms {m['chunk_ms']:8.1f} ms "
                  f"{m['base_shorts_per_s']:14.1f} {m['shorts_per_s']:7.1f} {m['prefill_s']:10.2f}")
        rows = sim_rows(troupe, tmp)
        print("Simulator (config/sim/long_prefill.toml: stories110m's shape on the CPU roofline; the same shape as a trace):")
        for cost, (r0, r1, g0, g1, shorts, prefill, chunk) in rows.items():
            print(f"  prefill_chunk_cost {cost}: streams {r0:.0f}/s without the prompt, {r1:.0f}/s while it prefills "
                  f"(kept {r1 / r0:.2f}); p99 step {g0:.1f} / {g1:.1f} ms (bar {2 * g0 + chunk:.1f}: a chunk's step "
                  f"{chunk:.1f}); {shorts:.1f} short/s; prefill {prefill:.1f} s")

if __name__ == "__main__":
    main()
