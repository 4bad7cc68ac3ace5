#!/usr/bin/env python3
"""Structured output on random weights, judged by a JSON Schema validator
nobody here wrote (Debian's python3-jsonschema, Draft 2020-12 with its
format checker): every answer of `troupe serve` to response_format,
guided_json, guided_regex, guided_choice and guided_grammar parses and
validates, over many seeds and schemas, and ends ("stop") within max_tokens.
Run on the tiny model (SentencePiece) and, where tests/tools is installed, on
a small model with Llama 3.2's 128k byte-level BPE tokenizer. Also: streamed
equals unstreamed, and what cannot be honoured is a 400 naming the field.

Exits 77 (SKIP) without python3-jsonschema."""

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import TOOLS, check, check_replay, make_model, make_tiny, server, stream, summary, use_troupe  # noqa: E402

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed (make test installs it)")
    sys.exit(77)

use_troupe(sys.argv[1])

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "email": {"type": "string", "format": "email"},
            "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "enums and consts": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue", 7, None]},
            "kind": {"const": {"k": [1, "two"]}},
            "flag": {"type": "boolean"},
        },
        "required": ["color", "kind", "flag"],
    },
    "arrays": {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer", "minimum": 10, "maximum": 99},
                    "minItems": 2, "maxItems": 4},
            "pair": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "null"}],
                     "items": False},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,5}$"}, "maxItems": 3},
        },
        "required": ["ids", "pair", "tags"],
    },
    "anyOf and refs": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                "required": ["v", "next"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"list": {"$ref": "#/$defs/node"}, "either": {"anyOf": [{"type": "string", "maxLength": 4},
                                                                              {"type": "number"}]}},
        "required": ["list", "either"],
    },
    "formats": {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "host": {"type": "string", "format": "ipv4"},
        },
        "required": ["day", "at", "id", "host"],
    },
    "optional only": {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 2}, "b": {"type": "integer"}, "c": {"type": "null"}},
    },
    "top-level array": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "maxItems": 5},
    "map": {"type": "object", "additionalProperties": {"type": "boolean"}},
}

VALIDATOR = {name: jsonschema.Draft202012Validator(s, format_checker=jsonschema.FormatChecker())
             for name, s in SCHEMAS.items()}
for name, s in SCHEMAS.items():
    jsonschema.Draft202012Validator.check_schema(s)


def chat(srv, extra, seed, max_tokens):
    body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "temperature": 1.0, "seed": seed,
            "max_tokens": max_tokens, **extra}
    r, text = srv.request("POST", "/v1/chat/completions", body)
    if r.status != 200:
        return r.status, text, None
    out = json.loads(text)
    return 200, out["choices"][0]["message"]["content"], out["choices"][0]["finish_reason"]


def judge_schemas(srv, label, seeds, max_tokens):
    for name, schema in SCHEMAS.items():
        bad, not_stopped = [], []
        for seed in seeds:
            for how in ("response_format", "guided_json"):
                extra = ({"response_format": {"type": "json_schema",
                                              "json_schema": {"name": "x", "schema": schema, "strict": True}}}
                         if how == "response_format" else {"guided_json": schema})
                status, content, finish = chat(srv, extra, seed, max_tokens)
                if status != 200:
                    bad.append(f"seed {seed}: HTTP {status} {content[:200]}")
                    continue
                try:
                    VALIDATOR[name].validate(json.loads(content))
                except Exception as e:  # noqa: BLE001 (json or schema: both are failures)
                    bad.append(f"seed {seed} {how}: {type(e).__name__}: {str(e)[:120]} in {content[:300]!r}")
                if finish != "stop":
                    not_stopped.append(f"seed {seed}: {finish}")
        n = 2 * len(seeds)
        check(not bad, f"{label}: '{name}': {n} answers parse and validate" + ("" if not bad else f": {bad[:3]}"))
        check(not not_stopped, f"{label}: '{name}': every answer ends (stop) within max_tokens {max_tokens}"
              + ("" if not not_stopped else f": {not_stopped[:3]}"))


def judge_other_constraints(srv, label, seeds):
    # json_object: any object.
    objs = [chat(srv, {"response_format": {"type": "json_object"}}, s, 80) for s in seeds]
    ok = all(st == 200 and isinstance(json.loads(c), dict) and f == "stop" for st, c, f in objs)
    check(ok, f"{label}: response_format json_object: {len(seeds)} answers are JSON objects that end"
          + ("" if ok else f": {objs[:2]}"))
    # guided_regex: the whole answer matches (Python's re as the judge).
    regex = r"(\d{3}-[A-Z]{2,3}|none)( [a-z]+!?){0,3}"
    got = [chat(srv, {"guided_regex": regex}, s, 40) for s in seeds]
    ok = all(st == 200 and re.fullmatch(regex, c) for st, c, _ in got)
    check(ok, f"{label}: guided_regex: every answer fully matches /{regex}/" + ("" if ok else f": {got[:3]}"))
    # guided_choice
    choices = ["yes", "no", "maybe \"so\""]
    got = [chat(srv, {"guided_choice": choices}, s, 20) for s in seeds]
    ok = all(st == 200 and c in choices and f == "stop" for st, c, f in got)
    check(ok, f"{label}: guided_choice: every answer is one of the choices" + ("" if ok else f": {got[:3]}"))
    # guided_grammar (GBNF): sums of numbers in parentheses, judged by a regex of the same language.
    gbnf = 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]{0,2}\n'
    got = [chat(srv, {"guided_grammar": gbnf}, s, 30) for s in seeds]
    ok = all(st == 200 and re.fullmatch(r"\([1-9][0-9]{0,2}(\+[1-9][0-9]{0,2})*\)", c) for st, c, _ in got)
    check(ok, f"{label}: guided_grammar: every answer is a sentence of the grammar" + ("" if ok else f": {got[:3]}"))


def judge_stream(srv, label):
    schema = SCHEMAS["person"]
    body = {"messages": [{"role": "user", "content": "JSON please"}], "seed": 5, "max_tokens": 60,
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}}
    r, text = srv.request("POST", "/v1/chat/completions", body)
    whole = json.loads(text)["choices"][0]["message"]["content"]
    status, pieces, finish, _, done = stream(srv, "/v1/chat/completions", body)
    check(status == 200 and done and "".join(pieces) == whole and finish == "stop",
          f"{label}: streamed pieces join to the unstreamed answer ({len(pieces)} pieces)")
    # /v1/completions takes the same fields.
    r, text = srv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 20, "seed": 1,
                                                      "guided_choice": ["alpha", "beta"]})
    check(r.status == 200 and json.loads(text)["choices"][0]["text"] in ("alpha", "beta"),
          f"{label}: /v1/completions honours guided_choice")


def judge_errors(srv):
    def err(extra, want_param, want_text):
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, **extra}
        r, text = srv.request("POST", "/v1/chat/completions", body)
        e = json.loads(text).get("error", {}) if text.startswith("{") else {}
        check(r.status == 400 and e.get("param") == want_param and want_text in e.get("message", ""),
              f"refused with 400, param {want_param}: {want_text!r} (got {r.status} {e.get('message', text)[:160]!r})")

    err({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"oneOf": []}}}},
        "response_format", "response_format.json_schema.schema: 'oneOf' at / is not supported")
    err({"guided_json": {"type": "object", "properties": {"a": {"type": "string", "format": "iri-reference"}}}},
        "guided_json", "'format' 'iri-reference' at /properties/a is not supported")
    err({"guided_json": {"type": "string", "pattern": "(?=x)y"}}, "guided_json", "lookahead")
    err({"guided_regex": "a\\1"}, "guided_regex", "backreference")
    err({"guided_grammar": "root ::= item"}, "guided_grammar", "undefined rule 'item'")
    err({"guided_grammar": "root ::= root \"a\" | \"b\""}, "guided_grammar", "left-recursive")
    err({"guided_choice": []}, "guided_choice", "must not be empty")
    err({"response_format": {"type": "yaml"}}, "response_format", "response_format.type must be")
    err({"response_format": {"type": "json_schema"}}, "response_format", "response_format.json_schema is missing")
    err({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "extra": 1}}},
        "response_format", "unknown parameter response_format.json_schema.extra")
    err({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_choice", "both constrain the output")


def step_log_tokens(path):
    """Each request's output tokens in a step log, as (token, forced tokens) per sampled entry."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "sampled":
                for e in w[1:]:
                    rid, toks = e.split(":")
                    toks = [int(t) for t in toks.split("+")]
                    out.setdefault(int(rid), []).append((toks[0], toks[1:]))
    return out


def judge_jump_forward(tiny, tmp):
    """engine.jump_forward: a grammar's forced bytes are appended after the
    sampled token and computed next step as one chunk. The text a grammar
    decides is the same with it off; every forced token is counted (usage,
    the metric, the step log); and the logits after a forced chunk are those
    of a prompt holding the same tokens: where the grammar leaves the answer
    free, greedy continues exactly as the plain model does from there."""
    log = os.path.join(tmp, "jf.steps")
    on = server(tiny, "engine.threads=1", "engine.step_log=" + log)
    # (Off also serves the plain model below: that request has no grammar.)
    off = server(tiny, "engine.threads=1", "engine.jump_forward=false", "engine.step_log=" + log + ".off")
    options = ["the quick brown fox jumps over the lazy dog", "a slow green turtle crawls under the busy bridge"]
    texts, used = {}, 0
    try:
        for name, srv in (("on", on), ("off", off)):
            got = []
            for seed in range(1, 7):
                r, t = srv.request("POST", "/v1/completions", {"prompt": f"Story {seed}:", "seed": seed,
                                                              "max_tokens": 40, "guided_choice": options})
                body = json.loads(t)
                got.append(body["choices"][0]["text"])
                if name == "on":
                    used += body["usage"]["completion_tokens"]
            texts[name] = got
        check(texts["on"] == texts["off"] and all(t in options for t in texts["on"]),
              f"jump-forward: guided_choice gives the same choices on and off ({texts['on']})")
        # A forced literal, then free text: the free tokens after the forced
        # chunk must be the plain model's greedy continuation of those tokens.
        gbnf = 'root ::= "Once upon a time, in a land far away, there lived" .{0,60}'
        prompt_ids = json.loads(on.request("POST", "/tokenize", {"prompt": "Tell me"})[1])["tokens"]
        r, t = on.request("POST", "/v1/completions", {"prompt": prompt_ids, "temperature": 0, "max_tokens": 36,
                                                      "guided_grammar": gbnf})
        guided = json.loads(t)
        used += guided["usage"]["completion_tokens"]
        forced_metric = on.metric("troupe_jump_forward_tokens_total")
        on.stop()  # (its step log is whole once it has stopped)
        tokens = step_log_tokens(log)
        forced = sum(len(f) for seq in tokens.values() for _, f in seq)
        total = sum(1 + len(f) for seq in tokens.values() for _, f in seq)
        check(forced > 0 and forced == forced_metric and total == used,
              f"jump-forward: {forced} forced tokens, in the step log and troupe_jump_forward_tokens_total "
              f"({forced_metric:.0f}); usage counts them ({total} tokens logged, {used} in usage)")
        seq = tokens[max(tokens)]  # the guided_grammar request: the last submitted
        head = [seq[0][0]] + seq[0][1]
        free = [t for t, f in seq[1:]][:-1]  # (the last: the end, all the budget allows there)
        check(len(seq[0][1]) >= 5 and len(free) >= 8 and all(not f for _, f in seq[1:]) and
              guided["choices"][0]["text"].startswith("Once upon a time, in a land far away, there lived"),
              f"jump-forward: the literal comes as the first token and {len(seq[0][1])} forced ones ({seq[:3]})")
        r, t = off.request("POST", "/v1/completions", {"prompt": prompt_ids + head, "temperature": 0,
                                                       "max_tokens": len(free)})
    finally:
        on.stop()
        off.stop()
    plain = step_log_tokens(log + ".off")
    again = [t for t, _ in plain[max(plain)]]  # the plain request: the last submitted
    check(r.status == 200 and again == free,
          f"jump-forward: after the forced chunk, greedy goes on as the model does from a prompt of the same tokens "
          f"({free} vs {again})")
    # The simulator's replay, given the logged tokens (forced ones included).
    check_replay(log, "jump-forward: replaying the step log")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        tiny = make_tiny(tmp)
        srv = server(tiny, "engine.threads=1")
        try:
            judge_schemas(srv, "tiny", seeds=range(1, 9), max_tokens=160)
            judge_other_constraints(srv, "tiny", seeds=range(1, 7))
            judge_stream(srv, "tiny")
            judge_errors(srv)
        finally:
            srv.stop()
        judge_jump_forward(tiny, tmp)
        llama3 = os.path.join(TOOLS, "@lenml", "tokenizer-llama3_2", "models")
        if not os.path.isdir(llama3):
            print("note: tests/tools is not installed: the 128k-token vocabulary is not tried")
            return
        model = make_model(os.path.join(tmp, "llama3"), "llama-3.2-1b", "--small", "--tokenizer", llama3)
        srv = server(model, "engine.threads=1", "scheduler.max_model_len=1024")
        try:
            judge_schemas(srv, "llama-3.2 tokenizer", seeds=range(1, 4), max_tokens=160)
            judge_other_constraints(srv, "llama-3.2 tokenizer", seeds=range(1, 4))
            judge_stream(srv, "llama-3.2 tokenizer")
        finally:
            srv.stop()


main()
sys.exit(summary())
