#!/usr/bin/env python3
"""make sim-fidelity: the simulator against the real CPU server, on the same traces.

1. Calibration: the server (stories110m preset, CPU executor) runs two traces
   with --step-log; the simulator fits its cost model to those steps.
2. Capacity: a trace of requests all arriving at once; its request
   throughput is the server's capacity for this workload.
3. For loads of 30%, 60% and 85% of capacity: one Poisson trace each, run by
   `troupe bench --dataset trace` against the server and by `troupe sim` with
   the calibrated model; TTFT, ITL and E2E p50/p99 side by side.
Targets (issue 5): E2E and ITL p50/p99 within 10%, TTFT within 15%.
"""
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

TROUPE = os.environ.get("TROUPE", "build/troupe")
WORK = os.environ.get("BENCH_DIR", "/tmp/troupe-sim-fidelity")
N = int(os.environ.get("FIDELITY_REQUESTS", "160"))
SERVER = ["--set", "scheduler.kv_memory=1GiB", "--set", "scheduler.max_num_seqs=32",
          "--set", "scheduler.max_model_len=1024"]


def write_trace(path, n, rate, seed):
    """Poisson arrivals (rate None: all at once); lognormal lengths."""
    g = random.Random(seed)
    t = 0.0
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens\n")
        for _ in range(n):
            if rate:
                t += g.expovariate(rate)
            p = min(400, max(8, int(math.exp(math.log(80) + 0.6 * g.gauss(0, 1)))))
            o = min(200, max(4, int(math.exp(math.log(48) + 0.6 * g.gauss(0, 1)))))
            f.write(f"{t:.6f},{p},{o}\n")


def serve(step_log=None):
    args = [TROUPE, "serve", "--config", "config/default.toml", "--port", "0",
            "--model", os.path.join(WORK, "stories110m")] + SERVER
    if step_log:
        args += ["--step-log", step_log]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in p.stdout:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready:" in line:
            return p, port
    raise RuntimeError("troupe serve exited")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)


def bench(port, trace):
    out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{port}", "--dataset", "trace",
                          "--trace", trace], capture_output=True, text=True, check=True).stdout
    def field(name):
        m = re.search(re.escape(name) + r"\s+([0-9.]+)", out)
        return float(m.group(1)) if m else float("nan")
    if field("Successful requests:") != N:
        raise RuntimeError("not every request succeeded:\n" + out)
    return {"req/s": field("Request throughput (req/s):"),
            "TTFT p50": field("Median TTFT (ms):"), "TTFT p99": field("P99 TTFT (ms):"),
            "ITL p50": field("Median ITL (ms):"), "ITL p99": field("P99 ITL (ms):"),
            "E2E p50": field("Median E2EL (ms):"), "E2E p99": field("P99 E2EL (ms):")}


def simulate(trace, steps, tag):
    out_dir = os.path.join(WORK, "sim-" + tag)
    subprocess.run([TROUPE, "sim", "config/sim/cpu_stories110m.toml", "--quiet", "--out", out_dir,
                    "--set", "arrival.trace=" + os.path.abspath(trace), "--set", "cost.kind=calibrated",
                    "--set", "cost.step_log=" + steps],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "summary.json")) as f:
        r = json.load(f)["runs"][0]
    ms = lambda x: 1e3 * x
    return {"req/s": r["request_throughput"], "TTFT p50": ms(r["ttft_s"]["p50"]), "TTFT p99": ms(r["ttft_s"]["p99"]),
            "ITL p50": ms(r["itl_s"]["p50"]), "ITL p99": ms(r["itl_s"]["p99"]),
            "E2E p50": ms(r["e2e_s"]["p50"]), "E2E p99": ms(r["e2e_s"]["p99"]), "cost": r["cost_model"]}


def main():
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(os.path.join(WORK, "stories110m", "tokenizer.model")):
        subprocess.run([TROUPE, "make-model", "--preset", "stories110m", "--out", os.path.join(WORK, "stories110m")],
                       check=True, stdout=subprocess.DEVNULL)
    # Capacity, logging its steps (the large batches) for the fit.
    burst = os.path.join(WORK, "burst.csv")
    write_trace(burst, N, None, 1)
    p, port = serve(os.path.join(WORK, "burst.steps"))
    try:
        capacity = bench(port, burst)["req/s"]
    finally:
        stop(p)
    print(f"capacity (all {N} requests at once): {capacity:.2f} requests/s")
    # A second calibration run at half load (the small batches).
    calib = os.path.join(WORK, "calib.csv")
    write_trace(calib, N, 0.5 * capacity, 2)
    p, port = serve(os.path.join(WORK, "calib.steps"))
    try:
        bench(port, calib)
    finally:
        stop(p)
    steps = os.path.join(WORK, "all.steps")
    with open(steps, "w") as out:
        for name in ("burst.steps", "calib.steps"):
            with open(os.path.join(WORK, name)) as f:
                out.write(f.read())
    rows = []
    for load in (0.3, 0.6, 0.85):
        trace = os.path.join(WORK, f"load{int(load * 100)}.csv")
        write_trace(trace, N, load * capacity, 10 + int(load * 100))
        p, port = serve()
        try:
            real = bench(port, trace)
        finally:
            stop(p)
        sim = simulate(trace, steps, f"load{int(load * 100)}")
        rows.append((load, real, sim))
    print(sim["cost"])
    keys = ["TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p50", "E2E p99"]
    targets = {"TTFT": 15, "ITL": 10, "E2E": 10}
    print(f"{'load':>5} {'metric':>9} {'server ms':>10} {'sim ms':>10} {'error':>8} {'target':>7}")
    met = 0
    for load, real, sim in rows:
        for k in keys:
            err = 100 * (sim[k] - real[k]) / real[k] if real[k] else float("nan")
            target = targets[k.split()[0]]
            met += abs(err) <= target
            print(f"{int(load * 100):>4}% {k:>9} {real[k]:>10.1f} {sim[k]:>10.1f} {err:>+7.1f}% {target:>6}%")
    print(f"{met} of {len(rows) * len(keys)} figures within their target")


if __name__ == "__main__":
    sys.exit(main())
