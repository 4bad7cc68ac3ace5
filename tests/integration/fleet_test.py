#!/usr/bin/env python3
"""Integration tests of the fleet: health checks, failover and recovery of
replicas in a real `troupe serve` on loopback, driven by real HTTP clients
and the admin API's fault injection (a replica that hangs, one that crashes)."""

import concurrent.futures
import json
import os
import re
import signal
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import (CONFIG, check, make_model, make_tiny, server, sse_events, summary,  # noqa: E402
                            use_troupe, wait_for)

TROUPE = use_troupe(sys.argv[1])


def replicas(srv):
    r, text = srv.request("GET", "/admin/replicas")
    return json.loads(text)["data"] if r.status == 200 else None


def queued(srv, replica):
    """Requests routed to a replica and not yet running there."""
    r = replicas(srv)[replica]
    return r["in_flight"] + r["waiting"]


def admin(srv, replica, action):
    r, text = srv.request("POST", f"/admin/replicas/{replica}/{action}")
    check(r.status == 200, f"admin: replica {replica} {action} ({r.status}: {text[:80]})")


class open_stream:
    """A streaming chat request read event by event."""

    def __init__(self, srv, content, max_tokens):
        self.c = srv.conn()
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "ignore_eos": True,
                "stream": True}
        self.c.request("POST", "/v1/chat/completions", body=json.dumps(body))
        self.r = self.c.getresponse()
        self.replica = self.r.getheader("x-troupe-replica")
        self.buf = b""

    def next_event(self):
        while b"\n\n" not in self.buf:
            chunk = self.r.read1(65536)
            if not chunk:
                return None
            self.buf += chunk
        event, self.buf = self.buf.split(b"\n\n", 1)
        return event.decode()[len("data: "):]

    def first_token(self):
        while True:
            e = self.next_event()
            if e is None or e == "[DONE]":
                return False
            obj = json.loads(e)
            if any(ch.get("delta", {}).get("content") for ch in obj.get("choices", [])):
                return True

    def rest(self):
        events = []
        while True:
            e = self.next_event()
            if e is None:
                break
            events.append(e)
            if e == "[DONE]":
                break
        self.c.close()
        return events


def finished_normally(events):
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    return bool(events) and events[-1] == "[DONE]" and any(
        ch.get("finish_reason") == "length" for o in objs for ch in o.get("choices", []))


def error_event(events):
    objs = [json.loads(e) for e in events if e != "[DONE]"]
    errs = [o["error"] for o in objs if "error" in o]
    return errs[0] if errs and events[-1] == "[DONE]" else None


def chat(srv, content, max_tokens=8):
    return srv.request("POST", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                        "ignore_eos": True})


def test_crash(model):
    """A replica that crashes: the requests it held that had streamed nothing
    are retried on the other and succeed; the stream it was feeding ends
    with an error event; the router takes it out; with none left, 503."""
    srv = server(model, "engine.replicas=2", "engine.threads=1", "server.admin_api=true",
                 "router.health_check_interval_s=0.2", "router.health_check_timeout_s=2")
    try:
        reps = replicas(srv)
        check(reps is not None and [x["ready"] for x in reps] == [True, True], f"two replicas in rotation ({reps})")
        wait_for("deep checks pass on both replicas", lambda: all(x["checks"] >= 1 for x in replicas(srv)))
        check(all(x["failed_checks"] == 0 for x in replicas(srv)), "no deep check failed")
        admin(srv, 0, "drain")  # everything new goes to replica 1
        a = open_stream(srv, "a long story", 1500)
        check(a.r.status == 200 and a.replica == "1" and a.first_token(),
              f"stream A streams from replica 1 ({a.r.status}, replica {a.replica})")
        admin(srv, 1, "hang")
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            b = pool.submit(chat, srv, "request B", 6)
            c = pool.submit(lambda: srv.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "request C"}], "max_tokens": 5, "ignore_eos": True,
                "stream": True}))
            # (A hung replica sends no more load reports: they are in flight to
            # it, or waiting in its last report when its last step saw them.)
            wait_for("B and C are routed to the hung replica", lambda: queued(srv, 1) >= 2, 10)
            admin(srv, 0, "resume")
            admin(srv, 1, "crash")
            rb, tb = b.result(timeout=60)
            rc, tc = c.result(timeout=60)
        body = json.loads(tb) if rb.status == 200 else {}
        check(rb.status == 200 and body["usage"]["completion_tokens"] == 6,
              f"B (not streamed yet) is retried on replica 0 and completes ({rb.status}: {tb[:100]})")
        check(rc.status == 200 and finished_normally(sse_events(tc)),
              f"C (streaming, no token yet) is retried and streams to its end ({rc.status}: {tc[-120:]!r})")
        err = error_event(a.rest())
        check(err is not None and err.get("code") == "replica_failed",
              f"A (mid-stream) ends with an error event and [DONE] ({err})")
        check(srv.metric("troupe_request_retries_total") >= 2, "the retries are counted")
        check(srv.metric("troupe_request_failures_total") >= 1, "the failed stream is counted")
        reps = replicas(srv)
        check(not reps[1]["alive"] and not reps[1]["ready"] and reps[0]["ready"],
              f"the router takes the crashed replica out ({reps})")
        check(srv.metric("troupe_replica_ready", 'replica="1"') == 0, "troupe_replica_ready{replica=1} is 0")
        got = {chat(srv, f"after {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
        check(got == {"0"}, f"new requests go to the surviving replica ({sorted(got)})")
        r, _ = srv.request("GET", "/health/ready")
        check(r.status == 200, "/health/ready is 200 while a replica is ready")
        admin(srv, 0, "crash")
        wait_for("both replicas out", lambda: not any(x["ready"] for x in replicas(srv)), 10)
        r, text = srv.request("GET", "/health/ready")
        check(r.status == 503 and "no replica ready" in text, f"/health/ready is 503 with none ready ({text})")
        r, text = chat(srv, "anyone?")
        check(r.status == 503 and json.loads(text)["error"]["type"] == "service_unavailable",
              f"a completion with no replica ready gets a 503 JSON error ({text[:100]})")
    finally:
        srv.stop()


def test_hang(model):
    """A replica that hangs: its deep checks time out, the router takes it
    out after unhealthy_after failures and its requests move (those not yet
    streamed) or end with an error event (the stream it fed); once it
    recovers, healthy_after passes bring it back."""
    srv = server(model, "engine.replicas=2", "engine.threads=1", "server.admin_api=true",
                 "router.health_check_interval_s=0.2", "router.health_check_timeout_s=0.5",
                 "router.unhealthy_after=2", "router.healthy_after=2")
    try:
        admin(srv, 0, "drain")
        f = open_stream(srv, "a stream", 1500)
        check(f.replica == "1" and f.first_token(), "stream F streams from replica 1")
        admin(srv, 1, "hang")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            e = pool.submit(chat, srv, "request E", 4)
            wait_for("E is routed to the hung replica", lambda: queued(srv, 1) >= 1, 10)
            admin(srv, 0, "resume")
            t0 = time.monotonic()
            re_, te = e.result(timeout=60)
            took = time.monotonic() - t0
        check(re_.status == 200 and json.loads(te)["usage"]["completion_tokens"] == 4,
              f"E moves to replica 0 once replica 1 fails its checks ({re_.status}, after {took:.1f} s)")
        err = error_event(f.rest())
        check(err is not None and err.get("code") == "replica_failed", f"stream F ends with an error event ({err})")
        reps = replicas(srv)
        check(reps[1]["alive"] and not reps[1]["healthy"] and not reps[1]["ready"] and reps[1]["failed_checks"] >= 2,
              f"the hung replica is out of rotation, alive but unhealthy ({reps[1]})")
        check(srv.metric("troupe_health_checks_failed_total", 'replica="1"') >= 2, "its failed checks are counted")
        got = {chat(srv, f"meanwhile {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
        check(got == {"0"}, f"meanwhile everything goes to replica 0 ({sorted(got)})")
        admin(srv, 1, "recover")
        if wait_for("the recovered replica returns to rotation", lambda: replicas(srv)[1]["ready"]):
            got = {chat(srv, f"later {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
            check(got == {"0", "1"}, f"the router uses it again ({sorted(got)})")
    finally:
        srv.stop()


def test_weighted(model):
    """router.weights: the weighted policy gives each replica its share."""
    srv = server(model, "engine.threads=1", "engine.replicas=2", "router.policy=weighted", "router.weights=[3, 1]")
    try:
        got = [chat(srv, f"w {i}", 1)[0].getheader("x-troupe-replica") for i in range(8)]
        check(got.count("0") == 6 and got.count("1") == 2, f"weights 3:1 give replica 0 three requests in four ({got})")
    finally:
        srv.stop()


def test_admin_off(model):
    srv = server(model, "engine.threads=1")
    try:
        r, _ = srv.request("GET", "/admin/replicas")
        check(r.status == 404, "the admin API is off by default (404)")
        r, text = srv.request("GET", "/health/ready?model=nope")
        check(r.status == 404 and "model_not_found" in text, "/health/ready?model= an unknown model is 404")
        name = os.path.basename(model)
        r, _ = srv.request("GET", f"/health/ready?model={name}")
        check(r.status == 200, "/health/ready?model= the served model is 200")
    finally:
        srv.stop()


def test_models(tmp, model):
    """Several models at once, routed by `model`; a canary version taking its
    share of sessions, sticky per session, its tag on every response; a
    capability route sending small requests to a small model."""
    small = os.path.join(tmp, "small")
    v2 = os.path.join(tmp, "tiny-v2")
    for d, seed in ((small, "2"), (v2, "3")):
        make_model(d, "tiny", "--seed", seed)
    more = (f'[{{ dir = "{small}", name = "small" }}, '
            f'{{ dir = "{v2}", name = "tiny", version = "v2", canary_percent = 50 }}]')
    rules = ('[{ model = "auto", small = "small", large = "tiny", max_prompt_tokens = 24, max_tokens = 8, '
             'tiers = ["free"] }]')
    srv = server(model, "engine.threads=1", "model.version=v1", "model.more=" + more,
                 "router.capability_rules=" + rules)
    try:
        _, text = srv.request("GET", "/v1/models")
        ids = [m["id"] for m in json.loads(text)["data"]]
        check(ids == ["tiny", "small", "auto"], f"/v1/models lists the models and the route ({ids})")

        def ask(name, content, headers=None, **extra):
            body = {"messages": [{"role": "user", "content": content}], "max_tokens": 4}
            if name:
                body["model"] = name
            body.update(extra)
            r, text = srv.request("POST", "/v1/chat/completions", body, headers)
            obj = json.loads(text)
            return r.status, obj.get("model"), r.getheader("x-model-version")

        status, name, version = ask("small", "hi")
        check(status == 200 and name == "small" and version.startswith("small@"),
              f"model=small goes to the small model, with its version tag ({status}, {name}, {version})")
        versions = {}
        for i in range(40):
            seen = {ask("tiny", f"turn {t}", {"x-session-id": f"s{i}"})[2] for t in range(3)}
            if len(seen) != 1:
                check(False, f"session s{i} keeps one version ({sorted(seen)})")
            versions[i] = seen.pop() if len(seen) == 1 else None
        got = sorted(set(versions.values()))
        v2_share = sum(v == "v2" for v in versions.values()) / len(versions)
        check(got == ["v1", "v2"] and 0.2 <= v2_share <= 0.8,
              f"a 50% canary: sessions split between v1 and v2, each sticky ({v2_share:.0%} on v2)")
        check(ask(None, "hi")[1] == "tiny", "a request naming no model gets the default")
        check(ask("auto", "hi", max_tokens=4)[1] == "small", "auto: a short prompt with a small max_tokens -> small")
        check(ask("auto", "hi", max_tokens=64)[1] == "tiny", "auto: a large max_tokens -> large")
        long_prompt = "This License applies to any program or other work. " * 8
        check(ask("auto", long_prompt, max_tokens=4)[1] == "tiny", "auto: a long prompt -> large")
        check(ask("auto", long_prompt, {"x-troupe-tier": "free"}, max_tokens=4)[1] == "small",
              "auto: the free tier -> small whatever the prompt")
        r, text = srv.request("POST", "/v1/chat/completions",
                              {"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]})
        check(r.status == 400 and json.loads(text)["error"]["code"] == "model_not_found" and "'small'" in text,
              f"an unknown model is a 400 naming the served ones ({text[:120]})")
        for name in ("tiny", "small"):
            r, _ = srv.request("GET", f"/health/ready?model={name}")
            check(r.status == 200, f"/health/ready?model={name} is 200")
        _, text = srv.request("GET", "/metrics")
        check('model_name="small"' in text and 'version="v2"' in text,
              "/metrics has each model's series (the versions labelled)")
        if shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
            check(p.returncode == 0, f"promtool accepts the metrics of several models ({p.stdout}{p.stderr})")
    finally:
        srv.stop()
    for sets, what, expect in (
            (["model.more=" + f'[{{ dir = "{v2}", name = "tiny" }}]'], "a second model with a served name",
             "needs a canary_percent"),
            (["model.more=" + f'[{{ dir = "{v2}", name = "tiny", canary_percent = 10 }}]'], "a canary without a tag",
             "needs a version tag"),
            (["router.capability_rules=" + '[{ model = "auto", small = "nope", large = "tiny" }]'],
             "a rule naming no served model", "router.capability_rules[0].small: no served model 'nope'")):
        out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--model", model, "--port", "0"] +
                             sum([["--set", x] for x in sets], []), capture_output=True, text=True, timeout=60)
        lines = out.stderr.strip().splitlines()
        check(out.returncode == 1 and len(lines) == 1 and expect in lines[0], f"{what} stops start-up: {out.stderr.strip()}")


def test_autoscaler(model):
    """The autoscaler (queue_depth, 2 requests per replica, 1 to 3 replicas,
    a warm pool of 1) scales out under a burst, from the pool at once and
    then by a cold start, and back in after it, draining replicas whose
    requests finish: no request is dropped."""
    srv = server(model, "engine.threads=1", "scheduler.max_num_seqs=4", "router.policy=least_requests",
                 "server.admin_api=true", "autoscaler.policy=queue_depth", "autoscaler.target=2",
                 "autoscaler.max_replicas=3", "autoscaler.interval_s=0.2", "autoscaler.scale_in_delay_s=1",
                 "autoscaler.warm_pool=1")
    try:
        def scaler():
            return json.loads(srv.request("GET", "/admin/autoscaler")[1])

        wait_for("the warm pool fills", lambda: scaler()["replicas"] == ["serving", "warm"])
        check(srv.metric("troupe_autoscaler_desired_replicas") == 1, "one replica wanted while idle")
        results, seen = [], []
        stop = time.monotonic() + 4

        def client(i):
            while time.monotonic() < stop:
                r, text = chat(srv, f"client {i}", 40)
                results.append((r.status, json.loads(text).get("usage", {}).get("completion_tokens")))
                seen.append(r.getheader("x-troupe-replica"))

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            clients = [pool.submit(client, i) for i in range(12)]
            peak, polls = None, []
            while not all(c.done() for c in clients):
                s = scaler()
                polls.append(s)
                if s["desired"] == 3 and peak is None:
                    peak = s
                time.sleep(0.1)
            for c in clients:
                c.result()
        # (The reason of the decision that asked for them: the poll above may
        # only see a later one, "on target", so it is read from /metrics.)
        _, text = srv.request("GET", "/metrics")
        over = re.search(r'troupe_autoscaler_decision\{[^}]*reason="requests per replica over target"[^}]*\}', text)
        check(peak is not None and over is not None,
              f"under the burst the autoscaler wants 3 replicas, requests per replica over target ({peak})")
        check(len(set(seen) - {"0"}) >= 2, f"the new replicas take traffic ({sorted(set(seen))})")
        # Never more serving than max_replicas. A fourth replica index serves
        # only after a scale-in within the burst (on a starved machine the
        # clients may not keep it up; seen under two CPU hogs): a replica
        # parked warm, then another taken from the pool.
        serving = [p["replicas"].count("serving") for p in polls]
        check(max(serving, default=0) <= 3, f"at most 3 replicas serve at once ({serving})")
        scaled_in = any(p["scale_ins"] > 0 for p in polls)
        check(len(set(seen)) == 3 or scaled_in,
              f"the burst's replicas are the 3 it scaled out to, unless it scaled in meanwhile ({sorted(set(seen))}; "
              f"polls: {[(p['desired'], p['reason'], p['replicas'], p['scale_ins']) for p in polls]})")
        check(all(r == (200, 40) for r in results) and len(results) > 12,
              f"every request of the burst completes ({len(results)} requests)")
        check(over is not None, "the decision's reason is a metric")
        # Long requests while it scales in: the drained replica finishes its
        # own. The clients keep three requests running until a drain is seen
        # (a fixed set of three ran ~0.2 s on this model, and the scale-in,
        # up to scale_in_delay_s after the burst's last scaling, came after
        # them about once in seven runs).
        stop_longs = threading.Event()

        def long_client(i):
            out = []
            while not stop_longs.is_set():
                out.append(chat(srv, f"long {i}", 600))
            return out

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            clients = [pool.submit(long_client, i) for i in range(3)]
            drained_while_busy, states, t0 = False, [], time.monotonic()
            while not drained_while_busy and time.monotonic() < t0 + 20:
                s = scaler()
                if not states or states[-1][1] != s["replicas"]:
                    states.append((round(time.monotonic() - t0, 2), s["replicas"], s["reason"]))
                drained_while_busy = "draining" in s["replicas"]
                time.sleep(0.02)
            stop_longs.set()
            done = [d for c in clients for d in c.result()]
        check(all(r.status == 200 and json.loads(t)["usage"]["completion_tokens"] == 600 for r, t in done),
              "requests on a draining replica run to their end")
        check(drained_while_busy, f"a replica drained while requests were running ({states})")
        wait_for("back to one serving replica after the burst",
                 lambda: scaler()["replicas"].count("serving") == 1 and "draining" not in scaler()["replicas"], 20)
        s = scaler()
        check(s["scale_ins"] >= 2 and s["replicas"].count("warm") == 1,
              f"scaled in one drained replica at a time, the pool kept ({s})")
        r, _ = chat(srv, "still there?", 2)
        check(r.status == 200, "the fleet serves after scaling in")
    finally:
        srv.stop()


SECRET_FILE = None  # the fleet's secret (router.worker_secret_file), written by main()


def write_secret(path, secret):
    with open(path, "w") as f:
        f.write(secret + "\n")
    return path


class worker:
    """A `troupe worker --join` process; its replica indices from its first
    line. It proves it knows the fleet's secret (SECRET_FILE), or another
    file's (secret_file), or none (secret_file="")."""

    def __init__(self, join, model, *sets, secret_file=None):
        secret_file = SECRET_FILE if secret_file is None else secret_file
        args = [TROUPE, "worker", "--join", join, "--config", CONFIG, "--model", model, "--set", "engine.threads=1"]
        if secret_file:
            args += ["--set", "router.worker_secret_file=" + secret_file]
        for x in sets:
            args += ["--set", x]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.line = self.proc.stdout.readline()
        m = re.search(r"replicas? ([0-9, ]+) of", self.line)
        self.replicas = [int(x) for x in m.group(1).split(",")] if m else []


def refused(model, *sets):
    """`troupe serve` of `model` with these --sets, expected to refuse:
    its exit code, its stderr's lines, and whether it ever said "listening
    on" (a refused configuration is refused before any port opens)."""
    args = [TROUPE, "serve", "--config", CONFIG, "--model", model, "--port", "0"]
    for x in sets:
        args += ["--set", x]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return out.returncode, out.stderr.strip().splitlines(), "listening on" in out.stdout + out.stderr


# Every series with a replica label: each replica, local or remote, has one in each.
REPLICA_SERIES = ["num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "num_preemptions_total",
                  "num_requests_swapped", "num_swap_outs_total", "replica_ready", "health_checks_failed_total"]


def missing_replica_series(srv, replica):
    _, text = srv.request("GET", "/metrics")
    return [n for n in REPLICA_SERIES
            if not re.search(r'^troupe_' + n + r'\{[^}]*replica="' + replica + r'"', text, re.M)]


def test_remote(model):
    """Replicas in another process (troupe worker --join) over CAF's network
    layer: they serve like local ones (the same greedy tokens and logprobs);
    killing the worker mid-stream ends its stream with an error event and
    moves its not-yet-streamed requests to the local replica; the router
    takes it out and a new worker joins."""
    srv = server(model, "engine.threads=1", "server.admin_api=true", "router.worker_port=0",
                 "router.worker_secret_file=" + SECRET_FILE,
                 "router.health_check_interval_s=0.2", "router.health_check_timeout_s=2")
    w = None
    try:
        join = re.search(r"workers join at ([0-9.]+:\d+)", "".join(srv.log)).group(1)
        w = worker(join, model)
        check(w.replicas == [1], f"a worker joins as replica 1 ({w.line.strip()})")
        wait_for("the remote replica is in rotation", lambda: [x["ready"] for x in replicas(srv)] == [True, True])
        answers = {}
        generated0 = srv.metric("troupe_generation_tokens_total")
        ttft0 = srv.metric("troupe_time_to_first_token_seconds_count")
        generated = 0
        for i in range(4):
            r, text = srv.request("POST", "/v1/completions",
                                  {"prompt": "Hello there", "max_tokens": 8, "temperature": 0, "logprobs": 2})
            choice = json.loads(text)["choices"][0]
            generated += json.loads(text)["usage"]["completion_tokens"]
            answers.setdefault(r.getheader("x-troupe-replica"), []).append(
                (choice["text"], choice["logprobs"]["token_logprobs"]))
        check(sorted(answers) == ["0", "1"] and answers["0"][0] == answers["1"][0],
              f"local and remote replicas give the same greedy tokens and logprobs ({answers})")
        check(srv.metric("troupe_generation_tokens_total") == generated0 + generated and
              srv.metric("troupe_time_to_first_token_seconds_count") == ttft0 + 4,
              "/metrics counts the tokens and latencies of requests the remote replica served")
        check(not missing_replica_series(srv, "1"), f'/metrics has replica="1" (the worker\'s) in every per-replica '
              f'series (missing: {missing_replica_series(srv, "1")})')
        check(wait_for("deep checks pass on the remote replica", lambda: replicas(srv)[1]["checks"] >= 1) and
              replicas(srv)[1]["failed_checks"] == 0, "deep checks reach the remote replica")
        admin(srv, 0, "drain")
        a = open_stream(srv, "a long story", 1500)
        check(a.r.status == 200 and a.replica == "1" and a.first_token(), "stream A streams from the remote replica")
        wait_for('/metrics: troupe_num_requests_running{replica="1"} is 1 while A runs there',
                 lambda: srv.metric("troupe_num_requests_running", 'replica="1"') == 1)
        check(srv.metric("troupe_kv_cache_usage_perc", 'replica="1"') > 0,
              '/metrics: the remote replica holds KV blocks for A (kv_cache_usage_perc{replica="1"} > 0)')
        admin(srv, 1, "hang")  # (through the proxy and the endpoint to the worker's scheduler)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            b = pool.submit(chat, srv, "request B", 6)
            wait_for("B is routed to the remote replica", lambda: queued(srv, 1) >= 1, 10)
            admin(srv, 0, "resume")
            w.proc.kill()
            w.proc.wait()
            rb, tb = b.result(timeout=60)
        check(rb.status == 200 and json.loads(tb)["usage"]["completion_tokens"] == 6 and
              rb.getheader("x-troupe-replica") == "0",
              f"B (not streamed) moves to the local replica when the worker is killed ({rb.status}: {tb[:80]})")
        err = error_event(a.rest())
        check(err is not None and err.get("code") == "replica_failed", f"stream A ends with an error event ({err})")
        wait_for("the router takes the dead worker's replica out", lambda: not replicas(srv)[1]["alive"], 10)
        got = {chat(srv, f"after {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
        check(got == {"0"}, f"new requests go to the local replica ({sorted(got)})")
        w = worker(join, model)
        check(w.replicas == [2], f"a new worker joins as replica 2 ({w.line.strip()})")
        wait_for("the new worker's replica is in rotation", lambda: replicas(srv)[2]["ready"])
        got = {chat(srv, f"again {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
        check(got == {"0", "2"}, f"the router uses it ({sorted(got)})")
        check(not missing_replica_series(srv, "2") and srv.metric("troupe_replica_ready", 'replica="2"') == 1,
              f'/metrics has the second worker\'s replica="2" series (missing: {missing_replica_series(srv, "2")})')
        w.proc.send_signal(signal.SIGTERM)
        out = w.proc.communicate(timeout=30)[0]
        check(w.proc.returncode == 0 and "stopped" in out, f"a worker stops on SIGTERM with exit 0 ({out.strip()})")
        wait_for("its replica leaves rotation", lambda: not replicas(srv)[2]["alive"], 10)
        # A frozen worker (its connection open, nothing answering) is dropped
        # after missed heartbeats, as if it died; thawed, it finds its link
        # gone and rejoins, as a new replica that serves once its health
        # checks pass (healthy_after, 2).
        w = worker(join, model)
        frozen = w.replicas[0]
        wait_for("the third worker's replica is in rotation", lambda: replicas(srv)[frozen]["ready"])
        t0 = time.monotonic()
        w.proc.send_signal(signal.SIGSTOP)
        dropped = wait_for("a frozen worker is dropped", lambda: not replicas(srv)[frozen]["alive"], 20)
        check(dropped, f"a frozen worker's replica is taken out after missed heartbeats ({time.monotonic() - t0:.1f} s)")
        w.proc.send_signal(signal.SIGCONT)
        back = wait_for("the thawed worker rejoins as a new replica, in rotation",
                        lambda: len(replicas(srv)) == frozen + 2 and replicas(srv)[frozen + 1]["ready"], 30)
        if back:
            rejoined = replicas(srv)[frozen + 1]
            check(rejoined["checks"] >= 2 and not replicas(srv)[frozen]["alive"],
                  f"the rejoined replica came into rotation after its health checks ({rejoined})")
            got = {chat(srv, f"rejoined {i}", 2)[0].getheader("x-troupe-replica") for i in range(4)}
            check(got == {"0", str(frozen + 1)}, f"the router uses the rejoined replica ({sorted(got)})")
        check(w.proc.poll() is None, "the thawed worker keeps running")
        w.proc.send_signal(signal.SIGTERM)
        out = w.proc.communicate(timeout=30)[0]
        check(w.proc.returncode == 0 and "dropped" in out and f"rejoined {join}: replica {frozen + 1} of" in out and
              "stopped" in out, f"the thawed worker said it rejoined, and stops on SIGTERM ({out.strip()})")
        wait_for("the rejoined replica leaves rotation", lambda: not replicas(srv)[frozen + 1]["alive"], 10)
        other = worker(join, model, "model.served_model_name=other")
        out = other.line + other.proc.communicate(timeout=30)[0]
        lines = out.strip().splitlines()
        check(other.proc.returncode == 1 and len(lines) == 1 and "no model 'other' is served here" in lines[0],
              f"a worker of a model not served is refused with one line ({out.strip()})")
        # Workers prove they know the fleet's secret: a wrong one is refused
        # with one line on both sides and gets nothing; none is refused at once.
        before = len(replicas(srv))
        log_before = len(srv.read_log())
        wrong = worker(join, model, secret_file=write_secret(os.path.join(os.path.dirname(SECRET_FILE), "wrong"),
                                                             "not the fleet's secret, 32 bytes"))
        out = wrong.line + wrong.proc.communicate(timeout=30)[0]
        lines = out.strip().splitlines()
        check(wrong.proc.returncode == 1 and len(lines) == 1 and "refused the worker: wrong credentials" in lines[0],
              f"a worker with the wrong secret is refused with one line ({out.strip()})")
        wait_for("the router node logs the refusal", lambda: any("refused a worker" in x for x in srv.read_log()[log_before:]), 10)
        refusals = [x.strip() for x in srv.read_log()[log_before:] if "refused a worker" in x]
        check(len(refusals) == 1 and "worker_secret_file" in refusals[0],
              f"the router node says so in one line ({refusals})")
        check(len(replicas(srv)) == before, f"the refused worker got no replica slot ({len(replicas(srv))} replicas)")
        bare = worker(join, model, secret_file="")
        out = bare.line + bare.proc.communicate(timeout=30)[0]
        lines = out.strip().splitlines()
        check(bare.proc.returncode == 1 and len(lines) == 1 and "router.worker_secret_file: workers must prove" in lines[0],
              f"a worker without a secret is refused at once, one line ({out.strip()})")
        log = "".join(srv.read_log())
        check(open(SECRET_FILE).read().strip() not in log and "not the fleet's secret" not in log,
              "no secret in the router node's log")
        # A worker port another process holds: refused before the API's port opens.
        code, lines, listened = refused(model, f"router.worker_port={srv.port}",
                                        "router.worker_secret_file=" + SECRET_FILE)
        check(code == 1 and len(lines) == 1 and "router.worker_port: cannot listen on" in lines[0] and not listened,
              f"a router node whose worker port is taken does not start, one line, never listening ({lines})")
    finally:
        if w and w.proc.poll() is None:
            w.proc.kill()
        srv.stop()
    # A router node's secret is read before it listens: without one, it never says "listening on".
    secrets = os.path.dirname(SECRET_FILE)
    for what, sets, expect in (
            ("no secret", [], "workers must prove"),
            ("a missing secret file", ["router.worker_secret_file=" + os.path.join(secrets, "absent")], "cannot read"),
            ("an empty secret file", ["router.worker_secret_file=" + write_secret(os.path.join(secrets, "empty"), "")],
             "shorter than 16 bytes")):
        code, lines, listened = refused(model, "router.worker_port=0", *sets)
        check(code == 1 and len(lines) == 1 and "router.worker_secret_file: " in lines[0] and expect in lines[0] and
              not listened, f"a router node with {what} does not start, one line, never listening ({lines})")
    for join, code, expect in (("127.0.0.1:1", 1, "cannot reach 127.0.0.1:1"), ("nowhere", 2, "--join wants HOST:PORT")):
        out = subprocess.run([TROUPE, "worker", "--join", join, "--config", CONFIG, "--model", model,
                              "--set", "router.worker_secret_file=" + SECRET_FILE],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == code and expect in out.stderr.splitlines()[0],
              f"troupe worker --join {join}: exit {code}, one line ({out.stderr.strip().splitlines()[0]})")


def make_certificates(d):
    """A CA with a router and a worker certificate, and a rogue CA's certificate."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=troupe test CA")
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue-ca.key", "-out", "rogue-ca.pem", "-days", "2",
        "-subj", "/CN=rogue CA")
    for name, ca in (("router", "ca"), ("worker", "ca"), ("rogue", "rogue-ca")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name)
        run("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
            "-out", name + ".pem", "-days", "2")
    return lambda name, ca="ca": [f"router.worker_tls_cert={d}/{name}.pem", f"router.worker_tls_key={d}/{name}.key",
                                  f"router.worker_tls_ca={d}/{ca}.pem"]


def test_tls(tmp, model):
    """router.worker_tls_*: the workers' link is mutual TLS (the gate's, in
    front of CAF): a worker whose certificate the fleet's CA signed joins and
    serves; one with a certificate of another CA, even trusting the fleet's
    CA, is refused in the handshake, and so is one without TLS (when the
    gate's handshake deadline closes it)."""
    d = os.path.join(tmp, "tls")
    os.makedirs(d)
    tls = make_certificates(d)
    srv = server(model, "engine.threads=1", "server.admin_api=true", "router.worker_port=0",
                 "router.worker_secret_file=" + SECRET_FILE, "router.health_check_interval_s=0.2", *tls("router"))
    w = None
    try:
        join = re.search(r"workers join at ([0-9.]+:\d+)", "".join(srv.log)).group(1)
        w = worker(join, model, *tls("worker"))
        check(w.replicas == [1], f"TLS: a worker with the fleet CA's certificate joins ({w.line.strip()})")
        wait_for("the TLS worker's replica is in rotation", lambda: [x["ready"] for x in replicas(srv)] == [True, True])
        seen = set()
        for i in range(4):
            r, _ = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 4})
            seen.add((r.status, r.getheader("x-troupe-replica")))
        check(seen == {(200, "0"), (200, "1")}, f"TLS: the worker's replica serves ({sorted(seen)})")
        for what, sets in (("a certificate of another CA", tls("rogue")),
                           ("a certificate of another CA that trusts the fleet's CA", tls("rogue", "ca")),
                           ("no TLS", [])):
            bad = worker(join, model, *sets)
            out = (bad.line + bad.proc.communicate(timeout=30)[0]).strip()
            check(bad.proc.returncode == 1 and len(out.splitlines()) == 1 and "cannot reach" in out,
                  f"TLS: a worker with {what} is refused, one line ({out})")
        check(len(replicas(srv)) == 2, f"TLS: the refused workers got nothing ({len(replicas(srv))} replicas)")
        out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--model", model, "--port", "0",
                              "--set", "router.worker_tls_cert=" + d + "/router.pem"], capture_output=True, text=True,
                             timeout=60)
        check(out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1 and "go together" in out.stderr,
              f"TLS: a certificate without its key and CA is one line ({out.stderr.strip()})")
        # The TLS files are checked before serve listens, each bad one named.
        write_secret(os.path.join(d, "not.pem"), "not a certificate")
        open(os.path.join(d, "empty.key"), "w").close()
        for i, key, path, expect in ((0, "router.worker_tls_cert", d + "/absent.pem", "cannot read"),
                                     (1, "router.worker_tls_key", d + "/empty.key", "the file is empty"),
                                     (2, "router.worker_tls_ca", d + "/not.pem", "not a PEM file")):
            sets = tls("router")
            sets[i] = key + "=" + path
            code, lines, listened = refused(model, "router.worker_port=0", "router.worker_secret_file=" + SECRET_FILE,
                                            *sets)
            check(code == 1 and len(lines) == 1 and key + ": " + path + ": " + expect in lines[0] and not listened,
                  f"TLS: a bad {key} stops start-up, one line, never listening ({lines})")
    finally:
        if w and w.proc.poll() is None:
            w.proc.send_signal(signal.SIGTERM)
            w.proc.wait(timeout=30)
        srv.stop()


def peer_closed(s):
    """Whether the other end closed socket s (what it sent is read and dropped)."""
    s.setblocking(False)
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:  # (reset)
        return True


def half_tls_handshake(port):
    """A connection that sends the first half of a TLS ClientHello, then nothing."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    out = ssl.MemoryBIO()
    tls = ctx.wrap_bio(ssl.MemoryBIO(), out)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(hello[:len(hello) // 2])
    return s


def tls_without_certificate(port):
    """A whole TLS handshake with no client certificate (the gate refuses it)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            with ctx.wrap_socket(s) as t:
                t.recv(1)  # (TLS 1.3: the refusal comes as an alert on the first read)
        except (ssl.SSLError, OSError):
            pass


def test_bad_peer(tmp, model):
    """The issue's reproduction: one unauthenticated connection to
    router.worker_port sending \\x00\\x00\\x00\\x10 and 2 MB once dropped every
    worker (a BASP header sized CAF's buffer; a failed TLS handshake broke
    the healthy sessions). Now the gate closes it alone, and so a connection
    that sends nothing (at the handshake's deadline) and one that stops
    halfway through a TLS handshake, and (TLS) one without a certificate:
    the worker beside them keeps its link, its replica stays in rotation and
    serves, plain and over mutual TLS."""
    d = os.path.join(tmp, "tls-bad-peer")
    os.makedirs(d)
    tls = make_certificates(d)
    for mode, router_sets, worker_sets in (("plain", [], []), ("TLS", tls("router"), tls("worker"))):
        srv = server(model, "engine.threads=1", "server.admin_api=true", "router.worker_port=0",
                     "router.worker_secret_file=" + SECRET_FILE, "router.health_check_interval_s=0.2",
                     "router.health_check_timeout_s=2", *router_sets)
        w, peers = None, []
        try:
            join = re.search(r"workers join at ([0-9.]+:\d+)", "".join(srv.log)).group(1)
            port = int(join.rsplit(":", 1)[1])
            w = worker(join, model, *worker_sets)
            check(w.replicas == [1], f"{mode}: a worker joins ({w.line.strip()})")
            wait_for(f"{mode}: its replica is in rotation", lambda: [x["ready"] for x in replicas(srv)] == [True, True])
            log_before = len(srv.read_log())
            t0 = time.monotonic()
            repro = socket.create_connection(("127.0.0.1", port))
            peers.append(repro)
            try:
                repro.sendall(b"\x00\x00\x00\x10" + os.urandom(2 << 20))
            except OSError:
                pass  # (the gate closed it before the last byte)
            peers += [socket.create_connection(("127.0.0.1", port)), half_tls_handshake(port)]
            if mode == "TLS":
                tls_without_certificate(port)
            closed = wait_for(f"{mode}: the gate closes each bad connection", lambda: all(peer_closed(p) for p in peers),
                              15)
            check(closed and time.monotonic() - t0 < 10, f"{mode}: by the handshake's deadline "
                                                         f"({time.monotonic() - t0:.1f} s)")
            # Past BASP's connection timeout (3 s) too, in case the link stalled.
            time.sleep(max(0.0, 4.0 - (time.monotonic() - t0)))
            reps = replicas(srv)
            check(w.proc.poll() is None and len(reps) == 2 and all(x["ready"] and x["alive"] for x in reps) and
                  reps[1]["failed_checks"] == 0, f"{mode}: the worker runs, its replica stays in rotation ({reps})")
            admin(srv, 0, "drain")
            got = {chat(srv, f"bad peers {i}", 2)[0].getheader("x-troupe-replica") for i in range(3)}
            admin(srv, 0, "resume")
            check(got == {"1"}, f"{mode}: the worker's replica serves ({sorted(got)})")
            log = "".join(srv.read_log()[log_before:])
            check("scheduler stopped" not in log and "out of rotation" not in log and "refused a worker" not in log,
                  f"{mode}: the router node lost no replica ({log.strip()[-400:]})")
            w.proc.send_signal(signal.SIGTERM)
            out = w.proc.communicate(timeout=30)[0]
            check(w.proc.returncode == 0 and "dropped" not in out, f"{mode}: the worker's link never dropped ({out.strip()})")
        finally:
            for p in peers:
                p.close()
            if w and w.proc.poll() is None:
                w.proc.kill()
            srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-fleet-test-")
    global SECRET_FILE
    try:
        model = make_tiny(tmp)
        SECRET_FILE = write_secret(os.path.join(tmp, "fleet.secret"), "the fleet's secret: s3cr3t-0123456789")
        test_admin_off(model)
        test_weighted(model)
        test_models(tmp, model)
        test_crash(model)
        test_hang(model)
        test_autoscaler(model)
        test_remote(model)
        test_tls(tmp, model)
        test_bad_peer(tmp, model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
