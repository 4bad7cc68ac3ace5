#!/usr/bin/env python3
"""Integration tests of remote workers: `troupe worker --join` processes
serving a `troupe serve` router node on loopback through the workers' gate
(the fleet's secret, mutual TLS), a worker that rejoins after its link drops,
configurations refused before any port opens, and strangers on the worker
port (the issue's bytes, silence, half a TLS handshake) that close only
their own connection."""

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
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import (CONFIG, check, make_tiny, server, summary, use_troupe, wait_for)  # noqa: E402
from fleet_support import admin, chat, error_event, open_stream, queued, replicas  # noqa: E402

TROUPE = use_troupe(sys.argv[1])
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
        write_secret(os.path.join(d, "garbled.key"), "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----")
        for i, key, path, expect in ((0, "router.worker_tls_cert", d + "/absent.pem", "cannot read"),
                                     (1, "router.worker_tls_key", d + "/empty.key", "the file is empty"),
                                     (2, "router.worker_tls_ca", d + "/not.pem", "not a PEM file"),
                                     (1, "router.worker_tls_key", d + "/garbled.key", "")):  # OpenSSL's words
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
    tmp = tempfile.mkdtemp(prefix="troupe-fleet-workers-test-")
    global SECRET_FILE
    try:
        model = make_tiny(tmp)
        SECRET_FILE = write_secret(os.path.join(tmp, "fleet.secret"), "the fleet's secret: s3cr3t-0123456789")
        test_remote(model)
        test_tls(tmp, model)
        test_bad_peer(tmp, model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
