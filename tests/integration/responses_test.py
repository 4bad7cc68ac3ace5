#!/usr/bin/env python3
"""OpenAI's Responses API (POST /v1/responses) through the official openai
npm client: responses.create and responses.stream (its finalResponse()
accumulates the typed events) on random weights, greedy so that both give
the same answer; instructions, a forced function call whose arguments
validate against its parameters (python3-jsonschema), text.format
json_schema, function_call_output items, previous_response_id continuing a
stored conversation (the prompt's token count is checked against
/tokenize of the same conversation written out), store: false, two tenants
who never see each other's responses, GET and DELETE /v1/responses/{id},
the store's TTL and byte bound, reasoning items from a reasoning template,
and bad input as 4xx in OpenAI's shape.

Exits 77 (SKIP) without tests/tools/node_modules (openai), node or
python3-jsonschema."""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, need_npm, sdk, server, sha256, summary, use_troupe  # noqa: E402

need_npm("openai")
try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

use_troupe(sys.argv[1])
KEY_A = "sk-test-responses-a-5be1"
KEY_B = "sk-test-responses-b-93d0"
PARAMS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
          "required": ["city", "unit"], "additionalProperties": False}
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.", "parameters": PARAMS,
           "strict": True}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def one(base, op, body, key=KEY_A):
    return sdk(base, [{"op": op, "body": body}], key)[0]


def calls(r):
    return [{k: o[k] for k in ("name", "arguments")} for o in r.get("output", []) if o["type"] == "function_call"]


def error_code(r):
    return ((r.get("body") or {}).get("code"), r.get("status"))


def prompt_tokens(srv, messages, key=KEY_A, tools=None):
    body = {"messages": messages}
    if tools:
        body["tools"] = tools
    r, text = srv.request("POST", "/tokenize", body, {"Authorization": "Bearer " + key,
                                                     "content-type": "application/json"})
    return json.loads(text)["count"] if r.status == 200 else -1


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny(tmp)
        tenants = os.path.join(tmp, "tenants.toml")
        with open(tenants, "w") as f:
            f.write(f'[tenants.a]\napi_key_sha256 = "{sha256(KEY_A)}"\n'
                    f'[tenants.b]\napi_key_sha256 = "{sha256(KEY_B)}"\n')
        # A template that writes tool calls and results (the tiny model's Llama-2 one does not).
        tool_template = os.path.join(tmp, "tools.jinja")
        with open(tool_template, "w") as f:
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content or '' }}"
                    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}"
                    "</tool_call>{% endfor %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
        srv = server(model, "engine.threads=1", "model.tool_parser=hermes", f"model.chat_template={tool_template}",
                     "server.tenants=" + tenants)
        base = f"http://127.0.0.1:{srv.port}"
        try:
            hello = {"model": "tiny", "input": "Hello", "instructions": "Be brief.", "max_output_tokens": 24,
                     "temperature": 0}
            forced = {"model": "tiny", "input": "Weather in Paris?", "tools": [WEATHER], "tool_choice": "required",
                      "max_output_tokens": 100, "temperature": 0}
            schema = {"model": "tiny", "input": "A person, please.", "max_output_tokens": 80, "temperature": 0,
                      "text": {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}}
            r = sdk(base, [{"op": "responses", "body": hello}, {"op": "responses_stream", "body": hello},
                           {"op": "responses", "body": forced}, {"op": "responses_stream", "body": forced},
                           {"op": "responses", "body": schema}, {"op": "responses_stream", "body": schema},
                           {"op": "responses", "body": dict(hello, max_output_tokens=3)}], KEY_A)
            whole, streamed = r[0], r[1]
            check(whole.get("ok") and whole["object"] == "response" and whole["id"].startswith("resp_") and
                  whole["status"] in ("completed", "incomplete") and whole["output"][0]["type"] == "message" and
                  whole["output_text"] and whole["usage"]["input_tokens"] > 0 and whole["usage"]["output_tokens"] > 0
                  and whole["instructions"] == "Be brief.",
                  f"responses.create answers a response with a message ({str(whole)[:300]})")
            check(streamed.get("ok") and streamed["output_text"] == whole["output_text"] and
                  streamed["status"] == whole["status"] and
                  all(streamed["usage"][k] == whole["usage"][k] for k in ("input_tokens", "output_tokens")) and
                  streamed["id"] != whole["id"], "responses.stream's finalResponse equals responses.create's response")
            ev = streamed.get("events", [])
            check(ev[:2] == ["response.created", "response.in_progress"] and
                  ev[-1] in ("response.completed", "response.incomplete") and streamed.get("sequential") and
                  all(t in ev for t in ("response.output_item.added", "response.content_part.added",
                                        "response.output_text.delta", "response.output_text.done",
                                        "response.content_part.done", "response.output_item.done")),
                  f"the typed events, numbered in order ({ev[:5]}...{ev[-2:]})")
            fw, fs = r[2], r[3]
            valid = bool(calls(fw))
            try:
                for c in calls(fw):
                    jsonschema.validate(json.loads(c["arguments"]), PARAMS)
            except Exception:  # noqa: BLE001
                valid = False
            check(fw.get("ok") and valid and all(c["name"] == "get_weather" for c in calls(fw)) and
                  all(o["call_id"].startswith("call_") for o in fw["output"] if o["type"] == "function_call") and
                  fw["status"] == "completed" and fw["tool_choice"] == "required" and
                  fw["tools"][0]["name"] == "get_weather",
                  f"tool_choice required: function_call items whose arguments validate ({str(fw)[:300]})")
            check(fs.get("ok") and calls(fs) == calls(fw) and
                  "response.function_call_arguments.delta" in fs.get("events", []),
                  "the streamed function calls (arguments deltas) equal the unstreamed ones")
            for i, what in ((4, "create"), (5, "stream")):
                ok = r[i].get("ok") and r[i]["status"] == "completed"
                try:
                    jsonschema.validate(json.loads(r[i]["output_text"]), PERSON)
                except Exception:  # noqa: BLE001
                    ok = False
                check(ok, f"text.format json_schema ({what}): the text validates ({str(r[i])[:200]})")
            short = r[6]
            check(short.get("ok") and short["status"] == "incomplete" and
                  short["incomplete_details"] == {"reason": "max_output_tokens"} and short["usage"]["output_tokens"] == 3,
                  f"max_output_tokens reached: status incomplete ({str(short)[:200]})")

            # previous_response_id: the stored conversation goes on (without the instructions).
            first = one(base, "responses", {"model": "tiny", "input": "My name is Ada.", "instructions": "Be brief.",
                                            "max_output_tokens": 12, "temperature": 0})
            second = one(base, "responses", {"model": "tiny", "input": "What is my name?", "temperature": 0,
                                             "max_output_tokens": 8, "previous_response_id": first["id"]})
            written_out = [{"role": "user", "content": "My name is Ada."},
                           {"role": "assistant", "content": first["output_text"]},
                           {"role": "user", "content": "What is my name?"}]
            check(second.get("ok") and second["previous_response_id"] == first["id"] and
                  second["usage"]["input_tokens"] == prompt_tokens(srv, written_out),
                  f"previous_response_id continues the conversation: its prompt is the one written out "
                  f"({second.get('usage')}, /tokenize {prompt_tokens(srv, written_out)})")
            third = one(base, "responses", {"model": "tiny", "input": [{"role": "user", "content": "And again?"}],
                                            "max_output_tokens": 4, "temperature": 0,
                                            "previous_response_id": second["id"]})
            written_out += [{"role": "assistant", "content": second["output_text"]},
                            {"role": "user", "content": "And again?"}]
            check(third.get("ok") and third["usage"]["input_tokens"] == prompt_tokens(srv, written_out),
                  "a chain of three: each turn carries all before it")
            # A function call's output, by previous_response_id and inline.
            call = next(o for o in fw["output"] if o["type"] == "function_call")
            after = one(base, "responses", {"model": "tiny", "tools": [WEATHER], "max_output_tokens": 6,
                                            "temperature": 0, "previous_response_id": fw["id"], "input": [
                                                {"type": "function_call_output", "call_id": call["call_id"],
                                                 "output": "21 C"}]})
            inline = one(base, "responses", {"model": "tiny", "tools": [WEATHER], "max_output_tokens": 6,
                                             "temperature": 0, "input": [
                                                 {"role": "user", "content": "Weather in Paris?"},
                                                 {"type": "function_call", "call_id": call["call_id"],
                                                  "name": call["name"], "arguments": call["arguments"]},
                                                 {"type": "function_call_output", "call_id": call["call_id"],
                                                  "output": "21 C"}]})
            check(after.get("ok") and inline.get("ok") and
                  after["usage"]["input_tokens"] == inline["usage"]["input_tokens"] and
                  after["output_text"] == inline["output_text"],
                  f"function_call_output after previous_response_id equals the same items given inline "
                  f"({str(after)[:150]} / {str(inline)[:150]})")

            # The store is the tenant's own.
            other = one(base, "responses", {"model": "tiny", "input": "Hi", "previous_response_id": first["id"]},
                        key=KEY_B)
            check(not other["ok"] and error_code(other) == ("previous_response_not_found", 404),
                  f"another tenant's previous_response_id: 404 ({other})")
            check(one(base, "responses_get", {"id": first["id"]}, key=KEY_B)["status"] == 404,
                  "GET /v1/responses/{id} of another tenant's: 404")
            got = one(base, "responses_get", {"id": first["id"]})
            check(got.get("ok") and got["id"] == first["id"] and got["output_text"] == first["output_text"],
                  f"GET /v1/responses/{{id}} returns the stored response ({str(got)[:150]})")
            check(one(base, "responses_delete", {"id": first["id"]}).get("ok") and
                  one(base, "responses_get", {"id": first["id"]})["status"] == 404,
                  "DELETE /v1/responses/{id}, then it is gone")
            missing = one(base, "responses", {"model": "tiny", "input": "Hi", "previous_response_id": "resp_nope"})
            check(not missing["ok"] and error_code(missing) == ("previous_response_not_found", 404) and
                  (missing.get("body") or {}).get("param") == "previous_response_id",
                  f"an unknown previous_response_id: 404 naming it ({missing})")
            unstored = one(base, "responses", {"model": "tiny", "input": "Hi", "max_output_tokens": 2, "store": False})
            check(unstored.get("ok") and unstored["store"] is False and
                  one(base, "responses_get", {"id": unstored["id"]})["status"] == 404,
                  "store: false keeps nothing")

            # Bad input: 400s in OpenAI's shape, naming the field.
            bad = sdk(base, [{"op": "responses", "body": b} for b in (
                {"model": "tiny"},
                {"model": "tiny", "input": [{"role": "user", "content": [
                    {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]}]},
                {"model": "tiny", "input": "x", "tools": [{"type": "custom", "name": "apply_patch"}]},
                {"model": "tiny", "input": "x", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}},
                {"model": "tiny", "input": "x", "text": {"format": {"type": "json_schema", "name": "s",
                                                                    "schema": {"oneOf": [{"type": "string"}]}}}},
                {"model": "tiny", "input": "x", "background": True},
                {"model": "tiny", "input": [{"type": "function_call_output", "output": "1"}]},
            )], KEY_A)
            expect = [("input", "missing_field"), ("input[0].content[0].type", "input_image"),
                      ("tools[0].type", "custom"), ("tool_choice", "nope"), ("text.format.schema", "oneOf"),
                      ("background", "background"),
                      ("input[0].call_id", "call_id is missing")]
            for b, (param, words) in zip(bad, expect):
                body = b.get("body") or {}
                check(not b["ok"] and b["status"] == 400 and (body.get("param") == param or
                                                              body.get("param", "").startswith(param.split(".")[0])) and
                      (words in b["error"] or words == body.get("code")),
                      f"400 naming {param} ({b.get('error')})")
            # A hosted tool cannot run here: not offered to the model, and named in a header.
            hosted, text = srv.request("POST", "/v1/responses", {"model": "tiny", "input": "x", "max_output_tokens": 2,
                                                                 "tools": [{"type": "web_search"}, WEATHER]},
                                       {"authorization": f"Bearer {KEY_A}"})
            check(hosted.status == 200 and hosted.getheader("troupe-skipped-tools") == "web_search",
                  f"a hosted tool (web_search) is skipped and named in troupe-skipped-tools ({hosted.status} {text[:200]})")
        finally:
            srv.stop()

        # The store's bounds: a TTL, and bytes (the least recently used go first).
        srv = server(model, "engine.threads=1", "server.responses_ttl_s=3", "server.responses_store=4KiB")
        base = f"http://127.0.0.1:{srv.port}"
        try:
            made = sdk(base, [{"op": "responses", "body": {"model": "tiny", "input": f"Turn {i}",
                                                           "max_output_tokens": 4, "temperature": 0}}
                              for i in range(6)], KEY_A)
            check(all(m.get("ok") for m in made), "six responses")
            kept = [g.get("ok", False) for g in sdk(base, [{"op": "responses_get", "body": {"id": m["id"]}}
                                                           for m in made], KEY_A)]
            check(kept[-1] and not kept[0], f"past server.responses_store the least recently used go first ({kept})")
            time.sleep(3.5)
            check(one(base, "responses_get", {"id": made[-1]["id"]})["status"] == 404,
                  "past server.responses_ttl_s a response is gone")
        finally:
            srv.stop()

        # A reasoning template: a reasoning item first.
        template = os.path.join(tmp, "r1.jinja")
        with open(template, "w") as f:
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ (m.content or '').split('</think>')[-1] }}{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
        srv = server(model, "engine.threads=1", f"model.chat_template={template}")
        try:
            body = {"model": "tiny", "input": "Hi", "max_output_tokens": 40, "temperature": 0}
            r = sdk(f"http://127.0.0.1:{srv.port}", [{"op": "responses", "body": body},
                                                      {"op": "responses_stream", "body": body}], KEY_A)
            kinds = [o["type"] for o in r[0].get("output", [])]
            check(r[0].get("ok") and kinds[:1] == ["reasoning"] and r[0]["output"][0]["content"][0]["text"],
                  f"a reasoning model's thinking comes as a reasoning item first ({kinds})")
            strip = [{k: v for k, v in o.items() if k != "id"} for o in r[1].get("output", [])]
            check(r[1].get("ok") and strip == [{k: v for k, v in o.items() if k != "id"} for o in r[0]["output"]] and
                  "response.reasoning_text.delta" in r[1].get("events", []),
                  f"streamed reasoning (reasoning_text deltas) equals it ({str(r[1].get('output'))[:200]})")
        finally:
            srv.stop()


main()
sys.exit(summary())
