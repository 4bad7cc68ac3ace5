#!/usr/bin/env python3
"""n > 1 and best_of through the official openai npm client, on random
weights: n choices share their prompt's KV blocks at the replica (a fork
group; troupe_prompt_tokens_forked_total counts the prompt tokens not
computed again), and greedy choices read through those shared blocks equal a
request alone; each choice has its own seed stream (choice 0 keeps the
request's seed, so it answers as n = 1 does, and a repeat answers the same);
usage counts the prompt once; streamed choices carry their index (the SDK's
ChatCompletionStream gathers them) and end with one finish each, one usage
chunk and one [DONE]; best_of returns the n of its candidates with the
highest mean token logprob, best first; the KV blocks all come back, also
after a client leaves mid-stream; bad n / best_of are 400s.

Exits 77 (SKIP) without tests/tools/node_modules (openai) or node."""

import json
import os
import socket
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, need_npm, sdk, server, summary, use_troupe, wait_for  # noqa: E402

need_npm("openai")

use_troupe(sys.argv[1])
BLOCK = 16
# 53 prompt tokens or so: three whole blocks before the last token's.
TEXT = ("The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun, "
        "and the birds sing in the tall green trees by the old stone wall of the quiet farm.")


def texts(r):
    return [c["content"] if "content" in c else c["text"] for c in r.get("choices", [])]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny(tmp)
        srv = server(model, "engine.threads=1", f"scheduler.block_size={BLOCK}")
        base = f"http://127.0.0.1:{srv.port}"
        try:
            msgs = [{"role": "user", "content": TEXT}]
            greedy = {"model": "tiny", "messages": msgs, "max_tokens": 12, "temperature": 0}
            seeded = {"model": "tiny", "messages": msgs, "max_tokens": 10, "temperature": 1.0, "seed": 7,
                      "ignore_eos": True}
            forked0 = srv.metric("troupe_prompt_tokens_forked_total")
            r = sdk(base, [{"op": "chat_n", "body": greedy}, {"op": "chat_n", "body": dict(greedy, n=3)}])
            one, three = r[0], r[1]
            p = one["usage"]["prompt_tokens"]
            check(one.get("ok") and three.get("ok") and [c["index"] for c in three["choices"]] == [0, 1, 2],
                  f"n = 3: three choices, indexed 0 to 2 ({str(three)[:200]})")
            check(texts(three) == texts(one) * 3,
                  f"greedy choices, two of them read through shared KV blocks, equal the request alone "
                  f"({texts(three)} vs {texts(one)})")
            check(three["usage"]["prompt_tokens"] == p and
                  three["usage"]["completion_tokens"] == 3 * one["usage"]["completion_tokens"],
                  f"usage counts the prompt once and every choice's tokens ({three['usage']} vs {one['usage']})")
            shared = 2 * ((p - 1) // BLOCK) * BLOCK
            check(p > 2 * BLOCK and srv.metric("troupe_prompt_tokens_forked_total") - forked0 == shared,
                  f"the other two choices shared the prompt's whole blocks: {shared} prompt tokens not computed "
                  f"again (troupe_prompt_tokens_forked_total)")

            r = sdk(base, [{"op": "chat_n", "body": seeded}, {"op": "chat_n", "body": dict(seeded, n=3)},
                           {"op": "chat_n", "body": dict(seeded, n=3)},
                           {"op": "chat_n_stream", "body": dict(seeded, n=3, stream=True,
                                                                stream_options={"include_usage": True})}])
            alone, a, b, streamed = r
            check(texts(a)[0] == texts(alone)[0], "choice 0 keeps the request's seed: it answers as n = 1 does")
            check(len(set(texts(a))) == 3, f"each choice has its own seed stream: three different answers ({texts(a)})")
            check(texts(a) == texts(b), "the same seed, the same three answers")
            check(streamed.get("ok") and texts(streamed) == texts(a) and streamed["indexes"] == [0, 1, 2] and
                  streamed["usage"] == a["usage"],
                  f"streamed through ChatCompletionStream: the same choices, each index, one usage "
                  f"({str(streamed)[:200]})")

            # Completions: n, best_of, streamed.
            prompt = {"model": "tiny", "prompt": TEXT, "max_tokens": 6, "seed": 11, "temperature": 1.0,
                      "ignore_eos": True, "logprobs": 0}
            r = sdk(base, [{"op": "completions", "body": dict(prompt, n=4)},
                           {"op": "completions", "body": dict(prompt, n=2, best_of=4)},
                           {"op": "completions_stream", "body": dict(prompt, n=2, stream_options={"include_usage": True})},
                           {"op": "completions", "body": dict(prompt, n=2)}])
            four, best, cstream, two = r
            mean = [sum(c["token_logprobs"]) / len(c["token_logprobs"]) for c in four["choices"]]
            ranked = sorted(range(4), key=lambda i: -mean[i])[:2]
            check(best.get("ok") and [c["text"] for c in best["choices"]] == [four["choices"][i]["text"] for i in ranked]
                  and [c["index"] for c in best["choices"]] == [0, 1],
                  f"best_of 4: the 2 candidates with the highest mean logprob, best first (means {mean})")
            check(best["usage"]["completion_tokens"] == 4 * 6 and best["usage"]["prompt_tokens"] ==
                  four["usage"]["prompt_tokens"], f"best_of's usage counts every candidate ({best['usage']})")
            check(cstream.get("ok") and [cstream["texts"].get(str(i)) for i in range(2)] == [c["text"] for c in two["choices"]]
                  and all(len(cstream["finishes"].get(str(i), [])) == 1 for i in range(2)) and
                  cstream["usage"] == two["usage"],
                  f"streamed completions: each index's text and one finish each, one usage ({str(cstream)[:200]})")

            # The judge of the shared blocks: the same choices computed apart.
            # echo with logprobs scores the prompt, so no choice shares
            # another's KV; the seeds are the same, so any difference in the
            # KV a shared block gives would change the logprobs.
            forked1 = srv.metric("troupe_prompt_tokens_forked_total")
            r = sdk(base, [{"op": "completions", "body": dict(prompt, n=3)},
                           {"op": "completions", "body": dict(prompt, n=3, echo=True)}])
            forked2 = srv.metric("troupe_prompt_tokens_forked_total")
            apart = r[1]
            check(forked2 - forked1 == 2 * ((r[0]["usage"]["prompt_tokens"] - 1) // BLOCK) * BLOCK,
                  "completions n = 3 shares the prompt's blocks; with echo and logprobs it does not")
            check(r[0].get("ok") and apart.get("ok") and
                  [TEXT + c["text"] for c in r[0]["choices"]] == [c["text"] for c in apart["choices"]] and
                  [c["token_logprobs"] for c in r[0]["choices"]] ==
                  [c["token_logprobs"][-6:] for c in apart["choices"]],
                  "choices that shared the prompt's KV blocks sample the same tokens with the same logprobs as "
                  "choices that computed the prompt each")

            # Bad n and best_of.
            bad = sdk(base, [{"op": "completions", "body": dict(prompt, n=0)},
                             {"op": "completions", "body": dict(prompt, n=129)},
                             {"op": "completions", "body": dict(prompt, n=3, best_of=2)},
                             {"op": "completions_stream", "body": dict(prompt, n=1, best_of=2)}])
            for b, param in zip(bad, ["n", "n", "best_of", "best_of"]):
                check(not b["ok"] and b["status"] == 400 and (b.get("body") or {}).get("param") == param,
                      f"400 naming {param} ({b.get('error')})")

            # A client that leaves mid-stream: every choice's blocks come back.
            with socket.create_connection(("127.0.0.1", srv.port)) as s:
                body = json.dumps(dict(seeded, n=3, max_tokens=400, stream=True)).encode()
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                got = b""
                while got.count(b"data: ") < 8:
                    got += s.recv(4096)
            wait_for("after a client left mid-stream, no request runs and no KV block is held",
                     lambda: srv.metric("troupe_num_requests_running") == 0 and
                     srv.metric("troupe_kv_cache_usage_perc") == 0)
        finally:
            srv.stop()


main()
sys.exit(summary())
