#!/usr/bin/env python3
"""Reasoning models: Qwen3's real tokenizer and chat template (`make-model
--small --tokenizer`): a <think> block in the answer (random weights open
one here under a logit_bias on the <think> token) comes back as
reasoning_content, a guided_regex holds the answer after the block, streamed as reasoning_content deltas that join to the
same text (the official openai SDK reads both); chat_template_kwargs
{"enable_thinking": false} reaches the template; a template whose
generation prompt opens the block (DeepSeek-R1's) makes the answer start
inside it.

Exits 77 (SKIP) without tests/tools/node_modules or node."""

import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from troupe_harness import check, make_qwen3, need_npm, sdk, server, stream, summary, use_troupe  # noqa: E402

need_npm("openai")
use_troupe(sys.argv[1])

ASK = [{"role": "user", "content": "What is 2 + 2?"}]


def tokens_of(answer):
    """An unstreamed chat answer's tokens and their logprobs (logprobs: true)."""
    content = answer["choices"][0]["logprobs"]["content"]
    return [c["token"] for c in content], [c["logprob"] for c in content]


def test_budget(srv):
    """A thinking budget (the prompt opened the block): after exactly that
    many tokens, </think> is forced, with logprob 0; the tokens before it
    are the ones the request draws without a budget. The Responses API's
    reasoning.effort low (1,024 tokens) and the Messages API's
    thinking.budget_tokens give what thinking_token_budget gives."""
    base = dict(messages=ASK, seed=4, max_tokens=24, logprobs=True)
    free = json.loads(srv.request("POST", "/v1/chat/completions", base)[1])
    r, t = srv.request("POST", "/v1/chat/completions", dict(base, thinking_token_budget=6))
    spent = json.loads(t)
    toks, lps = tokens_of(spent)
    free_toks, _ = tokens_of(free)
    m = spent["choices"][0]["message"]
    check(r.status == 200 and toks[6] == "</think>" and lps[6] == 0 and "</think>" not in free_toks[:7] and
          toks[:6] == free_toks[:6] and m["reasoning_content"] == "".join(toks[:6]) and
          m["content"] == "".join(toks[7:]),
          f"thinking_token_budget 6: </think> is the 7th token, logprob 0; the 6 before it are the unbudgeted "
          f"request's; the rest is content ({toks[:8]}; without a budget {free_toks[:8]})")
    rr, text = srv.request("POST", "/v1/chat/completions", dict(base, thinking_token_budget=6, stream=True,
                                                                logprobs=False))
    chunks = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
    joined = ["".join(c["choices"][0]["delta"].get(k) or "" for c in chunks if c["choices"])
              for k in ("reasoning_content", "content")]
    check(joined == [m["reasoning_content"], m["content"]], "thinking_token_budget: streamed equals unstreamed")
    r, t = srv.request("POST", "/v1/chat/completions", dict(base, thinking_token_budget=0))
    check(r.status == 200 and tokens_of(json.loads(t))[0][0] == "</think>",
          "thinking_token_budget 0: the first token is </think>")
    for bad in (-1, 1.5, "4"):
        r, t = srv.request("POST", "/v1/chat/completions", dict(base, thinking_token_budget=bad))
        check(r.status == 400 and json.loads(t)["error"]["param"] == "thinking_token_budget",
              f"thinking_token_budget {bad!r}: 400 naming it")

    greedy = dict(messages=ASK, temperature=0, max_tokens=1100, thinking_token_budget=1024, logprobs=True)
    chat = json.loads(srv.request("POST", "/v1/chat/completions", greedy)[1])
    toks, _ = tokens_of(chat)
    want = chat["choices"][0]["message"]
    anthropic_body = {"model": "qwen3", "max_tokens": 40, "temperature": 0, "messages": ASK,
                      "thinking": {"type": "enabled", "budget_tokens": 6}}
    res = sdk(f"http://127.0.0.1:{srv.port}", [
        {"op": "responses", "body": {"input": ASK, "temperature": 0, "max_output_tokens": 1100,
                                     "reasoning": {"effort": "low"}}},
        {"op": "messages", "body": anthropic_body},
        {"op": "messages_stream", "body": anthropic_body},
        {"op": "messages", "body": dict(anthropic_body, thinking={"type": "enabled", "budget_tokens": 40})},
        {"op": "messages", "body": dict(anthropic_body, thinking={"type": "enabled"})}])
    reasoning = [o["content"][0]["text"] for o in res[0].get("output", []) if o["type"] == "reasoning"]
    check(toks.index("</think>") == 1024 and res[0].get("ok") and reasoning == [want["reasoning_content"]] and
          res[0]["output_text"] == want["content"],
          f"Responses reasoning.effort low: thinking ends after 1,024 tokens, as thinking_token_budget 1024 "
          f"({str(res[0])[:300]})")
    short = json.loads(srv.request("POST", "/v1/chat/completions",
                                   dict(messages=ASK, temperature=0, max_tokens=40, thinking_token_budget=6))[1])["choices"][0]["message"]
    blocks = [(b["type"], b.get("thinking", b.get("text"))) for b in res[1].get("content", [])]
    check(res[1].get("ok") and blocks == [("thinking", short["reasoning_content"]), ("text", short["content"])],
          f"Messages thinking.budget_tokens 6 (official SDK): the thinking block and text of thinking_token_budget 6 "
          f"({blocks}; {short})")
    def unsigned(blocks):  # (a signature seals the thinking with a fresh nonce each time)
        return [{k: v for k, v in b.items() if k != "signature"} for b in blocks]
    check(res[2].get("ok") and unsigned(res[2]["content"]) == unsigned(res[1]["content"]),
          "Messages thinking.budget_tokens, streamed: the same blocks")
    check(not res[3]["ok"] and res[3]["status"] == 400 and "budget_tokens" in res[3]["error"],
          f"thinking.budget_tokens not below max_tokens: 400 ({res[3].get('error')})")
    check(not res[4]["ok"] and res[4]["status"] == 400 and "budget_tokens" in res[4]["error"],
          f"thinking enabled without budget_tokens: 400, as Anthropic's API ({res[4].get('error')})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        qwen3 = make_qwen3(tmp)
        srv = server(qwen3, "engine.threads=1")
        try:
            # Random weights seldom open <think>: a logit_bias on its token makes them; the
            # regex holds the answer after the block (a grammar applies after the thinking).
            think = json.loads(srv.request("POST", "/tokenize", {"prompt": "<think>", "add_special_tokens": False})[1])
            bias = {str(think["tokens"][0]): 100} if think["count"] == 1 else {}
            check(bool(bias), "qwen3: <think> is one token")
            regex = "[a-z ]{1,20}"
            ops = [{"op": "chat", "body": {"messages": ASK, "seed": s, "max_tokens": 60, "guided_regex": regex,
                                           "logit_bias": bias}} for s in (1, 2, 3)]
            res = sdk(f"http://127.0.0.1:{srv.port}", ops)
            for s, r in zip((1, 2, 3), res):
                ok = r.get("ok") and r["reasoning_content"] and re.fullmatch(r"[ \n]*[a-z ]{1,20}", r["content"] or "") \
                    and "</think>" not in r["reasoning_content"]
                check(ok, f"qwen3, seed {s}: the <think> block is reasoning_content, the answer after it follows "
                          f"the regex ({r})")
                body = dict(ops[s - 1]["body"])
                _, pieces, finish, _, done = stream(srv, "/v1/chat/completions", body)
                # stream() joins content only; read the reasoning deltas too.
                rr, text = srv.request("POST", "/v1/chat/completions", dict(body, stream=True))
                chunks = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
                reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
                check(done and "".join(pieces) == r["content"] and reasoning == r["reasoning_content"],
                      f"qwen3, seed {s}: streamed reasoning and content deltas join to the whole answer's")
            # A block the answer opens: the budget counts from its <think>, and the
            # regex still holds the answer after the forced </think>.
            r, t = srv.request("POST", "/v1/chat/completions", dict(ops[0]["body"], thinking_token_budget=3,
                                                                    logprobs=True))
            toks, _ = tokens_of(json.loads(t)) if r.status == 200 else ([], [])
            m = json.loads(t)["choices"][0]["message"] if r.status == 200 else {}
            check(toks[:1] == ["<think>"] and toks[4:5] == ["</think>"] and
                  re.fullmatch(r"[ \n]*[a-z ]{1,20}", m.get("content") or ""),
                  f"qwen3, thinking_token_budget 3 on a block the answer opens: </think> after <think> and 3 tokens, "
                  f"then the regex's answer ({toks[:6]}, {m})")
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "seed": 5, "max_tokens": 20})
            m = json.loads(t)["choices"][0]["message"]
            check(r.status == 200 and "reasoning_content" not in m and m["content"],
                  "qwen3: an answer that opens no <think> block is all content")
            # chat_template_kwargs reach the template (Qwen3 writes an empty block when thinking is off).
            r1, t1 = srv.request("POST", "/tokenize", {"messages": ASK, "chat_template_kwargs": {"enable_thinking": False}})
            r2, t2 = srv.request("POST", "/tokenize", {"messages": ASK})
            off = srv.request("POST", "/detokenize", {"tokens": json.loads(t1)["tokens"]})[1]
            on = srv.request("POST", "/detokenize", {"tokens": json.loads(t2)["tokens"]})[1]
            check("<think>\\n\\n</think>" in off and "<think>" not in on,
                  "qwen3: chat_template_kwargs {enable_thinking: false} renders the empty think block")
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "max_tokens": 2,
                                                                "chat_template_kwargs": {"enable_thinking": False}})
            check(r.status == 200 and json.loads(t)["usage"]["prompt_tokens"] == len(json.loads(t1)["tokens"]),
                  "qwen3: chat completions take chat_template_kwargs too")
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "chat_template_kwargs": [1]})
            check(r.status == 400 and json.loads(t)["error"]["param"] == "chat_template_kwargs",
                  "chat_template_kwargs that is not an object: 400")
        finally:
            srv.stop()
        # A generation prompt that opens the block (as DeepSeek-R1's templates do).
        template = os.path.join(tmp, "r1.jinja")
        with open(template, "w") as f:
            # As R1's: past answers lose their thinking; the generation prompt opens it.
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content.split('</think>')[-1] }}{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
        srv = server(qwen3, "engine.threads=1", f"model.chat_template={template}")
        try:
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "seed": 4, "max_tokens": 40,
                                                                "guided_regex": "[a-z ]{1,10}"})
            m = json.loads(t)["choices"][0]["message"] if r.status == 200 else {}
            check(m.get("reasoning_content") and re.fullmatch(r"[ \n]*[a-z ]{1,10}", m.get("content", "")) and
                  "</think>" not in m["reasoning_content"],
                  f"a prompt ending inside <think>: the answer's first part is reasoning ({m})")
            test_budget(srv)
        finally:
            srv.stop()
        srv = server(qwen3, "engine.threads=1", "model.reasoning_parser=none")
        try:
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "thinking_token_budget": 4})
            check(r.status == 400 and json.loads(t)["error"]["param"] == "thinking_token_budget",
                  f"thinking_token_budget on a model that does not think: 400 naming it ({t})")
            r = sdk(f"http://127.0.0.1:{srv.port}", [{"op": "messages", "body": {
                "model": "qwen3", "max_tokens": 8, "messages": ASK, "thinking": {"type": "enabled", "budget_tokens": 4}}}])[0]
            check(r.get("ok") and [b["type"] for b in r["content"]] == ["text"],
                  f"the Messages API's thinking on a model that does not think is ignored, as the rest of its settings are ({r})")
            r, t = srv.request("POST", "/v1/chat/completions", {"messages": ASK, "seed": 1, "max_tokens": 60,
                                                                "guided_regex": "<think>[a-z]{3}</think>[a-z]{2}"})
            m = json.loads(t)["choices"][0]["message"]
            check("reasoning_content" not in m and m["content"].startswith("<think>"),
                  "model.reasoning_parser = none: the answer is left whole")
        finally:
            srv.stop()


main()
sys.exit(summary())
