#!/usr/bin/env python3
"""The chat page in headless Chromium (playwright-core from npm, Debian's
chromium): a server with a tenants file and the zero executor slowed to
5 ms a step, so that a long answer can be stopped mid-way; a reasoning
template (the answer starts inside <think>, as DeepSeek-R1's) and the
hermes tool-call format, so that the page shows reasoning and a tool call."""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, server, sha256, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])

KEY = "sk-test-browser-6b1d0e"


def main():
    node = shutil.which("node")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not node or not os.path.exists(chromium) or not os.path.isdir(os.path.join(HERE, "node_modules", "playwright-core")):
        print("skip: needs node, chromium and tests/browser/node_modules (scripts/bootstrap.sh installs them)")
        return 77
    tmp = tempfile.mkdtemp(prefix="troupe-browser-test-")
    try:
        model = make_tiny(tmp)
        tenants = os.path.join(tmp, "tenants.toml")
        with open(tenants, "w") as f:
            f.write(f'[tenants.browser]\napi_key_sha256 = "{sha256(KEY)}"\n')
        # A reasoning model's template, as DeepSeek-R1's: the answer starts inside <think>.
        template = os.path.join(tmp, "reasoning.jinja")
        with open(template, "w") as f:
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ (m.content or '').split('</think>')[-1] }}{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
        srv = server(model, "server.tenants=" + tenants, "engine.executor=zero", "engine.zero_step_us=5000",
                     "model.tool_parser=hermes", f"model.chat_template={template}")
        try:
            shot = os.environ.get("CHAT_PAGE_SCREENSHOT", "")
            out = subprocess.run([node, os.path.join(HERE, "chat_page_test.mjs"), f"http://127.0.0.1:{srv.port}/", KEY]
                                 + ([shot] if shot else []), capture_output=True, text=True, timeout=300)
            for line in out.stdout.splitlines():
                check(line.startswith("ok"), "chat_page_test.mjs: " + line[6:])
            check(out.returncode == 0, "the browser test passes" + (": " + out.stderr[-800:] if out.returncode else ""))
        finally:
            rc = srv.stop()
            check(rc == 0, f"the server stops with exit 0 (got {rc})")
            check(KEY not in "".join(srv.log), "the server's log holds no API key")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
