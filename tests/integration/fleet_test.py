#!/usr/bin/env python3
"""Integration tests of the fleet: health checks, failover and recovery of
replicas in a real `troupe serve` on loopback, driven by real HTTP clients
and the admin API's fault injection (a replica that hangs, one that crashes)."""

import concurrent.futures
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_test import TROUPE, check, failures, server, sse_events  # noqa: E402


def replicas(srv):
    r, text = srv.request("GET", "/admin/replicas")
    return json.loads(text)["data"] if r.status == 200 else None


def admin(srv, replica, action):
    r, text = srv.request("POST", f"/admin/replicas/{replica}/{action}")
    check(r.status == 200, f"admin: replica {replica} {action} ({r.status}: {text[:80]})")


def wait_for(what, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    check(False, f"{what} (waited {timeout} s)")
    return False


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
            # (A hung replica sends no load reports: they are in flight to it.)
            wait_for("B and C are routed to the hung replica", lambda: replicas(srv)[1]["in_flight"] >= 2, 10)
            admin(srv, 0, "resume")
            admin(srv, 1, "crash")
            rb, tb = b.result(timeout=60)
            rc, tc = c.result(timeout=60)
        body = json.loads(tb) if rb.status == 200 else {}
        check(rb.status == 200 and body["usage"]["completion_tokens"] == 6,
              f"B (not streamed yet) is retried on replica 0 and completes ({rb.status}: {tb[:100]})")
        check(rc.status == 200 and finished_normally(sse_events(tc)),
              f"C (streaming, no token yet) is retried and streams to its end ({rc.status}: {tc[-120:]})")
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
            wait_for("E is routed to the hung replica", lambda: replicas(srv)[1]["in_flight"] >= 1, 10)
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


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-fleet-test-")
    try:
        model = os.path.join(tmp, "tiny")
        subprocess.run([TROUPE, "make-model", "--preset", "tiny", "--out", model], check=True,
                       stdout=subprocess.DEVNULL)
        test_admin_off(model)
        test_crash(model)
        test_hang(model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
