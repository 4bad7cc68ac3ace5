#!/usr/bin/env python3
"""Integration tests of `troupe serve`: the real binary on a loopback port,
driven by real clients (http.client, raw sockets, curl, Node's fetch)."""

import concurrent.futures
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(SOURCE, "..", "support"))
from troupe_harness import (CONFIG, NODE, bench_field, check, check_replay, make_tiny, poll, server, sse_events,  # noqa: E402
                            stream, summary, token_bytes, use_troupe, wait_for)

TROUPE = use_troupe(sys.argv[1])


def test_basics(srv):
    r, text = srv.request("GET", "/health/live")
    check(r.status == 200, "GET /health/live is 200")
    r, text = srv.request("GET", "/health/ready")
    check(r.status == 200 and json.loads(text)["status"] == "ready", "GET /health/ready is 200 once loaded")
    r, text = srv.request("GET", "/v1/models", headers={"x-request-id": "abc-123"})
    models = json.loads(text)
    check(r.status == 200 and models["data"][0]["id"] == "tiny", "GET /v1/models lists the served model")
    check(r.getheader("x-request-id") == "abc-123", "x-request-id is echoed")
    check(re.fullmatch(r"tiny@[0-9a-f]{12}", r.getheader("x-model-version") or "") is not None,
          "x-model-version carries the model's version tag")
    r, _ = srv.request("GET", "/health/live")
    check(bool(r.getheader("x-request-id")), "a request without x-request-id gets one")
    r, text = srv.request("HEAD", "/v1/models")
    check(r.status == 200 and text == "" and int(r.getheader("content-length")) > 0,
          "HEAD gets the headers and no body")


def test_non_streaming(srv):
    r, text = srv.request("POST", "/v1/completions",
                          {"model": "tiny", "prompt": "Permission is hereby granted", "max_tokens": 12,
                           "ignore_eos": True, "temperature": 0})
    body = json.loads(text)
    check(r.status == 200 and body["object"] == "text_completion", "completions: 200 text_completion")
    check(body["usage"]["completion_tokens"] == 12 and body["choices"][0]["finish_reason"] == "length",
          "completions: max_tokens honoured, finish_reason length")
    check(body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 12, "completions: usage adds up")
    text1 = body["choices"][0]["text"]
    _, text = srv.request("POST", "/v1/completions",
                          {"prompt": "Permission is hereby granted", "max_tokens": 12, "ignore_eos": True,
                           "temperature": 0})
    check(json.loads(text)["choices"][0]["text"] == text1, "completions: greedy is reproducible")
    _, a = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 16, "seed": 7, "ignore_eos": True})
    _, b = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 16, "seed": 7, "ignore_eos": True})
    check(json.loads(a)["choices"][0]["text"] == json.loads(b)["choices"][0]["text"], "completions: same seed, same text")
    r, text = srv.request("POST", "/v1/chat/completions",
                          {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8,
                           "ignore_eos": True})
    body = json.loads(text)
    check(r.status == 200 and body["object"] == "chat.completion" and
          body["choices"][0]["message"]["role"] == "assistant", "chat: 200 chat.completion with an assistant message")
    check(body["usage"]["completion_tokens"] == 8, "chat: usage counts the tokens")
    r, text = srv.request("POST", "/v1/completions",
                          {"prompt": "The", "max_tokens": 4, "logprobs": 2, "ignore_eos": True})
    lp = json.loads(text)["choices"][0]["logprobs"]
    check(r.status == 200 and len(lp["tokens"]) == 4 and len(lp["top_logprobs"][0]) == 2 and
          all(x <= 0 for x in lp["token_logprobs"]), "completions: logprobs with top alternatives")
    r, text = srv.request("POST", "/v1/completions",
                          {"prompt": "The", "max_tokens": 64, "ignore_eos": True, "stop": [" the"], "temperature": 0})
    body = json.loads(text)
    check(" the" not in body["choices"][0]["text"], "completions: a stop string never shows")


def test_logprobs_shape(srv):
    """Logprobs tokens are the text as it shows (a space for ▁, "\\n" for <0x0A>),
    their bytes rebuild the text exactly, and each text_offset points at its token."""
    newlines = 0
    for prompt, seed in [("This License", 3), ("Copyright", 1), ("The", 11), ("Permission is", 5),
                         ("\u00e9t\u00e9 \u4e16\u754c", 2), ("GNU", 8), ("\n\n", 4), ("You may", 9)]:
        what = f"prompt {prompt!r} seed {seed}"
        body = {"prompt": prompt, "max_tokens": 40, "logprobs": 3, "seed": seed, "ignore_eos": True}
        r, text = srv.request("POST", "/v1/completions", body)
        ch = json.loads(text)["choices"][0]
        out, lp = ch["text"], ch["logprobs"]
        joined = b"".join(token_bytes(t) for t in lp["tokens"])
        starts = all(out[o:].startswith(t) for t, o in zip(lp["tokens"], lp["text_offset"])
                     if not t.startswith("bytes:"))
        check(r.status == 200 and joined == out.encode() and starts and len(lp["tokens"]) == 40,
              f"completions logprobs, {what}: tokens rebuild the text, offsets point at them"
              + ("" if joined == out.encode() and starts else f" ({out!r} vs {lp['tokens']} {lp['text_offset']})"))
        check(all(len(top) == 3 for top in lp["top_logprobs"]) and
              not any(k.startswith("\u2581") or re.fullmatch(r"<0x[0-9A-F]{2}>", k)
                      for top in lp["top_logprobs"] for k in top),
              f"completions logprobs, {what}: top_logprobs keys are text too")
        newlines += "\n" in lp["tokens"]
        # Streamed: the same tokens, offsets counted over the whole text.
        r, text = srv.request("POST", "/v1/completions", dict(body, stream=True))
        chunks = [json.loads(e)["choices"][0] for e in sse_events(text)[:-1]]
        s_text = "".join(c["text"] for c in chunks)
        s_tokens = [t for c in chunks if c["logprobs"] for t in c["logprobs"]["tokens"]]
        s_offsets = [o for c in chunks if c["logprobs"] for o in c["logprobs"]["text_offset"]]
        check(s_text == out and s_tokens == lp["tokens"] and s_offsets == lp["text_offset"],
              f"completions logprobs streamed, {what}: the same tokens and offsets")
        # Chat: bytes rebuild the content; tokens render their bytes.
        r, text = srv.request("POST", "/v1/chat/completions",
                              {"messages": [{"role": "user", "content": prompt}], "max_tokens": 40, "seed": seed,
                               "logprobs": True, "top_logprobs": 2, "ignore_eos": True})
        ch = json.loads(text)["choices"][0]
        content, entries = ch["message"]["content"], ch["logprobs"]["content"]
        rendered = all(token_bytes(e["token"]) == bytes(e["bytes"]) and
                       all(token_bytes(t["token"]) == bytes(t["bytes"]) for t in e["top_logprobs"])
                       for e in entries)
        check(r.status == 200 and b"".join(bytes(e["bytes"]) for e in entries) == content.encode() and rendered,
              f"chat logprobs, {what}: bytes rebuild the content, each token shows its bytes")
    check(newlines > 0, f"the logprobs prompts produced newlines ({newlines})")


def test_split_characters(srv):
    """Byte pieces of multi-byte characters (logit_bias makes the tiny model
    write E4, B8 and 96 bytes): each shows as "bytes:\\xNN" with its raw byte,
    and the bytes still rebuild the text."""
    bias = {str(3 + b): 100 for b in (0xE4, 0xB8, 0x96)}  # <0x00> is id 3
    r, text = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 30, "logprobs": 1,
                                                      "seed": 1, "logit_bias": bias})
    ch = json.loads(text)["choices"][0]
    lp = ch["logprobs"]
    joined = b"".join(token_bytes(t) for t in lp["tokens"])
    cjk = [c for c in ch["text"] if "\u4000" <= c <= "\u4fff"]
    check(r.status == 200 and joined == ch["text"].encode() and len(cjk) > 0 and
          all(re.fullmatch(r"bytes:\\x(e4|b8|96)", t) for t in lp["tokens"] if t != "\ufffd") and
          all(ch["text"][o:].startswith(t) or t.startswith("bytes:") for t, o in zip(lp["tokens"], lp["text_offset"])),
          f"completions logprobs: split characters ({''.join(cjk)}) as bytes:\\xNN tokens that rebuild the text")
    r, text = srv.request("POST", "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 30, "seed": 2,
                           "logprobs": True, "top_logprobs": 3, "logit_bias": bias})
    ch = json.loads(text)["choices"][0]
    entries = ch["logprobs"]["content"]
    check(r.status == 200 and b"".join(bytes(e["bytes"]) for e in entries) == ch["message"]["content"].encode() and
          any(e["token"].startswith("bytes:") and len(e["bytes"]) == 1 for e in entries) and
          all(token_bytes(t["token"]) == bytes(t["bytes"]) for e in entries for t in e["top_logprobs"]),
          "chat logprobs: split characters keep their raw bytes, which rebuild the content")


def test_openai_fields(srv):
    """logit_bias and echo work; the fields troupe does not implement, and
    fields it does not know, are 400s naming them."""
    a_id = 3 + ord("A")
    r, text = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 6, "temperature": 0,
                                                      "logit_bias": {str(a_id): 100}})
    check(r.status == 200 and json.loads(text)["choices"][0]["text"] == "AAAAAA", "logit_bias +100 rules greedy")
    _, plain = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 6, "temperature": 0,
                                                       "ignore_eos": True})
    plain = json.loads(plain)["choices"][0]
    r, text = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 6, "temperature": 0,
                                                      "ignore_eos": True, "logit_bias": {}})
    check(r.status == 200 and json.loads(text)["choices"][0]["text"] == plain["text"], "an empty logit_bias changes nothing")
    r2, text2 = srv.request("POST", "/v1/completions",
                            {"prompt": "The", "max_tokens": 3, "seed": 5, "logprobs": 0,
                             "logit_bias": {str(3 + ord("q")): -100, str(3 + ord("A")): 10}})
    check(r2.status == 200 and "q" not in json.loads(text2)["choices"][0]["text"], "logit_bias with sampling")
    r, text = srv.request("POST", "/v1/completions", {"prompt": "The", "max_tokens": 6, "temperature": 0,
                                                      "ignore_eos": True, "echo": True})
    check(r.status == 200 and json.loads(text)["choices"][0]["text"] == "The" + plain["text"],
          "echo: the prompt's text, then the completion's")
    status, pieces, finish, _, done = stream(srv, "/v1/completions", {"prompt": "The", "max_tokens": 6, "temperature": 0,
                                                                      "ignore_eos": True, "echo": True})
    check(status == 200 and done and "".join(pieces) == "The" + plain["text"] and pieces[0].startswith("The"),
          "echo streamed: the prompt's text comes first")
    r, text = srv.request("POST", "/v1/completions", {"prompt": [1, 450], "max_tokens": 2, "echo": True})
    check(r.status == 200, "echo with a prompt of token ids")

    def refused(path, extra, param, code):
        body = {"prompt": "x"} if path == "/v1/completions" else {"messages": [{"role": "user", "content": "x"}]}
        r, text = srv.request("POST", path, dict(body, **extra))
        e = json.loads(text).get("error", {})
        check(r.status == 400 and e.get("param") == param and e.get("code") == code,
              f"{path} {json.dumps(extra)}: 400 naming {param} ({code})" + ("" if r.status == 400 else f", got {r.status}"))

    refused("/v1/completions", {"logit_bias": {"2000": 1}}, "logit_bias", "invalid_value")
    refused("/v1/completions", {"logit_bias": {"5": 101}}, "logit_bias", "invalid_value")
    refused("/v1/completions", {"best_of": 2, "n": 3}, "best_of", "invalid_value")
    refused("/v1/completions", {"suffix": "end"}, "suffix", "unsupported_parameter")
    refused("/v1/chat/completions", {"response_format": {"type": "yaml"}}, "response_format", "invalid_value")
    refused("/v1/chat/completions", {"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools",
            "unsupported_parameter")
    refused("/v1/chat/completions", {"tool_choice": "auto"}, "tool_choice", "invalid_value")
    refused("/v1/chat/completions", {"functions": [{"name": "f"}]}, "functions", "unsupported_parameter")
    refused("/v1/chat/completions", {"function_call": "auto"}, "function_call", "unsupported_parameter")
    refused("/v1/chat/completions", {"n": 129}, "n", "invalid_value")
    refused("/v1/chat/completions", {"echo": True}, "echo", "unknown_parameter")
    r, text = srv.request("POST", "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "store": False,
                           "metadata": {"a": "b"}, "service_tier": "auto", "parallel_tool_calls": False,
                           "response_format": {"type": "text"}, "user": "u"})
    check(r.status == 200, "the optional fields without effect are accepted")


def test_echo_logprobs(srv):
    """echo with logprobs: every prompt token is listed with its logprob (the
    first's null), its bytes rebuild the prompt's text, and the scores are what
    the model predicts there: a one-token completion of the prompt cut before
    token k has, as its first token's alternatives, exactly prompt token k's."""
    ids = [1, 450, 310, 77, 260, 95, 401, 33, 120, 499, 64, 300]
    body = {"prompt": ids, "max_tokens": 5, "temperature": 0, "logprobs": 2, "echo": True, "ignore_eos": True}
    r, text = srv.request("POST", "/v1/completions", body)
    ch = json.loads(text)["choices"][0] if r.status == 200 else {}
    lp = ch.get("logprobs") or {}
    tokens, values, tops = lp.get("tokens", []), lp.get("token_logprobs", []), lp.get("top_logprobs", [])
    joined = b"".join(token_bytes(t) for t in tokens)
    check(r.status == 200 and len(tokens) == len(ids) + 5 and values[0] is None and tops[0] is None and
          all(isinstance(v, float) and v <= 0 for v in values[1:]) and all(len(t) == 2 for t in tops[1:]) and
          joined == ch["text"].encode(),
          f"echo with logprobs: {len(ids)} prompt tokens (the first null) and 5 generated, rebuilding the text"
          + ("" if r.status == 200 else f" (got {r.status} {text})"))
    _, plain = srv.request("POST", "/v1/completions", dict(body, echo=False, logprobs=None))
    check(r.status == 200 and ch["text"].endswith(json.loads(plain)["choices"][0]["text"]) and
          lp["text_offset"] == sorted(lp["text_offset"]),
          "echo with logprobs: the same completion as without, offsets in order")
    worst = 0.0
    for k in (1, 2, 5, 11):
        rk, tk = srv.request("POST", "/v1/completions",
                             {"prompt": ids[:k], "max_tokens": 1, "temperature": 0, "logprobs": 2})
        want = json.loads(tk)["choices"][0]["logprobs"]["top_logprobs"][0] if rk.status == 200 else {}
        got = tops[k] if r.status == 200 else {}
        same = set(want) == set(got)
        worst = max([worst] + [abs(want[t] - got[t]) for t in want if same])
        check(same and worst < 1e-5, f"echo with logprobs: prompt token {k}'s alternatives are those a completion "
              f"of the first {k} tokens predicts ({got} vs {want})")
    # Streamed, and again once its blocks are in the prefix cache: the same.
    r2, text2 = srv.request("POST", "/v1/completions", dict(body, stream=True))
    chunks = [json.loads(e)["choices"][0] for e in sse_events(text2)[:-1]]
    s_lp = [c["logprobs"] for c in chunks if c["logprobs"]]
    check(r2.status == 200 and [t for l in s_lp for t in l["tokens"]] == tokens and
          [v for l in s_lp for v in l["token_logprobs"]] == values and
          [o for l in s_lp for o in l["text_offset"]] == lp["text_offset"],
          "echo with logprobs streamed: the prompt's tokens first, the same values and offsets")
    r3, text3 = srv.request("POST", "/v1/completions", body)
    check(r3.status == 200 and json.loads(text3)["choices"][0]["logprobs"] == lp,
          "echo with logprobs, the prompt cached: every position still computed, the same answer")


def test_tokenize(srv):
    """POST /tokenize and /detokenize (vLLM's shapes): the ids a completion's
    usage counts, the chat template's for messages, ids back to text."""
    prompt = "Permission is hereby granted, free of charge"
    r, text = srv.request("POST", "/tokenize", {"prompt": prompt, "return_token_strs": True})
    t = json.loads(text)
    _, done = srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    check(r.status == 200 and t["count"] == len(t["tokens"]) == json.loads(done)["usage"]["prompt_tokens"] and
          t["max_model_len"] == 512 and len(t["token_strs"]) == t["count"] and t["token_strs"][0] == "<s>",
          "/tokenize: a prompt's ids, as many as a completion's usage counts, with their pieces")
    r, text = srv.request("POST", "/tokenize", {"prompt": prompt, "add_special_tokens": False})
    check(r.status == 200 and json.loads(text)["tokens"] == t["tokens"][1:], "/tokenize: add_special_tokens false drops BOS")
    r, back = srv.request("POST", "/detokenize", {"tokens": t["tokens"]})
    check(r.status == 200 and json.loads(back) == {"prompt": prompt}, "/detokenize: the ids give the text back")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    r, text = srv.request("POST", "/tokenize", {"messages": messages})
    chat = json.loads(text)
    _, done = srv.request("POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
    r2, text2 = srv.request("POST", "/tokenize", {"messages": messages, "add_generation_prompt": False})
    bare = json.loads(text2)
    check(r.status == 200 and chat["count"] == json.loads(done)["usage"]["prompt_tokens"] and
          r2.status == 200 and chat["tokens"][:bare["count"]] == bare["tokens"] and bare["count"] < chat["count"],
          "/tokenize: messages through the chat template, as a chat completion counts them; "
          "add_generation_prompt false leaves the assistant's opening off")
    for path, body, param, code in [
            ("/tokenize", {"prompt": "x", "messages": messages}, "messages", "invalid_value"),
            ("/tokenize", {}, "prompt", "missing_field"),
            ("/tokenize", {"prompt": "x", "add_generation_prompt": True}, "add_generation_prompt", "invalid_value"),
            ("/tokenize", {"prompt": "x", "tools": []}, "tools", "invalid_value"),
            ("/tokenize", {"messages": messages, "tools": {}}, "tools", "invalid_type"),
            ("/tokenize", {"messages": messages, "tools": [{"type": "web"}]}, "tools[0].type", "invalid_value"),
            ("/tokenize", {"messages": messages, "tools": [{"type": "function"}]}, "tools[0].function.name",
             "missing_field"),
            ("/tokenize", {"messages": messages, "tools": [{"type": "function", "function": {"name": 3}}]},
             "tools[0].function.name", "invalid_type"),
            ("/tokenize", {"prompt": 5}, "prompt", "invalid_type"),
            ("/tokenize", {"prompt": "x", "model": "nope"}, "model", "model_not_found"),
            ("/tokenize", {"prompt": "x", "frobnicate": 1}, "frobnicate", "unknown_parameter"),
            ("/detokenize", {"tokens": [1, 10 ** 6]}, "tokens", "invalid_value"),
            ("/detokenize", {"tokens": [-1]}, "tokens", "invalid_value"),
            ("/detokenize", {}, "tokens", "missing_field")]:
        r, text = srv.request("POST", path, body)
        e = json.loads(text).get("error", {})
        check(r.status == 400 and e.get("param") == param and e.get("code") == code,
              f"{path} {json.dumps(body)}: 400 naming {param} ({code})" + ("" if r.status == 400 else f", got {r.status}"))
    r, _ = srv.request("GET", "/tokenize")
    check(r.status == 405, "GET /tokenize: 405")


def test_streaming(srv):
    status, pieces, finish, usage, done = stream(
        srv, "/v1/completions", {"prompt": "This License", "max_tokens": 20, "ignore_eos": True,
                                 "stream_options": {"include_usage": True}})
    check(status == 200 and done and finish == "length", "stream completions: ends with finish_reason and [DONE]")
    check(usage and usage["completion_tokens"] == 20, "stream completions: usage chunk counts 20 tokens")
    check(len(pieces) >= 10, "stream completions: the text arrives in many chunks")
    status, pieces, finish, usage, done = stream(
        srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10,
                                      "ignore_eos": True, "stream_options": {"include_usage": True}})
    check(status == 200 and done and finish == "length" and usage["completion_tokens"] == 10,
          "stream chat: chunks, finish_reason, usage, [DONE]")
    r, text = srv.request("POST", "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": True})
    first = json.loads(sse_events(text)[0])
    check(r.getheader("content-type") == "text/event-stream" and
          first["choices"][0]["delta"].get("role") == "assistant", "stream chat: SSE, first delta names the role")
    # curl, the client most people try first.
    out = subprocess.run(["curl", "-sN", f"http://127.0.0.1:{srv.port}/v1/completions", "-H",
                          "Content-Type: application/json", "-d",
                          json.dumps({"prompt": "Copyright", "max_tokens": 5, "stream": True, "ignore_eos": True})],
                         capture_output=True, text=True, timeout=60)
    events = sse_events(out.stdout)
    check(out.returncode == 0 and events[-1] == "[DONE]" and len(events) >= 3, "curl reads the SSE stream")


def test_node_fetch(srv):
    if NODE is None:
        print("skip  Node fetch: no node on this machine")
        return
    out = subprocess.run([NODE, os.path.join(SOURCE, "sse_fetch.mjs"), f"http://127.0.0.1:{srv.port}"],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "Node's fetch reads both SSE streams: " + (out.stdout + out.stderr).strip()[-300:])


def test_errors(srv):
    def err(method, path, body, status, param=None, code=None, headers=None, what=""):
        r, text = srv.request(method, path, body, headers)
        try:
            e = json.loads(text)["error"]
            shaped = all(k in e for k in ("message", "type", "param", "code")) and e["message"]
        except (ValueError, KeyError, TypeError):
            e, shaped = {}, False
        good = r.status == status and shaped and (param is None or e.get("param") == param) and \
            (code is None or e.get("code") == code)
        check(good, f"{what}: {status}" + ("" if good else f" (got {r.status} {text[:200]})"))

    err("POST", "/v1/completions", "{not json", 400, code="invalid_json", what="malformed JSON")
    err("POST", "/v1/completions", "[1,2]", 400, what="a JSON array body")
    err("POST", "/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, param="max_tokens", what="wrong type")
    err("POST", "/v1/completions", {"prompt": "x", "temperature": -1}, 400, param="temperature", what="temperature < 0")
    err("POST", "/v1/completions", {"model": "gpt-4", "prompt": "x"}, 400, param="model", code="model_not_found",
        what="unknown model")
    err("POST", "/v1/chat/completions", {"messages": []}, 400, param="messages", what="empty messages")
    err("POST", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, what="unknown role")
    err("POST", "/v1/completions", {"max_tokens": 5}, 400, param="prompt", what="missing prompt")
    err("POST", "/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, param="max_tokens", what="max_tokens 0")
    err("POST", "/v1/completions", {"prompt": "x", "max_tokens": 10 ** 6}, 400, what="max_tokens past the context")
    err("POST", "/v1/completions", {"prompt": "word " * 700}, 400, param="prompt", what="prompt over the context")
    err("POST", "/v1/completions", {"prompt": "x", "n": 0}, 400, param="n", what="n 0")
    err("POST", "/v1/completions", {"prompt": "x" * 5000}, 413, what="body over the limit")
    err("GET", "/v1/nothing", None, 404, what="unknown path")
    err("GET", "/v1/completions", None, 405, what="wrong method")
    err("DELETE", "/health/ready", None, 405, what="wrong method on health")
    r, text = srv.request("GET", "/health/live")
    check(r.status == 200, "the server is alive after every bad request")


def test_concurrent_streams(srv, n=256):
    def one(i):
        # (Each endpoint gets its own input field: the other one is an unknown field, a 400.)
        body = {"prompt": f"Request {i}"} if i % 2 else {"messages": [{"role": "user", "content": f"Request {i}"}]}
        return stream(srv, "/v1/completions" if i % 2 else "/v1/chat/completions",
                      dict(body, max_tokens=8 + i % 9, ignore_eos=True, stream_options={"include_usage": True}))

    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    good = sum(1 for i, (st, _, fin, usage, done) in enumerate(results)
               if st == 200 and done and fin == "length" and usage and usage["completion_tokens"] == 8 + i % 9)
    check(good == n, f"{n} concurrent streams all finish with their token counts ({good} did)")
    check(srv.metric("troupe_num_requests_running") == 0, "no request left running after them")


def test_batch_invariance(srv):
    """A greedy request's tokens and logprobs are the same bits alone and beside
    other streams, whatever the step mix and its place in the batch: the CPU
    backend is batch-invariant. Each run has a `user` of its own, so its
    prompt is computed afresh (prefix-cache namespaces), beside the others."""
    body = {"prompt": "Once upon a time there was a little", "max_tokens": 24, "temperature": 0,
            "logprobs": 5, "ignore_eos": True}

    def ask(user):
        r, text = srv.request("POST", "/v1/completions", dict(body, user=user))
        return r.status, (json.loads(text)["choices"][0]["logprobs"] if r.status == 200 else text)

    st, alone = ask("invariance-alone")
    check(st == 200 and len(alone["tokens"]) == 24 and len(alone["top_logprobs"][0]) == 5,
          "batch invariance: the request alone")

    def noise(i):
        return stream(srv, "/v1/completions", {"prompt": "Noise and more " * (1 + i * 7 % 30),
                                               "max_tokens": 8 + i % 24, "ignore_eos": True, "user": f"noise-{i}"})

    runs, same = 4, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        for rep in range(runs):
            others = [pool.submit(noise, rep * 12 + i) for i in range(12)]
            time.sleep(0.01 * rep)  # the others at another stage each time
            st, got = ask(f"invariance-{rep}")
            busy = [f.result() for f in others]
            same += st == 200 and got == alone
            if st != 200 or got != alone:
                print(f"      run {rep}: {got if st != 200 else [a for a in zip(got['token_logprobs'], alone['token_logprobs']) if a[0] != a[1]][:3]}")
            check(all(b[0] == 200 for b in busy), f"batch invariance: run {rep}'s 12 other streams answered")
    check(same == runs, f"batch invariance: the same tokens and logprobs, bit for bit, beside 12 other streams ({same}/{runs} runs)")


def test_disconnect(srv):
    before = srv.metric("troupe_request_success_total", 'finished_reason="abort"')
    s = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps({"prompt": "The", "max_tokens": 500, "ignore_eos": True, "stream": True})
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    s.settimeout(30)
    got = b""
    while got.count(b"data: ") < 3:
        more = s.recv(4096)
        if not more:
            break
        got += more
    check(srv.metric("troupe_kv_cache_usage_perc") > 0, "a live stream holds KV blocks")
    s.close()
    poll(lambda: srv.metric("troupe_kv_cache_usage_perc") == 0 and srv.metric("troupe_num_requests_running") == 0,
         10, 0.02)
    check(srv.metric("troupe_kv_cache_usage_perc") == 0 and srv.metric("troupe_num_requests_running") == 0,
          "a client that disconnects mid-stream frees its KV blocks")
    check(srv.metric("troupe_request_success_total", 'finished_reason="abort"') == before + 1,
          "the disconnect counts as an aborted request")


def test_idle_client(srv):
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
    s.settimeout(10)
    t0 = time.time()
    try:
        data = s.recv(4096)
    except OSError:
        data = b"?"
    check(data == b"" and time.time() - t0 < 9, "a slow client is cut off after the idle timeout")
    s.close()


def test_metrics(srv):
    _, text = srv.request("GET", "/metrics")
    for name in ["time_to_first_token_seconds", "inter_token_latency_seconds",
                 "request_time_per_output_token_seconds", "e2e_request_latency_seconds",
                 "request_queue_time_seconds", "num_requests_running", "num_requests_waiting",
                 "kv_cache_usage_perc", "num_preemptions_total", "num_requests_swapped",
                 "num_swap_outs_total", "prompt_tokens_total",
                 "prefix_cache_queries_total", "prefix_cache_hits_total",
                 "generation_tokens_total", "request_success_total"]:
        check(f"troupe_{name}" in text, f"/metrics has troupe_{name}")
    promtool = shutil.which("promtool")
    if promtool:
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        check(out.returncode == 0, "promtool check metrics passes: " + out.stdout + out.stderr)
    else:
        check(False, "promtool is installed (package prometheus)")


def test_bench(model):
    """`troupe bench` against a zero-cost-executor server: every request
    succeeds and the token totals are the ones asked for."""
    srv = server(model, "engine.executor=zero")
    try:
        out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{srv.port}", "--num-prompts", "40",
                              "--request-rate", "200", "--max-concurrency", "16", "--random-input-len", "12",
                              "--random-output-len", "9", "--goodput", "ttft:60000,tpot:60000", "--seed", "3"],
                             capture_output=True, text=True, timeout=120)
        text = out.stdout
        def field(name):
            return bench_field(text, name)
        check(out.returncode == 0 and field("Successful requests:") == 40, "troupe bench: 40 requests succeed")
        check(field("Total generated tokens:") == 40 * 9, "troupe bench: counts every generated token")
        check(field("Request goodput (req/s):") == field("Request throughput (req/s):"),
              "troupe bench: goodput equals throughput under loose SLOs")
        for name in ("Median TTFT (ms):", "P99 ITL (ms):", "Mean TPOT (ms):", "P99 E2EL (ms):"):
            check(field(name) is not None and field(name) >= 0, f"troupe bench prints {name}")
        out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{srv.port}", "--num-prompts", "12",
                              "--dataset", "sharegpt-like", "--request-rate", "100", "--burstiness", "0.5",
                              "--endpoint", "/v1/chat/completions"], capture_output=True, text=True, timeout=120)
        check(out.returncode == 0 and "Successful requests:                       12" in out.stdout,
              "troupe bench: sharegpt-like chat workload with bursty arrivals")
        out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{srv.port}", "--num-prompts", "10",
                              "--random-input-len", "4", "--random-output-len", "3", "--tenant-weights", "3,1",
                              "--shared-prefix-len", "20"], capture_output=True, text=True, timeout=120)
        check(out.returncode == 0 and re.search(r"tenant-0 \(weight 3, \d+ requests\): median TTFT", out.stdout)
              and "tenant-1 (weight 1," in out.stdout, "troupe bench: per-tenant TTFT with --tenant-weights")
        # The public traces, replayed: BurstGPT (its failed row, 0 response
        # tokens, left out) and Mooncake JSON lines (shared hash ids).
        tmp = tempfile.mkdtemp(prefix="troupe-bench-trace-")
        burst = os.path.join(tmp, "burst.csv")
        with open(burst, "w") as f:
            f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,ChatGPT,30,7,37,Conversation log\n6,ChatGPT,40,0,40,Conversation log\n"
                    "8,GPT-4,20,5,25,API log\n9,GPT-4,25,4,29,API log\n")
        moon = os.path.join(tmp, "moon.jsonl")
        with open(moon, "w") as f:
            for t, n, out_n, ids in ((0, 40, 6, [1, 2, 3]), (300, 36, 3, [1, 2, 4]), (500, 10, 2, [9])):
                f.write(json.dumps({"timestamp": t, "input_length": n, "output_length": out_n, "hash_ids": ids}) + "\n")
        for trace, extra, requests, tokens, what in (
                (burst, ["--time-scale", "0.05"], 3, 16, "BurstGPT, its failed row left out"),
                (burst, ["--max-rows", "2", "--time-scale", "0.05"], 2, 12, "BurstGPT, --max-rows 2"),
                (moon, ["--trace-block-tokens", "16"], 3, 11, "Mooncake JSON lines, blocks of 16 tokens")):
            out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{srv.port}", "--dataset", "trace",
                                  "--trace", trace] + extra, capture_output=True, text=True, timeout=120)
            check(out.returncode == 0 and bench_field(out.stdout, "Successful requests:") == requests
                  and bench_field(out.stdout, "Total generated tokens:") == tokens,
                  f"troupe bench --dataset trace: {what} ({out.stderr.strip()[:120]})")
        shutil.rmtree(tmp, ignore_errors=True)
        out = subprocess.run([TROUPE, "bench", "--dataset", "nope"], capture_output=True, text=True)
        check(out.returncode == 2 and "--dataset" in out.stderr, "troupe bench: a bad flag is a usage error")
    finally:
        srv.stop()


def test_config_errors(model):
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--model", model, "--port", "0",
                          "--set", "scheduler.max_num_seqs=0"], capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    check(out.returncode == 1 and len(lines) == 1 and "scheduler.max_num_seqs" in lines[0],
          "a bad config value stops start-up with one line naming the key: " + out.stderr.strip())
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--set", "server.prot=1"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 1 and "server.prot" in out.stderr, "an unknown config key is named")
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", model, "--scheduling", "lottery"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 1 and "known: fcfs, priority, sjf, vtc, static" in out.stderr,
          "an unknown scheduling policy stops start-up listing the known ones")
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", "/nonexistent"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 1 and "/nonexistent" in out.stderr, "a missing model directory is named")
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", model,
                          "--step-log", "/nonexistent/dir/steps.log"], capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    check(out.returncode == 1 and len(lines) == 1 and "/nonexistent/dir/steps.log: cannot write the step log" in lines[0],
          "an unwritable step log stops start-up with one line: " + out.stderr.strip())


def resize_vocabulary(model, out, vocab_size, head_std=0.0):
    """Copies `model` to `out` with vocab_size rows in its embedding and
    output layer: the first rows kept, new ones N(0, head_std^2) in the
    output layer and zero in the embedding (as models pad their vocabulary
    past the tokenizer's). Returns `out`."""
    shutil.copytree(model, out)
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    old_rows = config["vocab_size"]
    config["vocab_size"] = vocab_size
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    path = os.path.join(out, "model.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    rng = random.Random(17)
    tensors, chunks, offset = {}, [], 0
    for name in sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0]):
        t = dict(header[name])
        begin, end = t["data_offsets"]
        raw = body[begin:end]
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            assert t["dtype"] == "F32" and t["shape"][0] == old_rows
            cols = t["shape"][1]
            raw = raw[:4 * cols * min(old_rows, vocab_size)]
            head = name == "lm_head.weight" or "lm_head.weight" not in header
            extra = [rng.gauss(0.0, head_std) if head else 0.0 for _ in range(max(0, vocab_size - old_rows) * cols)]
            raw += struct.pack(f"<{len(extra)}f", *extra)
            t["shape"] = [vocab_size, cols]
        t["data_offsets"] = [offset, offset + len(raw)]
        offset += len(raw)
        tensors[name] = t
        chunks.append(raw)
    if "__metadata__" in header:
        tensors["__metadata__"] = header["__metadata__"]
    text = json.dumps(tensors).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    return out


def test_padded_vocabulary(model, tmp):
    """Rows past the tokenizer's pieces are never sampled: every streamed
    token has text, though the padding holds the largest logits."""
    padded = resize_vocabulary(model, os.path.join(tmp, "padded"), 2300, head_std=5.0)
    bodies = ({"temperature": 0}, {"temperature": 1.0, "seed": 3}, {"temperature": 0.8, "top_k": 40, "seed": 4},
              {"temperature": 1.0, "top_p": 0.9, "seed": 5})
    for executor in ("cpu", "zero"):
        srv = server(padded, "engine.threads=2", "engine.executor=" + executor)
        try:
            for body in bodies if executor == "cpu" else bodies[:1]:
                r, text = srv.request("POST", "/v1/completions",
                                      dict(body, prompt="This License", max_tokens=24, ignore_eos=True, stream=True,
                                           logprobs=2))
                tokens, tops = [], []
                for e in sse_events(text)[:-1]:
                    for ch in json.loads(e)["choices"]:
                        lp = ch.get("logprobs") or {}
                        tokens += lp.get("tokens", [])
                        tops += [k for top in lp.get("top_logprobs") or [] for k in top]
                check(r.status == 200 and len(tokens) == 24 and all(tokens) and all(tops),
                      f"padded vocabulary, {executor} executor, {body}: each of 24 streamed tokens and its "
                      f"alternatives has text: {tokens}")
        finally:
            srv.stop()
    out = subprocess.run([TROUPE, "generate", "--model", padded, "--prompt", "This License", "--max-tokens", "24",
                          "--temperature", "0", "--ignore-eos", "--no-huge-pages", "--threads", "2"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0 and len(out.stdout.strip()) >= 10 and "decode: 24 tokens" in out.stderr,
          "padded vocabulary: troupe generate writes text for its 24 tokens: " + repr(out.stdout))
    # More pieces than the model has rows: refused at start-up, naming both.
    fewer = resize_vocabulary(model, os.path.join(tmp, "fewer-rows"), 1000)
    try:
        out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--port", "0", "--model", fewer],
                             capture_output=True, text=True, timeout=30)
        rc, err = out.returncode, out.stderr.strip()
    except subprocess.TimeoutExpired:
        rc, err = None, "it served"
    lines = err.splitlines()
    check(rc == 1 and len(lines) == 1 and "2000 tokens, more than the model's vocab_size 1000" in lines[0],
          "a tokenizer with more pieces than the model's rows stops start-up with one line: " + err)


def test_oversized_prompts(model):
    """16 concurrent chat requests of 1,000,000 characters each get their 400
    without being tokenized whole (the tokenizer stops counting once the
    prompt is sure to pass the limit), and a big prompt tokenized whole does
    not hold up small requests (big prompts use their own share of the
    tokenizers). Before: the 400s took up to 1.5 s each and a small request
    2.8 s, against 5 ms idle. Both are judged by counts, not by the clock: the
    tokens the 400 says it counted, and how many small requests are answered
    while one big prompt is tokenized."""
    srv = server(model, "actors.tokenizers=2")
    try:
        def small():
            r, _ = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2})
            return r.status

        big = "This License " * 76924  # 1,000,012 characters

        # One big prompt tokenized whole (about 1 s of one core) beside a
        # stream of small requests, one after another: on their own share of
        # the tokenizers they keep being answered (about 200 in that time);
        # queued behind it, none would be until it is done. Its count is the
        # whole prompt's, for the 400s below.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(srv.request, "POST", "/tokenize", {"prompt": big})
            answered = []
            while not fut.done():
                answered.append(small())
            r, text = fut.result()
        whole = json.loads(text)["count"] if r.status == 200 else 0
        check(r.status == 200 and all(st == 200 for st in answered) and len(answered) >= 10,
              f"oversized prompts: small requests are answered while a big prompt is tokenized whole "
              f"({len(answered)} of them, 10 at least)")

        def flood(i):
            r, text = srv.request("POST", "/v1/chat/completions",
                                  {"messages": [{"role": "user", "content": big}], "max_tokens": 2})
            return r.status, json.loads(text).get("error", {}).get("message", "")

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            floods = [pool.submit(flood, i) for i in range(16)]
            during = []
            while not all(f.done() for f in floods):
                during.append(small())
            results = [f.result() for f in floods]
        counted = [int(m.group(1)) if (m := re.search(r"the prompt has at least (\d+) tokens", msg)) else -1
                   for _, msg in results]
        check(all(st == 400 and "context" in msg for st, msg in results) and whole > 100000 and
              all(0 < n <= whole // 10 for n in counted),
              f"oversized prompts: a 400 after counting under a tenth of the prompt's {whole} tokens "
              f"(counted {sorted(set(counted))}; {results[0][1]!r})")
        check(all(st == 200 for st in during), f"oversized prompts: small requests meanwhile answered ({len(during)})")
    finally:
        srv.stop()


def test_stall(model):
    """/health/ready turns 503 while work is queued and no step finishes; work
    that just reached an idle server is not a stall (the clock starts when it
    arrives, not at the last step, which may be long ago). Each probe's
    verdict is taken against the time the request was sent, so a loaded
    machine can only make a probe later, never turn a verdict."""
    srv = server(model, "engine.executor=zero", "engine.zero_step_us=3000000", "server.stall_timeout_s=1")
    try:
        time.sleep(1.2)  # idle longer than the stall timeout: the last "progress" is start-up
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            sent = time.monotonic()
            fut = pool.submit(srv.request, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
            probes = []  # (seconds since sent when the probe's answer came back, status, body)
            while not fut.done():
                r, text = srv.request("GET", "/health/ready")
                probes.append((time.monotonic() - sent, r.status, json.loads(text)["status"]))
                time.sleep(0.05)
            fut.result(timeout=60)
        # A probe answered under 1 s after the request was sent was asked under
        # 1 s after the request arrived: the step (3 s) has not stalled yet.
        early = [p for p in probes if p[0] < 1.0]
        check(early and all(st == 200 for _, st, _ in early),
              f"work just arrived on an idle server is not a stall ({early[:3]})")
        check(any(st == 503 and what == "stalled" for _, st, what in probes),
              f"readiness is 503 (stalled) while a step makes no progress ({probes[-3:]})")
        r, _ = srv.request("GET", "/health/ready")
        check(r.status == 200, "readiness recovers once the step finishes")
    finally:
        srv.stop()


def test_prefix_cache(srv):
    """A shared system prompt is computed once: the second request's blocks
    come from the prefix cache (troupe_prefix_cache_hits_total)."""
    system = "You are a careful assistant who answers in plain words. " * 6
    before = srv.metric("troupe_prefix_cache_hits_total")
    for q in ("What is a licence?", "What is a warranty?"):
        r, _ = srv.request("POST", "/v1/chat/completions", {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}], "max_tokens": 2})
        check(r.status == 200, "chat with a shared system prompt")
    check(srv.metric("troupe_prefix_cache_hits_total") - before >= 3,
          "the second request finds the shared system prompt's blocks in the prefix cache")


def test_policies(model):
    """Every built-in policy serves; so does the out-of-tree example by path."""
    names = ["vtc", "static"]
    if os.environ.get("EXAMPLE_POLICY"):
        names.append(os.environ["EXAMPLE_POLICY"])
    for name in names:
        srv = server(model, f"scheduler.policy={name}", "scheduler.eviction=lfu")
        try:
            status, pieces, finish, usage, done = stream(
                srv, "/v1/completions", {"prompt": "Hello", "max_tokens": 5, "ignore_eos": True,
                                         "stream_options": {"include_usage": True}})
            check(status == 200 and done and usage["completion_tokens"] == 5,
                  f"serving with scheduling policy {os.path.basename(name)}")
        finally:
            srv.stop()


def test_routing(model):
    """Four replicas behind the router: consistent_hash keeps a session on
    one replica (x-session-id, else user, else the conversation's opening)
    and spreads sessions; round_robin takes the replicas in turn; every
    response names its replica."""
    def replica_of(srv, body, headers=None):
        r, text = srv.request("POST", "/v1/chat/completions", body, headers)
        check(r.status == 200, f"routed request served ({r.status}: {text[:80]})")
        return r.getheader("x-troupe-replica")

    srv = server(model, "engine.replicas=4", "router.policy=consistent_hash", "engine.threads=1")
    try:
        check("routing: consistent_hash" in "".join(srv.log), "the start-up line names the routing policy")
        homes = set()
        for s in range(12):
            seen = {replica_of(srv, {"messages": [{"role": "user", "content": f"turn {t}"}], "max_tokens": 1},
                               {"x-session-id": f"session-{s}"}) for t in range(4)}
            check(len(seen) == 1, f"session-{s}: every turn on one replica ({sorted(seen)})")
            homes |= seen
        check(len(homes) >= 3, f"12 sessions spread over the replicas ({sorted(homes)})")
        users = {replica_of(srv, {"messages": [{"role": "user", "content": f"q{t}"}], "max_tokens": 1, "user": "alice"})
                 for t in range(4)}
        check(len(users) == 1, "without x-session-id, the user keeps the session")
        opening = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me of licences."}]
        turns = {replica_of(srv, {"messages": opening + [{"role": "assistant", "content": "Sure."},
                                                         {"role": "user", "content": f"more {t}"}][:2 * (t > 0)],
                                  "max_tokens": 1}) for t in range(3)}
        check(len(turns) == 1, "without either, the conversation's opening keeps it")
        bare = [{"role": "user", "content": "Who may copy it?"}]
        turns = {replica_of(srv, {"messages": bare + [{"role": "assistant", "content": "Anyone."},
                                                      {"role": "user", "content": f"and {t}?"}][:2 * (t > 0)],
                                  "max_tokens": 1}) for t in range(3)}
        check(len(turns) == 1, "with no system message too (the opening is up to the first user message)")
    finally:
        srv.stop()
    srv = server(model, "engine.replicas=4", "engine.threads=1")
    try:
        got = [replica_of(srv, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
                          {"x-session-id": "same"}) for _ in range(8)]
        check(sorted(set(got)) == ["0", "1", "2", "3"], f"round_robin (the default) spreads even one session ({got})")
    finally:
        srv.stop()
    # prefix_affinity over two CPU devices: a prompt goes where its prefix is
    # cached. So with the out-of-tree example, which declares that it reads
    # cached blocks and takes the devices in turn when nothing is cached.
    policies = ["prefix_affinity"]
    if os.environ.get("EXAMPLE_ROUTING_POLICY"):
        policies.append(os.environ["EXAMPLE_ROUTING_POLICY"])
    for policy in policies:
        srv = server(model, 'engine.devices=["cpu", "cpu"]', f"router.policy={policy}", "engine.threads=1")
        try:
            shared = "This License applies to any program or other work which contains a notice. " * 6
            first = replica_of(srv, {"messages": [{"role": "user", "content": shared + "One?"}], "max_tokens": 1})
            later = {replica_of(srv, {"messages": [{"role": "user", "content": shared + f"Two {i}?"}], "max_tokens": 1})
                     for i in range(4)}
            check(later == {first}, f"{os.path.basename(policy)}: the same long prefix finds its device again "
                                    f"({first}, {sorted(later)})")
        finally:
            srv.stop()
    # Two CPU devices: each its own executor, KV cache and memory manager.
    srv = server(model, 'engine.devices=["cpu", "cpu"]', "engine.threads=1")
    try:
        check("per device on 2 devices, 2 replicas" in "".join(srv.log), "two CPU devices, a replica each")
        got = {replica_of(srv, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}) for _ in range(4)}
        check(got == {"0", "1"}, f"both devices serve ({sorted(got)})")
        _, text = srv.request("GET", "/metrics")
        check('device="cpu:0"' in text and 'device="cpu:1"' in text, "each device has its own metrics")
    finally:
        srv.stop()


def test_kv_pressure(model):
    """Far more streams than KV blocks, sharing a prefix: leases run dry and
    refill, requests preempt each other, and every one still finishes."""
    log = os.path.join(os.path.dirname(model), "pressure.steps")
    srv = server(model, "engine.executor=zero", "scheduler.kv_memory=2MiB", "scheduler.max_num_seqs=256",
                 "engine.step_log=" + log)
    try:
        out = subprocess.run([TROUPE, "bench", "--url", f"http://127.0.0.1:{srv.port}", "--num-prompts", "300",
                              "--max-concurrency", "150", "--random-input-len", "40", "--random-output-len", "64",
                              "--shared-prefix-len", "32"], capture_output=True, text=True, timeout=120)
        check(out.returncode == 0 and re.search(r"Successful requests:\s+300", out.stdout),
              "300 streams on 128 KV blocks all finish: " + out.stdout[-200:].replace("\n", " "))
        check(srv.metric("troupe_num_preemptions_total") > 0, "... with preemptions")
        check(srv.metric("troupe_kv_cache_usage_perc") == 0 and srv.metric("troupe_num_requests_running") == 0,
              "... and nothing held afterwards")
    finally:
        srv.stop()
    check_replay(log, "replaying the step log of 300 streams preempting each other on 128 blocks (lease refills and returns)")


def test_swap(model):
    """Preemption by swap on the real CPU model: 8 greedy streams on 16 KV
    blocks (they need 32) swap each other out to host memory and back, and
    each gets the text it gets alone."""
    log = os.path.join(os.path.dirname(model), "swap.steps")
    srv = server(model, "scheduler.kv_memory=256KiB", "scheduler.preemption_mode=swap",
                 "scheduler.swap_space=4MiB", "scheduler.enable_prefix_caching=false", "engine.step_log=" + log,
                 "server.admin_api=true")
    try:
        prompts = [f"Permission number {i} is hereby granted" for i in range(8)]
        def complete(p):
            r, text = srv.request("POST", "/v1/completions", {"prompt": p, "max_tokens": 48, "temperature": 0,
                                                              "ignore_eos": True})
            body = json.loads(text)
            return r.status, body["choices"][0]["text"], body["usage"]["completion_tokens"]
        # All 8 queued before the first step, however slowly the clients
        # come (under load they came one by one, and none had to swap):
        # the replica holds still until they are there.
        srv.request("POST", "/admin/replicas/0/hang")
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(complete, p) for p in prompts]
            wait_for("the 8 requests queue at the held replica", lambda: srv.metric("troupe_num_requests_waiting") == 8)
            srv.request("POST", "/admin/replicas/0/recover")
            together = [f.result() for f in futures]
        check(all(st == 200 and n == 48 for st, _, n in together), "8 streams on 16 KV blocks all finish")
        check(srv.metric("troupe_num_swap_outs_total") > 0, "... swapping KV out to host memory")
        alone = [complete(p) for p in prompts]
        check([t for _, t, _ in together] == [t for _, t, _ in alone], "... with the text each gets alone")
        check(srv.metric("troupe_num_requests_swapped") == 0 and srv.metric("troupe_kv_cache_usage_perc") == 0,
              "... and nothing held afterwards")
    finally:
        srv.stop()
    check_replay(log, "replaying the step log of 8 streams swapping on 16 KV blocks")
    # The simulator's calibrated cost model, fitted to the steps the server logged.
    out = subprocess.run([TROUPE, "sim", os.path.join(SOURCE, "..", "..", "config", "sim", "chat.toml"),
                          "--set", "cost.kind=calibrated", "--set", "cost.step_log=" + log,
                          "--set", "sim.num_requests=50"], capture_output=True, text=True, timeout=120)
    check(out.returncode == 0 and "calibrated:" in out.stderr, "troupe sim fits its cost model to a step log: " +
          out.stderr.strip()[-200:])
    out = subprocess.run([TROUPE, "serve", "--config", CONFIG, "--model", model, "--port", "0",
                          "--set", "scheduler.preemption_mode=swap", "--set", "scheduler.swap_space=1KiB"],
                         capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    check(out.returncode == 1 and len(lines) == 1 and "scheduler.swap_space: 1024 bytes hold 0 KV blocks" in lines[0],
          "swap space too small for a block stops start-up with one line: " + out.stderr.strip())


def test_queue_full(model):
    """429 with Retry-After once the bounded waiting queue is full."""
    srv = server(model, "engine.executor=zero", "engine.zero_step_us=100000", "scheduler.max_num_seqs=1",
                 "scheduler.max_waiting_requests=1")
    try:
        body = {"prompt": "x", "max_tokens": 5, "ignore_eos": True}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(srv.request, "POST", "/v1/completions", body)
            poll(lambda: srv.metric("troupe_num_requests_running") > 0, 10, 0.01)
            second = pool.submit(srv.request, "POST", "/v1/completions", body)
            poll(lambda: srv.metric("troupe_num_requests_waiting") > 0, 10, 0.01)
            r, text = srv.request("POST", "/v1/completions", body)
            check(r.status == 429 and r.getheader("retry-after") == "1" and json.loads(text)["error"]["message"],
                  f"a full queue answers 429 with Retry-After (got {r.status})")
            check(first.result(timeout=60)[0].status == 200 and second.result(timeout=60)[0].status == 200,
                  "the queued requests still finish")
    finally:
        srv.stop()


def test_drain(model):
    # A zero-cost executor with 2 ms steps: the stream outlasts the checks.
    srv = server(model, "server.drain_timeout_s=30", "engine.executor=zero", "engine.zero_step_us=2000")
    results = {}

    def long_stream():
        results["s"] = stream(srv, "/v1/completions", {"prompt": "The", "max_tokens": 500, "ignore_eos": True})

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(long_stream)
        poll(lambda: srv.metric("troupe_num_requests_running") > 0, 10, 0.01)
        srv.proc.send_signal(signal.SIGTERM)
        # The signal is taken by the main thread's sigwait, whenever the
        # machine runs it: wait for readiness to turn (the stream lasts 1 s).
        seen = []
        poll(lambda: seen.append(srv.request("GET", "/health/ready")[0].status) or seen[-1] == 503, 10, 0.01)
        ready_status = seen[-1]
        r, text = srv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
        new_status = r.status
        fut.result(timeout=120)
    rc = srv.proc.wait(timeout=60)
    status, pieces, finish, usage, done = results["s"]
    check(status == 200 and done and finish == "length", "SIGTERM: the in-flight stream finishes")
    check(ready_status == 503, f"SIGTERM: readiness turns 503 (got {ready_status})")
    check(new_status == 503, f"SIGTERM: a new request gets 503 (got {new_status})")
    check(rc == 0, f"SIGTERM: the process exits 0 (got {rc})")


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-serve-test-")
    try:
        model = make_tiny(tmp)
        main_log = os.path.join(tmp, "main.steps")
        srv = server(model, "server.max_body_bytes=4096", "server.idle_timeout_s=1",
                     "scheduler.max_model_len=512", "engine.threads=2", "engine.step_log=" + main_log)
        try:
            test_basics(srv)
            test_non_streaming(srv)
            test_logprobs_shape(srv)
            test_split_characters(srv)
            test_openai_fields(srv)
            test_echo_logprobs(srv)
            test_tokenize(srv)
            test_streaming(srv)
            test_node_fetch(srv)
            test_errors(srv)
            test_concurrent_streams(srv)
            test_batch_invariance(srv)
            test_disconnect(srv)
            test_idle_client(srv)
            test_prefix_cache(srv)
            for user in ("alice", "bob", "carol", "dave", "erin", "frank"):  # tenants: 64-bit hashes in the step log
                srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "user": user})
            test_metrics(srv)
        finally:
            rc = srv.stop()
            check(rc == 0, f"the server stops on SIGTERM with exit 0 (got {rc})")
        check_replay(main_log, "replaying the step log of the tests above (streams, disconnects, errors, prefix hits)")
        test_bench(model)
        test_config_errors(model)
        test_padded_vocabulary(model, tmp)
        test_oversized_prompts(model)
        test_queue_full(model)
        test_kv_pressure(model)
        test_swap(model)
        test_policies(model)
        test_routing(model)
        test_stall(model)
        test_drain(model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
