#!/usr/bin/env python3
"""A model's generation_config.json defaults, as vLLM applies them: its
max_new_tokens is a request's max_tokens when it gives none (else the rest
of the context), and its min_p and repetition_penalty apply where a
request leaves them unset. Two servers of the tiny model, one with those
defaults: a request to it equals one to the other that names the same
values, and names of its own override them."""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_tiny, request, server, summary, use_troupe  # noqa: E402

use_troupe(sys.argv[1])
DEFAULTS = {"max_new_tokens": 5, "repetition_penalty": 1.5, "min_p": 0.3}


def completion(port, **body):
    r, text = request(port, "POST", "/v1/completions", dict({"prompt": "Once upon a time"}, **body))
    check(r.status == 200, f"a completion answers 200 ({r.status} {text[:120]})")
    return json.loads(text) if r.status == 200 else {"choices": [{}], "usage": {}}


def main():
    tmp = tempfile.mkdtemp(prefix="troupe-gen-defaults-")
    try:
        plain = make_tiny(tmp)
        tuned = os.path.join(tmp, "tuned")
        shutil.copytree(plain, tuned)
        path = os.path.join(tuned, "generation_config.json")
        gen = json.load(open(path)) if os.path.exists(path) else {}
        json.dump(dict(gen, **DEFAULTS), open(path, "w"))
        a, b = server(plain), server(tuned)
        try:
            out = completion(b.port)
            check(out["usage"].get("completion_tokens") == 5 and out["choices"][0].get("finish_reason") == "length",
                  f"no max_tokens: max_new_tokens' 5 ({out['usage']})")
            out = completion(b.port, max_tokens=3)
            check(out["usage"].get("completion_tokens") == 3, f"max_tokens 3 overrides it ({out['usage']})")
            r, text = request(b.port, "POST", "/v1/chat/completions",
                              {"messages": [{"role": "user", "content": "Hi"}]})
            usage = json.loads(text).get("usage", {}) if r.status == 200 else {}
            check(usage.get("completion_tokens") == 5, f"chat without max_tokens: 5 too ({r.status} {usage})")
            greedy = {"max_tokens": 32, "temperature": 0}
            base = completion(a.port, **greedy)["choices"][0].get("text")
            named = completion(a.port, repetition_penalty=1.5, **greedy)["choices"][0].get("text")
            check(base != named, "(the penalty changes this greedy completion: the comparison below means something)")
            check(completion(b.port, **greedy)["choices"][0].get("text") == named,
                  "repetition_penalty's default applies: as if the request named 1.5")
            check(completion(b.port, repetition_penalty=1.0, **greedy)["choices"][0].get("text") == base,
                  "a request's own repetition_penalty overrides the default")
            sampled = {"max_tokens": 32, "temperature": 1.0, "seed": 7, "repetition_penalty": 1.0}
            check(completion(a.port, **sampled)["choices"][0].get("text") !=
                  completion(a.port, min_p=0.3, **sampled)["choices"][0].get("text"),
                  "(min_p 0.3 changes this sampled completion)")
            check(completion(b.port, **sampled)["choices"][0].get("text") ==
                  completion(a.port, min_p=0.3, **sampled)["choices"][0].get("text"),
                  "min_p's default applies: as if the request named 0.3")
        finally:
            for s in (a, b):
                check(s.stop() == 0, "the server stops cleanly")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
