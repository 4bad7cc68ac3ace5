#!/usr/bin/env python3
"""Records the tools Claude Code (tests/agents, npm) offers a model: runs
`claude -p` against a loopback listener that notes each request and answers
400, and writes a Messages request body holding every tool it sent (the
union of its requests' tools, by name) to OUT, for `troupe bench-grammar
--tools OUT`. Claude Code's schemas are its own, so they are recorded from
the installed client, not kept in the repository. Exits 1 with one line
when Claude Code is not installed (make test installs it).

usage: record_agent_tools.py OUT"""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLAUDE = os.path.join(ROOT, "tests", "agents", "node_modules", ".bin", "claude")


def record_claude_requests():
    """The request bodies (parsed) Claude Code's `claude -p` sends a server
    that answers each with a 400; [] when it is not installed."""
    if not os.path.exists(CLAUDE):
        return []
    bodies = []

    class handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                bodies.append(json.loads(body))
            except ValueError:
                pass
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type":"error","error":{"type":"invalid_request_error","message":"recorded"}}')

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{httpd.server_address[1]}",
                   ANTHROPIC_API_KEY="sk-record", DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        subprocess.run([CLAUDE, "-p", "What files are here?", "--output-format", "json", "--max-turns", "1"],
                       env=env, cwd=home, capture_output=True, timeout=120)
    httpd.shutdown()
    return bodies


def main(out):
    if not os.path.exists(CLAUDE):
        print("record_agent_tools: Claude Code is not installed (tests/agents; make test installs it)")
        return 1
    tools = {}
    for body in record_claude_requests():
        for t in body.get("tools", []):
            tools.setdefault(t.get("name"), t)
    if not tools:
        print("record_agent_tools: Claude Code sent no tools")
        return 1
    with open(out, "w") as f:
        json.dump({"model": "any", "max_tokens": 1024, "messages": [{"role": "user", "content": "Hi"}],
                   "tools": list(tools.values())}, f)
    print(f"record_agent_tools: {len(tools)} tools of Claude Code written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
