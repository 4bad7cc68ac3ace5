#!/usr/bin/env python3
"""server.metrics_port on the real server: /metrics (whose series name
tenants) on a listener of its own, the API's port answering it 404; the
default, /metrics on the API's port; bad values stop start-up with one line.
The KV cache's type in /metrics (block bytes, capacity), and weights
quantized on load serving."""

import json
import os
import re
import socket
import subprocess
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import CONFIG, KEYS, check, make_tiny, request, server, sha256, summary, use_troupe  # noqa: E402

TROUPE = use_troupe(sys.argv[1])

COMPLETION = {"prompt": "Hello", "max_tokens": 2}


def get(port, path, method="GET", body=None, headers=None):
    r, text = request(port, method, path, body, headers)
    return r.status, text


def metrics_port(srv):
    for line in srv.read_log():
        m = re.search(r"troupe: metrics at http://127\.0\.0\.1:(\d+)/metrics", line)
        if m:
            return int(m.group(1))
    return None


def test_default(model):
    srv = server(model)
    try:
        status, text = get(srv.port, "/metrics")
        check(status == 200 and "troupe_" in text, f"default: /metrics on the main port (got {status})")
        check(metrics_port(srv) is None, "default: no metrics listener is printed")
    finally:
        srv.stop()


def test_own_port(model, tmp):
    tenants = os.path.join(tmp, "tenants.toml")
    with open(tenants, "w") as f:
        f.write(f'[tenants.omega]\napi_key_sha256 = "{sha256(KEYS["omega"])}"\n')
    srv = server(model, "server.metrics_port=0", "server.tenants=" + tenants)
    try:
        port = metrics_port(srv)
        check(port is not None and port != srv.port, f"metrics_port=0: a port of its own is printed (got {port})")
        if port is None:
            return
        key = {"Authorization": "Bearer " + KEYS["omega"]}
        status, text = get(srv.port, "/v1/completions", "POST", COMPLETION, key)
        check(status == 200 and json.loads(text)["usage"]["completion_tokens"] >= 1,
              f"metrics_port: /v1/completions works on the main port (got {status})")
        status, text = get(port, "/metrics")
        check(status == 200 and "troupe_" in text and 'tenant="omega"' in text,
              f"metrics_port: /metrics on the metrics port, with the tenant's series (got {status})")
        status, text = get(srv.port, "/metrics")
        error = json.loads(text).get("error", {}) if text.startswith("{") else {}
        check(status == 404 and error.get("code") == "not_found" and "omega" not in text,
              f"metrics_port: the main port answers /metrics 404 not_found (got {status} {text[:120]})")
        status, _ = get(srv.port, "/metrics", "HEAD")
        check(status == 404, f"metrics_port: HEAD /metrics on the main port is 404 too (got {status})")
        status, _ = get(port, "/health/live")
        check(status == 200, f"metrics_port: /health/live on the metrics port (got {status})")
        status, _ = get(port, "/health/ready")
        check(status == 200, f"metrics_port: /health/ready on the metrics port (got {status})")
        status, text = get(port, "/v1/completions", "POST", COMPLETION, key)
        check(status == 404 and "not_found" in text, f"metrics_port: the API is not on the metrics port (got {status})")
        status, _ = get(port, "/v1/models", headers=key)
        check(status == 404, f"metrics_port: /v1/models is not on the metrics port (got {status})")
    finally:
        rc = srv.stop()
        check(rc == 0, f"metrics_port: the server stops on SIGTERM with exit 0 (got {rc})")


def serve_error(model, *sets):
    args = [TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", model]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return out.returncode, out.stderr.strip().splitlines()


def test_bad_values(model):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        for sets, key in [
            (["server.metrics_port=65536"], "server.metrics_port"),
            (["server.metrics_port=-2"], "server.metrics_port"),
            (["server.metrics_port=0", "server.metrics_host=internal"], "server.metrics_host"),
            (["server.metrics_host=127.0.0.1"], "server.metrics_host"),  # set, but no metrics_port
            ([f"server.metrics_port={busy.getsockname()[1]}"], "server.metrics_port"),  # taken
        ]:
            rc, lines = serve_error(model, *sets)
            check(rc == 1 and len(lines) == 1 and key in lines[0],
                  f"{' '.join(sets)}: start-up stops with one line naming {key}: {lines}")
    finally:
        busy.close()


def completes(srv, what):
    """A greedy completion of 8 tokens runs on srv."""
    status, body = get(srv.port, "/v1/completions", "POST",
                       {"prompt": "Hello", "max_tokens": 8, "temperature": 0, "ignore_eos": True})
    check(status == 200 and json.loads(body)["usage"]["completion_tokens"] == 8, what)


def test_kv_cache_dtype(model):
    # The tiny model: 2 layers of 2 KV heads of 32, blocks of 16 tokens; 1 MiB of KV.
    for kv, block_bytes in [("f32", 2 * 2 * 2 * 32 * 4 * 16), ("q8_0", 2 * 2 * 2 * 34 * 16)]:
        srv = server(model, "scheduler.kv_cache_dtype=" + kv, "scheduler.kv_memory=1MiB")
        try:
            completes(srv, f"kv_cache_dtype {kv}: a completion runs over it")
            _, text = get(srv.port, "/metrics")
            got = re.search(r'troupe_kv_cache_block_bytes\{[^}]*kv_cache_dtype="' + kv + r'"[^}]*\} (\S+)', text)
            cap = re.search(r"troupe_kv_cache_capacity_tokens\{[^}]*\} (\S+)", text)
            blocks = (1 << 20) // block_bytes
            check(got is not None and float(got.group(1)) == block_bytes,
                  f"kv_cache_dtype {kv}: /metrics kv_cache_block_bytes is {block_bytes}")
            check(cap is not None and float(cap.group(1)) == blocks * 16,
                  f"kv_cache_dtype {kv}: /metrics kv_cache_capacity_tokens is {blocks * 16}")
        finally:
            srv.stop()
    for sets, key in [(["scheduler.kv_cache_dtype=q4"], "scheduler.kv_cache_dtype"),
                      (["engine.weight_dtype=q2_k"], "engine.weight_dtype")]:
        rc, lines = serve_error(model, *sets)
        check(rc != 0 and len(lines) == 1 and key in lines[0], f"{sets[0]}: one line naming {key}: {lines}")
    # Quantized on load: the tiny model's rows are not whole 256-blocks, so
    # q4_k takes Q8_0 for them, as llama-quantize would.
    for wd in ["q8_0", "q4_k"]:
        srv = server(model, "engine.weight_dtype=" + wd)
        try:
            completes(srv, f"weight_dtype {wd}: the model quantized at start-up serves")
        finally:
            srv.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-metrics-test-")
    try:
        model = make_tiny(tmp)
        test_default(model)
        test_own_port(model, tmp)
        test_bad_values(model)
        test_kv_cache_dtype(model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
