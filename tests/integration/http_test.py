#!/usr/bin/env python3
"""HTTP as the RFCs say, checked on the real `troupe serve` with raw sockets:
framing for HTTP/1.0 streams, Host, obsolete line folding, content codings,
header size; and the messages a client is told (ranges, shutdown)."""

import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import check, make_tiny, poll, server, sse_events, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])


def exchange(port, data, timeout=20):
    """Sends `data`, reads until the server closes; returns (bytes, closed)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    s.sendall(data)
    got, closed = b"", False
    try:
        while True:
            more = s.recv(65536)
            if not more:
                closed = True
                break
            got += more
    except OSError:
        pass
    s.close()
    return got, closed


def parse(raw):
    """(status, headers with lower-case names, body bytes) of one response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines[0].startswith("HTTP/") else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.setdefault(k.strip().lower(), v.strip())
    return status, headers, body


def post(path, body, version="1.1", extra=""):
    data = json.dumps(body)
    return (f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n{data}").encode()


def error_of(body):
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return {}


def refused(srv, data, status, code, what):
    raw, closed = exchange(srv.port, data)
    got, headers, body = parse(raw)
    e = error_of(body)
    good = got == status and e.get("code") == code and e.get("message") and \
        headers.get("content-type") == "application/json" and closed
    check(good, f"{what}: {status} {code}" + ("" if good else f" (got {raw[:300]!r})"))
    return headers, e


def test_http10_stream(srv):
    """An HTTP/1.0 client cannot read chunks: a stream's body is the events
    themselves, ended by the server closing the connection."""
    body = {"prompt": "The", "max_tokens": 8, "ignore_eos": True, "stream": True}
    for extra, what in (("", ""), ("Connection: keep-alive\r\n", " (even when it asked for keep-alive)")):
        raw, closed = exchange(srv.port, post("/v1/completions", body, "1.0", extra))
        status, headers, payload = parse(raw)
        text = payload.decode(errors="replace")
        events = sse_events(text)
        check(status == 200 and "transfer-encoding" not in headers and "content-length" not in headers and
              headers.get("connection", "").lower() == "close",
              f"HTTP/1.0 stream{what}: no Transfer-Encoding, no Content-Length, Connection: close "
              f"(got {raw[:raw.find(b'{') if b'{' in raw else 200]!r})")
        check(text.startswith("data: ") and text.endswith("data: [DONE]\n\n") and len(events) >= 2 and
              all(e == "[DONE]" or json.loads(e)["object"] == "text_completion" for e in events),
              f"HTTP/1.0 stream{what}: the body is the SSE events, unframed ({text[:80]!r})")
        check(closed, f"HTTP/1.0 stream{what}: the server closes the connection at its end")
    # HTTP/1.1 streams stay chunked and the connection stays open.
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(20)
    s.sendall(post("/v1/completions", body))
    got = b""
    while not got.endswith(b"0\r\n\r\n"):
        more = s.recv(65536)
        if not more:
            break
        got += more
    status, headers, _ = parse(got)
    s.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    again = s.recv(65536)
    s.close()
    check(status == 200 and headers.get("transfer-encoding") == "chunked" and again.startswith(b"HTTP/1.1 200"),
          "an HTTP/1.1 stream is chunked and its connection serves the next request")


def test_host(srv):
    refused(srv, b"GET /health/live HTTP/1.1\r\n\r\n", 400, "bad_request", "HTTP/1.1 without Host")
    refused(srv, b"GET /health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "bad_request",
            "HTTP/1.1 with two Host headers")
    raw, _ = exchange(srv.port, b"GET /health/live HTTP/1.0\r\n\r\n")
    check(parse(raw)[0] == 200, f"HTTP/1.0 without Host is served ({raw[:60]!r})")


def test_obs_fold(srv):
    for ws, name in ((b" ", "space"), (b"\t", "tab")):
        refused(srv, b"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n" + ws + b"two\r\n\r\n", 400,
                "bad_request", f"a folded header line (starting with a {name})")
    data = json.dumps({"prompt": "x", "max_tokens": 1}).encode()
    refused(srv, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type:\r\n application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data, 400, "bad_request",
            "a folded Content-Type on a completion")


def test_content_encoding(srv):
    body = {"prompt": "x", "max_tokens": 1}
    for coding in ("gzip", "br", "identity, gzip", "identity\r\nContent-Encoding: deflate"):
        headers, e = refused(srv, post("/v1/completions", body, extra=f"Content-Encoding: {coding}\r\n"), 415,
                             "unsupported_content_encoding", f"Content-Encoding: {coding!r}")
        check(headers.get("accept-encoding") == "identity", f"... the 415 says Accept-Encoding: identity")
    raw, _ = exchange(srv.port, post("/v1/completions", body, extra="Content-Encoding: identity\r\nConnection: close\r\n"))
    check(parse(raw)[0] == 200, f"Content-Encoding: identity is served ({raw[:60]!r})")


def test_header_size(srv):
    big = "a" * 10000
    refused(srv, f"GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n".encode(), 431,
            "request_header_fields_too_large", "a 10 KB header")
    many = "".join(f"X-H{i}: {'b' * 100}\r\n" for i in range(100))
    refused(srv, f"GET /health/live HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode(), 431,
            "request_header_fields_too_large", "a hundred 100-byte headers")
    raw, _ = exchange(srv.port, f"GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Ok: {'c' * 6000}\r\n\r\n".encode())
    check(parse(raw)[0] == 200, "headers under 8 KiB are served")


def test_ranges(srv):
    """Range errors state the range broken, both ends."""
    for body, param, want in (
            ({"prompt": "x", "max_tokens": 2147483648}, "max_tokens",
             "max_tokens must be between 1 and 2147483647, got 2147483648"),
            ({"prompt": [4294967295]}, "prompt", "prompt[0] must be between 0 and 2147483647, got 4294967295")):
        raw, _ = exchange(srv.port, post("/v1/completions", body, extra="Connection: close\r\n"))
        status, _, payload = parse(raw)
        e = error_of(payload)
        check(status == 400 and e.get("param") == param and e.get("message") == want,
              f"{json.dumps(body)}: 400 '{want}' (got {status} {e.get('message')!r})")
    raw, _ = exchange(srv.port, post("/v1/completions", {"prompt": [5, 1000000]}, extra="Connection: close\r\n"))
    status, _, payload = parse(raw)
    message = error_of(payload).get("message", "")
    m = re.search(r"prompt token 1000000 is outside the vocabulary: ids are between 0 and (\d+)$", message)
    check(status == 400 and m and int(m.group(1)) < 1000000,
          f"a token id outside the vocabulary is told the vocabulary's range (got {status} {message!r})")


def test_shutdown_cut(model):
    """A stream still running when server.drain_timeout_s runs out ends with
    an error event saying the server is shutting down (not a replica failure)."""
    srv = server(model, "server.drain_timeout_s=0.5", "engine.executor=zero", "engine.zero_step_us=5000")
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(30)
    # (No max_tokens: up to the context, some seconds of 5 ms steps.)
    s.sendall(post("/v1/completions", {"prompt": "The", "ignore_eos": True, "stream": True}))
    got = b""
    while got.count(b"data: ") < 3:
        more = s.recv(65536)
        if not more:
            break
        got += more
    srv.proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    # The signal is taken by the main thread's sigwait whenever the machine
    # runs it: wait until readiness says it was.
    poll(lambda: srv.request("GET", "/health/ready")[0].status == 503, 10, 0.01)
    raw, _ = exchange(srv.port, post("/v1/completions", {"prompt": "x", "max_tokens": 2}, extra="Connection: close\r\n"))
    status, _, payload = parse(raw)
    check(status == 503 and error_of(payload).get("code") == "server_shutdown",
          f"a request after SIGTERM: 503 server_shutdown (got {raw[:200]!r})")
    try:
        while True:
            more = s.recv(65536)
            if not more:
                break
            got += more
    except OSError:
        pass
    s.close()
    rc = srv.proc.wait(timeout=60)
    # Chunked: join the chunks' payloads.
    _, _, body = parse(got)
    text, rest = "", body
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16) if size else 0
        if n == 0:
            break
        text += rest[:n].decode(errors="replace")
        rest = rest[n + 2:]
    events = sse_events(text)
    last = json.loads(events[-2]) if len(events) >= 2 and events[-1] == "[DONE]" else {}
    e = last.get("error", {})
    check(e.get("code") == "server_shutdown" and "shutting down" in e.get("message", "") and
          e.get("type") == "service_unavailable",
          f"a stream cut by the drain timeout ends with a server_shutdown error event (got {events[-2:]})")
    check(time.time() - t0 < 20 and rc == 0, f"... and the server exits 0 after the drain timeout (rc {rc})")


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-http-test-")
    try:
        model = make_tiny(tmp)
        srv = server(model, "engine.executor=zero", "server.max_body_bytes=4096")
        try:
            test_http10_stream(srv)
            test_host(srv)
            test_obs_fold(srv)
            test_content_encoding(srv)
            test_header_size(srv)
            test_ranges(srv)
            r, _ = srv.request("GET", "/health/live")
            check(r.status == 200, "the server is alive after every refused request")
        finally:
            rc = srv.stop()
            check(rc == 0, f"the server stops on SIGTERM with exit 0 (got {rc})")
        test_shutdown_cut(model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
