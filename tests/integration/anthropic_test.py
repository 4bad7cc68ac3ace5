#!/usr/bin/env python3
"""Anthropic's Messages API (POST /v1/messages) through the official
@anthropic-ai/sdk npm client: messages.create and messages.stream (its
finalMessage() collects the event stream) on random weights, greedy so
that both give the same answer; a system prompt, stop_sequences, a tool
forced with tool_choice {"type": "any"} whose input validates against its
input_schema (python3-jsonschema), a conversation with tool_use and
tool_result blocks, thinking blocks from a reasoning template, x-api-key as
the tenant key, and errors in Anthropic's shape.

Exits 77 (SKIP) without tests/tools/node_modules (@anthropic-ai/sdk), node or
python3-jsonschema."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, need_npm, sdk, server, sha256, summary, use_troupe  # noqa: E402

need_npm("@anthropic-ai/sdk")
try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

use_troupe(sys.argv[1])
KEY = "sk-test-anthropic-41c7a2"
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                                             "unit": {"enum": ["c", "f"]}},
                            "required": ["city", "unit"]}}


def text_of(m):
    return "".join(b.get("text", "") for b in m.get("content", []) if b["type"] == "text")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny(tmp)
        tenants = os.path.join(tmp, "tenants.toml")
        with open(tenants, "w") as f:
            f.write(f'[tenants.claude]\napi_key_sha256 = "{sha256(KEY)}"\n')
        srv = server(model, "engine.threads=1", "model.tool_parser=hermes", "server.tenants=" + tenants)
        base = f"http://127.0.0.1:{srv.port}"
        try:
            hello = {"model": "tiny", "max_tokens": 24, "temperature": 0, "system": "Be brief.",
                     "messages": [{"role": "user", "content": "Hello"}]}
            forced = {"model": "tiny", "max_tokens": 100, "temperature": 0, "tools": [WEATHER],
                      "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "Weather in Paris?"}]}
            stop = dict(hello, stop_sequences=["\n1."], max_tokens=60)
            history = {"model": "tiny", "max_tokens": 8, "temperature": 0, "tools": [WEATHER], "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                                  {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                                                   "input": {"city": "Paris", "unit": "c"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "21 C"},
                                             {"type": "text", "text": "Thanks!"}]}]}
            ops = [{"op": "messages", "body": hello}, {"op": "messages_stream", "body": hello},
                   {"op": "messages", "body": forced}, {"op": "messages_stream", "body": forced},
                   {"op": "messages", "body": stop}, {"op": "messages", "body": history},
                   {"op": "messages", "body": {"model": "tiny", "messages": [{"role": "user", "content": "x"}]}},
                   {"op": "messages", "body": dict(hello, messages=[{"role": "user", "content": [
                       {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])}]
            r = sdk(base, ops, KEY)
            whole, streamed = r[0], r[1]
            check(whole.get("ok") and whole["type"] == "message" and whole["role"] == "assistant" and
                  whole["id"].startswith("msg_") and whole["stop_reason"] in ("end_turn", "max_tokens") and
                  whole["usage"]["output_tokens"] > 0 and whole["usage"]["input_tokens"] > 0,
                  f"messages.create answers a message ({str(whole)[:200]})")
            check(streamed.get("ok") and streamed["content"] == whole["content"] and
                  streamed["stop_reason"] == whole["stop_reason"] and streamed["usage"]["output_tokens"] ==
                  whole["usage"]["output_tokens"], "messages.stream's finalMessage equals messages.create's message")
            ev = streamed.get("events", [])
            check(ev[:1] == ["message_start"] and ev[-2:] == ["message_delta", "message_stop"] and
                  "content_block_start" in ev and "content_block_delta" in ev and "content_block_stop" in ev,
                  f"the event stream: message_start, content blocks, message_delta, message_stop ({ev[:4]}...)")
            fw, fs = r[2], r[3]
            uses = [b for b in fw.get("content", []) if b["type"] == "tool_use"]
            valid = bool(uses) and all(u["name"] == "get_weather" and u["id"].startswith("toolu_") for u in uses)
            try:
                for u in uses:
                    jsonschema.validate(u["input"], WEATHER["input_schema"])
            except Exception:  # noqa: BLE001
                valid = False
            check(fw.get("ok") and valid and fw["stop_reason"] == "tool_use",
                  f"tool_choice any: tool_use blocks whose input validates, stop_reason tool_use ({str(fw)[:300]})")
            def no_ids(m):
                return [{k: v for k, v in b.items() if k != "id"} for b in m.get("content", [])]
            check(fs.get("ok") and no_ids(fs) == no_ids(fw) and "content_block_delta" in fs.get("events", []),
                  "the streamed tool_use (input_json_delta) equals the unstreamed one")
            st = r[4]
            check(st.get("ok") and st["stop_reason"] == "stop_sequence" and st["stop_sequence"] == "\n1." and
                  "\n1." not in text_of(st), f"stop_sequences: stop_reason stop_sequence, the text cut before it ({st})")
            check(r[5].get("ok"), f"tool_use and tool_result blocks in the history are accepted ({str(r[5])[:200]})")
            check(not r[6]["ok"] and r[6]["status"] == 400 and (r[6].get("body") or {}).get("type") == "error" and
                  "max_tokens is missing" in r[6]["error"], f"missing max_tokens: a 400 in Anthropic's shape ({r[6]})")
            check(not r[7]["ok"] and r[7]["status"] == 400 and "image" in r[7]["error"],
                  f"an image block is refused by name ({r[7]})")
            bad = sdk(base, [{"op": "messages", "body": hello}], "sk-wrong")[0]
            check(not bad["ok"] and bad["status"] == 401 and (bad.get("body") or {}).get("error", {}).get("type") ==
                  "authentication_error", f"a wrong x-api-key: 401 authentication_error ({bad})")
            # The history reaches the template: its tool result and the call are in the prompt.
            rr, t = srv.request("POST", "/v1/messages", history, {"x-api-key": KEY, "content-type": "application/json"})
            u = json.loads(t)["usage"] if rr.status == 200 else {}
            check(rr.status == 200 and u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] > 20,
                  "POST /v1/messages with x-api-key over plain HTTP")
        finally:
            srv.stop()
        # A reasoning template: thinking blocks.
        template = os.path.join(tmp, "r1.jinja")
        with open(template, "w") as f:
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ (m.content or '').split('</think>')[-1] }}{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
        srv = server(model, "engine.threads=1", f"model.chat_template={template}")
        try:
            body = {"model": "tiny", "max_tokens": 40, "temperature": 0, "messages": [{"role": "user", "content": "Hi"}]}
            r = sdk(f"http://127.0.0.1:{srv.port}", [{"op": "messages", "body": body},
                                                      {"op": "messages_stream", "body": body}], KEY)
            kinds = [b["type"] for b in r[0].get("content", [])]
            check(r[0].get("ok") and kinds[:1] == ["thinking"] and r[0]["content"][0]["thinking"],
                  f"a reasoning model's thinking comes as a thinking block first ({kinds})")
            def unsigned(m):  # (a signature seals the thinking with a fresh nonce each time)
                return [{k: v for k, v in b.items() if k != "signature"} for b in m.get("content", [])]
            check(r[1].get("ok") and unsigned(r[1]) == unsigned(r[0]) and
                  all(b["signature"].startswith("trp1.") for m in r[:2] for b in m["content"] if b["type"] == "thinking"),
                  f"streamed thinking (thinking_delta) equals it ({r[1].get('content')} vs {r[0].get('content')})")
        finally:
            srv.stop()


main()
sys.exit(summary())
