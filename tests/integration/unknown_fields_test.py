#!/usr/bin/env python3
"""server.unknown_fields: a request field in nobody's table (docs/api.md).
By default it is accepted and shown: the answer is 200 with a
troupe-unknown-fields header naming it, troupe_unknown_fields_total counts
it by API and name, and the log warns once per name. With "refuse" it is a
400 in the API's own error shape naming it. Chat completions, the Messages
API and the Responses API; a name with characters a header cannot carry is
shown escaped; a client inventing names grows neither the log nor the
series past a bound."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, request, server, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])

CALLS = [("openai", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
         ("anthropic", "/v1/messages", {"model": "tiny", "max_tokens": 2,
                                        "messages": [{"role": "user", "content": "Hi"}]}),
         ("responses", "/v1/responses", {"model": "tiny", "input": "Hi", "max_output_tokens": 2})]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny(tmp)
        srv = server(model)
        try:
            for api, path, body in CALLS:
                for _ in range(2):
                    r, text = request(srv.port, "POST", path, dict(body, frobnicate={"a": [1]}, zz_new=1))
                    check(r.status == 200 and r.getheader("troupe-unknown-fields") == "frobnicate, zz_new",
                          f"{api}: accepted, the header names the fields ({r.status} "
                          f"{r.getheader('troupe-unknown-fields')} {text[:100]})")
                check(srv.metric("troupe_unknown_fields_total", f'api="{api}",field="frobnicate"') == 2,
                      f"{api}: counted by API and name")
                r, text = request(srv.port, "POST", path, dict(body, frob=None))
                check(r.status == 200, f"{api}: a field with a null value is accepted too ({r.status})")
            r, _ = request(srv.port, "POST", "/v1/chat/completions", dict(CALLS[0][2], **{"a\r\nx-evil: 1": 1}))
            check(r.status == 200 and r.getheader("troupe-unknown-fields") == "a??x-evil??1" and
                  r.getheader("x-evil") is None, "a name a header cannot carry is shown escaped, not as a header")
            r, text = request(srv.port, "POST", "/v1/chat/completions",
                              '{"messages":[{"role":"user","content":"a"}],"frob":nul}')
            check(r.status == 400 and json.loads(text)["error"]["code"] == "invalid_json",
                  "an unknown field is still JSON: broken JSON is a 400")
            many = dict(CALLS[0][2], **{f"f{i}": 1 for i in range(300)})
            r, _ = request(srv.port, "POST", "/v1/chat/completions", many)
            check(r.status == 200, "300 invented names: accepted")
            text = request(srv.port, "GET", "/metrics")[1]
            series = [line for line in text.splitlines() if line.startswith("troupe_unknown_fields_total{")]
            check(len(series) <= 258 and any('field="(other)"' in s for s in series),
                  f"...their series are bounded, the rest counted as (other) ({len(series)} series)")
        finally:
            srv.stop()
        log = "".join(srv.log)
        check(log.count("the field 'frobnicate'") == 3,
              "the log warns once per API and name (3 APIs; each sent it twice)")
        check(log.count("which troupe does not know") <= 256 + 1, "the warnings are bounded")

        strict = server(model, "server.unknown_fields=refuse")
        try:
            for api, path, body in CALLS:
                r, text = request(strict.port, "POST", path, dict(body, frobnicate=1))
                e = json.loads(text)
                err = e.get("error", {})
                shaped = e.get("type") == "error" if api == "anthropic" else err.get("param") == "frobnicate"
                check(r.status == 400 and "frobnicate" in err.get("message", "") and shaped,
                      f"{api} with unknown_fields = refuse: 400 in its own shape, naming it ({r.status} {text[:140]})")
                r, _ = request(strict.port, "POST", path, body)
                check(r.status == 200 and r.getheader("troupe-unknown-fields") is None,
                      f"{api}: a request without one is answered, without the header")
        finally:
            strict.stop()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
