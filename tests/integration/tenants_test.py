#!/usr/bin/env python3
"""Tenants, quotas, the response cache and WebSocket streaming, on the real
server: auth (401), models (403), token limits (400), rate limits (429 with
Retry-After and x-ratelimit-*), hot reload, per-tenant metrics and usage,
WebSocket requests (Node's client), a slow reader, a 1,000-socket soak, and
a grep of the logs for the keys. The keys are in api_keys.txt (CI greps the
whole run's logs for them too)."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(SOURCE, "..", "support"))
from troupe_harness import (KEYS, NODE, check, make_tiny, poll, server, sha256, sse_events, summary,  # noqa: E402
                            use_troupe)

use_troupe(sys.argv[1])


def tenants_file(extra=""):
    return f"""
[tiers.gold]
priority = 5
vtc_weight = 2.0

[tenants.alpha]
api_key_sha256 = "{sha256(KEYS['alpha'])}"
requests_per_minute = 4
max_input_tokens = 40
max_output_tokens = 8
models = ["tiny"]

[tenants.beta]
api_key_sha256 = ["{sha256('an-old-key')}", "{sha256(KEYS['beta'])}"]
max_concurrent = 1

[tenants.gamma]
api_key_sha256 = "{sha256(KEYS['gamma'])}"
tokens_per_minute = 60
tier = "gold"

[tenants.delta]
api_key_sha256 = "{sha256(KEYS['delta'])}"
response_cache = true

[tenants.eps]
api_key_sha256 = "{sha256(KEYS['eps'])}"
response_cache = true

[tenants.omega]
api_key_sha256 = "{sha256(KEYS['omega'])}"
""" + extra


def auth(name):
    return {"Authorization": "Bearer " + KEYS[name]}


def chat(srv, name, body, headers=None):
    h = dict(auth(name)) if name else {}
    h.update(headers or {})
    r, text = srv.request("POST", "/v1/chat/completions", body, h)
    return r, (json.loads(text) if text.startswith("{") else text)


def status_becomes(srv, tenant, status):
    """Whether the tenant's chat request soon gets `status`."""
    return bool(poll(lambda: chat(srv, tenant, HELLO)[0].status == status, 10))


HELLO = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 12, "temperature": 0}
ALPHA = dict(HELLO, max_tokens=6)  # within alpha's max_output_tokens


def test_auth(srv):
    r, body = chat(srv, None, HELLO)
    check(r.status == 401 and body["error"]["code"] == "missing_api_key" and r.getheader("WWW-Authenticate") == "Bearer",
          f"no key: 401 missing_api_key ({r.status})")
    r, body = chat(srv, None, HELLO, {"Authorization": "Bearer sk-not-a-key"})
    check(r.status == 401 and body["error"]["code"] == "invalid_api_key" and body["error"]["type"] == "authentication_error",
          f"an unknown key: 401 invalid_api_key ({r.status})")
    r, body = chat(srv, None, HELLO, {"Authorization": "Basic " + base64.b64encode(b"a:b").decode()})
    check(r.status == 401, f"another auth scheme: 401 ({r.status})")
    r, body = chat(srv, None, HELLO, {"x-api-key": KEYS["omega"]})
    check(r.status == 200, f"the key in x-api-key works ({r.status})")
    r, _ = chat(srv, "beta", HELLO)
    check(r.status == 200, "the second key of a list works (rotation)")
    for path in ("/v1/models", "/v1/usage"):
        r, _ = srv.request("GET", path)
        check(r.status == 401, f"GET {path} without a key: 401 ({r.status})")
    for path in ("/health/live", "/health/ready", "/metrics", "/"):
        r, _ = srv.request("GET", path)
        check(r.status == 200, f"GET {path} needs no key ({r.status})")
    r, text = srv.request("GET", "/v1/models", headers=auth("alpha"))
    ids = [m["id"] for m in json.loads(text)["data"]]
    check(ids == ["tiny"], f"/v1/models lists the tenant's models: {ids}")


def test_limits(srv):
    # alpha: models ["tiny"] (the capability rule "auto" is a model it may not use).
    r, body = chat(srv, "alpha", dict(HELLO, model="auto"))
    check(r.status == 403 and body["error"]["code"] == "model_not_allowed" and body["error"]["param"] == "model",
          f"a model outside the tenant's list: 403 ({r.status} {body})")
    r, body = chat(srv, "alpha", dict(ALPHA, model="nope"))
    check(r.status == 400 and body["error"]["code"] == "model_not_found", "an unknown model is still 400")
    r, body = chat(srv, "alpha", dict(ALPHA, max_tokens=9))
    check(r.status == 400 and body["error"]["code"] == "output_tokens_exceeded" and body["error"]["param"] == "max_tokens",
          f"max_tokens over max_output_tokens: 400 ({r.status} {body})")
    long = {"messages": [{"role": "user", "content": "word " * 60}], "max_tokens": 4}
    r, body = chat(srv, "alpha", long)
    check(r.status == 400 and body["error"]["code"] == "input_tokens_exceeded",
          f"a prompt over max_input_tokens: 400 ({r.status} {body})")
    # max_tokens absent: the tenant's max_output_tokens.
    r, body = chat(srv, "alpha", {"messages": [{"role": "user", "content": "Go"}], "ignore_eos": True, "temperature": 0})
    check(r.status == 200 and body["usage"]["completion_tokens"] == 8,
          f"without max_tokens, max_output_tokens bounds the answer ({body.get('usage')})")
    remaining = r.getheader("x-ratelimit-remaining-requests")
    check(r.getheader("x-ratelimit-limit-requests") == "4" and remaining is not None and r.getheader("x-ratelimit-reset-requests"),
          f"x-ratelimit-*-requests headers on a 200 (remaining {remaining})")
    # requests_per_minute = 4: the 400 above after admission (the prompt) did not use one; this one
    # and the next are the 3rd and 4th; then 429.
    for _ in range(3):
        r, body = chat(srv, "alpha", ALPHA)
        if r.status == 429:
            break
    check(r.status == 429 and body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "rate_limit_exceeded",
          f"over requests_per_minute: 429 ({r.status})")
    retry = r.getheader("Retry-After")
    check(retry is not None and 1 <= int(retry) <= 15, f"the 429 has Retry-After ({retry})")
    check(r.getheader("x-ratelimit-remaining-requests") == "0" and r.getheader("x-ratelimit-limit-requests") == "4",
          "the 429 has x-ratelimit-remaining-requests: 0")

    # gamma: tokens_per_minute = 60; one answer of 40 tokens plus its prompt spends them.
    r, body = chat(srv, "gamma", {"messages": [{"role": "user", "content": "Go"}], "max_tokens": 40, "ignore_eos": True})
    check(r.status == 200 and r.getheader("x-ratelimit-limit-tokens") == "60", "gamma's first request runs")
    r, body = chat(srv, "gamma", HELLO)
    check(r.status == 429 and "tokens per minute" in body["error"]["message"] and int(r.getheader("Retry-After")) >= 1,
          f"over tokens_per_minute (prompt and output counted): 429 ({r.status} {body})")

    # beta: max_concurrent = 1, with a stream held open.
    c = srv.conn()
    c.request("POST", "/v1/chat/completions",
              json.dumps({"messages": [{"role": "user", "content": "Long"}], "max_tokens": 1500, "ignore_eos": True,
                          "stream": True}), auth("beta"))
    first = c.getresponse()
    first.read(64)
    r, body = chat(srv, "beta", HELLO)
    check(r.status == 429 and body["error"]["code"] == "concurrency_limit_exceeded",
          f"a second request over max_concurrent: 429 ({r.status})")
    c.close()
    check(status_becomes(srv, "beta", 200), "once the stream is closed, the tenant's place is free again")


def test_usage_and_metrics(srv):
    r, text = srv.request("GET", "/v1/usage", headers=auth("alpha"))
    u = json.loads(text)
    check(r.status == 200 and u["tenant"] == "alpha" and u["requests"] >= 3 and u["prompt_tokens"] > 0 and
          u["completion_tokens"] >= 8, f"/v1/usage shows the caller's tokens and requests: {text}")
    check(u["rejections"].get("requests_per_minute", 0) >= 1 and u["rejections"].get("model_not_allowed") == 1 and
          u["rejections"].get("max_output_tokens") == 1 and u["rejections"].get("max_input_tokens") == 1,
          f"rejections by reason: {u['rejections']}")
    r, text = srv.request("GET", "/admin/tenants")
    names = [t["tenant"] for t in json.loads(text)["data"]]
    check(r.status == 200 and names == sorted(KEYS.keys() - {"zeta"}), f"/admin/tenants lists every tenant: {names}")
    check(srv.metric("troupe_tenant_rejections_total", 'reason="requests_per_minute",tenant="alpha"') >= 1,
          "troupe_tenant_rejections_total{tenant,reason}")
    check(srv.metric("troupe_tenant_rejections_total", 'reason="invalid_api_key"') >= 1, "unknown keys are counted")
    check(srv.metric("troupe_time_to_first_token_seconds_count", 'tenant="gamma"') >= 1 and
          srv.metric("troupe_generation_tokens_total", 'tenant="alpha"') >= 8,
          "request metrics carry the tenant label")
    _, text = srv.request("GET", "/metrics")
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    check(out.returncode == 0, "promtool check metrics passes with tenant series: " + out.stdout + out.stderr)


def test_cache(srv):
    hits = lambda t: srv.metric("troupe_response_cache_hits_total", f'tenant="{t}"')  # noqa: E731
    misses = lambda t: srv.metric("troupe_response_cache_misses_total", f'tenant="{t}"')  # noqa: E731
    req = dict(HELLO, messages=[{"role": "user", "content": "A cached question"}])
    r1, b1 = chat(srv, "delta", req)
    r2, b2 = chat(srv, "delta", req)
    check(r1.status == r2.status == 200 and b1["choices"][0]["message"]["content"] == b2["choices"][0]["message"]["content"]
          and b1["usage"] == b2["usage"], "a repeat gets the same answer")
    check(misses("delta") == 1 and hits("delta") == 1, f"one miss, then one hit ({misses('delta')}, {hits('delta')})")
    r, text = srv.request("POST", "/v1/chat/completions", dict(req, stream=True), auth("delta"))
    pieces = [json.loads(e)["choices"][0]["delta"].get("content", "") for e in sse_events(text)[:-1]]
    check(hits("delta") == 2 and "".join(pieces) == b1["choices"][0]["message"]["content"] and len(pieces) > 3,
          f"a hit streams the stored answer, piece by piece ({len(pieces)} events)")
    chat(srv, "eps", req)
    check(misses("eps") == 1 and hits("eps") == 0, "another tenant's same request is a miss: never shared")
    chat(srv, "delta", dict(req, temperature=0.8))
    chat(srv, "delta", dict(req, temperature=0.8))
    check(hits("delta") == 2 and misses("delta") == 1, "a sampled request without a seed is not cached")
    chat(srv, "delta", dict(req, temperature=0.8, seed=11))
    r, b = chat(srv, "delta", dict(req, temperature=0.8, seed=11))
    check(hits("delta") == 3, "a fixed seed makes it cacheable")
    chat(srv, "omega", req)
    check(hits("omega") == 0 and misses("omega") == 0, "a tenant that did not opt in is never cached")


def test_prefix_namespaces(srv):
    """KV prefix blocks are shared inside a tenant, never across tenants
    (each has its own namespace by default)."""
    hits = lambda: srv.metric("troupe_prefix_cache_hits_total")  # noqa: E731
    system = "You are a careful assistant who answers in full sentences. " * 12
    req = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}], "max_tokens": 2}
    chat(srv, "omega", req)
    before = hits()
    chat(srv, "eps", dict(req, temperature=0.9))
    across = hits() - before
    chat(srv, "omega", dict(req, messages=[req["messages"][0], {"role": "user", "content": "Hello"}]))
    within = hits() - before - across
    check(across == 0 and within > 0, f"prefix blocks: {within} hits within a tenant, {across} across tenants")


def test_reload(srv, path):
    keep = srv.conn()  # a keep-alive connection across the reloads
    keep.request("GET", "/health/live")
    keep.getresponse().read()
    r, _ = chat(srv, "zeta", HELLO)
    check(r.status == 401, "zeta's key is unknown before the reload")
    with open(path, "a") as f:
        f.write(f'\n[tenants.zeta]\napi_key_sha256 = "{sha256(KEYS["zeta"])}"\n')
    check(status_becomes(srv, "zeta", 200), "a changed file is picked up without a restart")
    good = open(path).read()
    with open(path, "w") as f:
        f.write(good.replace("requests_per_minute = 4", "requests_per_minute = -4"))
    line = poll(lambda: next((l for l in srv.read_log() if "not reloaded" in l), ""), 10)
    check("tenants.alpha.requests_per_minute: must be >= 0, got -4" in line and "previous tenants stay" in line,
          f"an invalid file is logged with its key and reason: {line.strip()}")
    r, _ = chat(srv, "zeta", HELLO)
    check(r.status == 200, "the previous tenants stay in force")
    # SIGHUP, with zeta removed again.
    with open(path, "w") as f:
        f.write(tenants_file())
    srv.proc.send_signal(signal.SIGHUP)
    ok = status_becomes(srv, "zeta", 401)
    check(ok, "SIGHUP (or the change) reloads: a removed tenant's key is refused")
    check(any("reloaded" in l and "SIGHUP" in l for l in srv.read_log()) or ok, "the reload is logged")
    keep.request("GET", "/health/live")
    check(keep.getresponse().status == 200, "a connection open across the reloads still works")
    keep.close()


def test_ws_upgrade(srv):
    def upgrade(headers):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        req = ("GET /v1/chat/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + headers + "\r\n")
        s.sendall(req.encode())
        head = s.recv(4096).decode(errors="replace")
        s.close()
        return head
    check(upgrade("Authorization: Bearer sk-wrong\r\n").startswith("HTTP/1.1 401"), "an upgrade with a wrong key: 401")
    check(upgrade(f"Authorization: Bearer {KEYS['omega']}\r\n").startswith("HTTP/1.1 101"),
          "an upgrade with a good key: 101 Switching Protocols")
    r, text = srv.request("GET", "/v1/chat/stream", headers=auth("omega"))
    check(r.status == 426, f"a plain GET of the stream: 426 ({r.status})")


def reference(srv, tenant):
    r, body = chat(srv, tenant, HELLO)
    return json.dumps({"request": HELLO, "text": body["choices"][0]["message"]["content"],
                       "tokens": body["usage"]["completion_tokens"]})


def node(*args, timeout=600):
    out = subprocess.run([NODE, "--experimental-websocket", os.path.join(SOURCE, "ws_test.mjs"), *args],
                         capture_output=True, text=True, timeout=timeout)
    for line in out.stdout.splitlines():
        if line.startswith("ok"):
            print(line, flush=True)
        else:
            check(False, "ws_test.mjs: " + line)
    check(out.returncode == 0, f"ws_test.mjs {args[0]} passes" + (": " + out.stderr[-500:] if out.returncode else ""))


def test_slow_reader(model):
    """A client that stops reading: its request is cancelled past the socket's
    bound; meanwhile another client is served (the engine never waits)."""
    srv = server(model, "engine.executor=zero", "server.websocket_max_buffered=65536")
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        s.sendall(b"GET /v1/chat/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        check(head.startswith(b"HTTP/1.1 101"), "the slow reader's socket is upgraded")
        for i in range(48):  # masked text frames, one request each; never read
            payload = json.dumps({"id": i, "messages": [{"role": "user", "content": "Go"}], "max_tokens": 1900,
                                  "ignore_eos": True}).encode()
            mask = os.urandom(4)
            n = len(payload)  # (the shortest length encoding: Beast refuses others)
            frame = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0xFE]) + n.to_bytes(2, "big")
            frame += mask + bytes(b ^ mask[j % 4] for j, b in enumerate(payload))
            s.sendall(frame)
        # Meanwhile, another client's request finishes.
        t0 = time.time()
        r, body = srv.request("POST", "/v1/chat/completions",
                              {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64, "ignore_eos": True})
        check(r.status == 200 and json.loads(body)["usage"]["completion_tokens"] == 64,
              f"another client is served while the slow reader reads nothing ({time.time() - t0:.2f} s)")
        # The slow reader still reads nothing until the server has cancelled
        # one of its requests: its 48 streams (~13 MB of events) overflow the
        # kernel's socket buffers (a few MB), so the queue passes the limit
        # however fast the server runs. (Reading earlier raced the server:
        # under load, a reader that drains fast enough never falls behind.)
        poll(lambda: srv.metric("troupe_request_success_total", 'finished_reason="abort"') >= 1, 120, 0.1)
        # Now read everything: the slow reader's requests ended with slow_reader errors.
        s.settimeout(2)
        data = b""
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                chunk = s.recv(1 << 20)
            except socket.timeout:
                if b'"slow_reader"' in data:
                    break
                continue
            if not chunk:
                break
            data += chunk
        s.close()
        n = data.count(b'"code":"slow_reader"')
        check(n >= 1, f"past websocket_max_buffered the request is cancelled with a slow_reader error event ({n} of 48)")
        check(srv.metric("troupe_request_success_total", 'finished_reason="abort"') >= n,
              "the cancelled requests were aborted in the engine (finish reason abort)")
    finally:
        rc = srv.stop()
        check(rc == 0, f"the slow-reader server stops with exit 0 (got {rc})")


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-tenants-test-")
    logs = []
    try:
        model = make_tiny(tmp)
        path = os.path.join(tmp, "tenants.toml")
        with open(path, "w") as f:
            f.write(tenants_file())
        srv = server(model, "server.tenants=" + path, "server.tenants_poll_s=0.1", "server.admin_api=true",
                     "engine.threads=2", "scheduler.policy=vtc",
                     'router.capability_rules=[{model="auto", small="tiny", large="tiny", max_prompt_tokens=8, max_tokens=8}]')
        try:
            test_auth(srv)
            test_limits(srv)
            test_usage_and_metrics(srv)
            test_cache(srv)
            test_prefix_namespaces(srv)
            test_reload(srv, path)
            test_ws_upgrade(srv)
            if NODE:
                ref = reference(srv, "omega")
                node("basic", str(srv.port), KEYS["omega"], KEYS["beta"], ref)
                node("soak", str(srv.port), KEYS["omega"], "1000", ref)
            else:
                print("skip  WebSocket client tests: no node on this machine")
        finally:
            rc = srv.stop()
            check(rc == 0, f"the server stops on SIGTERM with exit 0 (got {rc})")
            logs += srv.log
        test_slow_reader(model)
        text = "".join(logs)
        leaked = [name for name, k in KEYS.items() if k in text]
        check(not leaked, f"the server's log ({len(text)} bytes) holds no API key (leaked: {leaked})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
