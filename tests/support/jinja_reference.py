"""python3-jinja2 configured as transformers' apply_chat_template configures
it (utils/chat_template_utils.py): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols and the {% generation %} tag; tojson
as json.dumps without ASCII escaping; raise_exception and strftime_now (NOW,
unless a suite sets ENV.globals["strftime_now"]) as globals;
render(messages, tools, documents, add_generation_prompt, **special_tokens,
**kwargs). The reference of tests/integration/chat_template_test.py and
families_test.py, with the messages both render.

Importing it exits 77 (SKIP) without python3-jinja2: the suites that use it
skip then.
"""

import copy
import datetime
import json
import sys

NOW = "2024-07-26 09:30:00"  # strftime_now's time, and `troupe render-template --now`'s

try:
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python3-jinja2 is not installed (apt-get install python3-jinja2)")
    sys.exit(77)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, not tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def reference_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.strptime(NOW, "%Y-%m-%d %H:%M:%S").strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = reference_environment()


def special_tokens(config):
    """transformers' special_tokens_map from tokenizer_config.json."""
    out = {}
    for key in ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]:
        v = config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[key] = v
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        out["additional_special_tokens"] = [t["content"] if isinstance(t, dict) else t for t in extra]
    return out


def as_template_sees(messages):
    """Messages as a template receives them from troupe and vLLM: a tool
    call's `arguments` string that holds a JSON object becomes that object,
    an assistant's null content (its tool calls alone) the empty string
    (vLLM joins a message's text parts, none here, into one string), and its
    reasoning_content is also its `thinking`."""
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("role") == "assistant" and m.get("content", "") is None:
            m["content"] = ""
        if m.get("reasoning_content"):  # gpt-oss's template reads it as `thinking`, as llama.cpp hands it
            m["thinking"] = m["reasoning_content"]
        for call in m.get("tool_calls") or []:
            args = call.get("function", {}).get("arguments")
            if isinstance(args, str):
                try:
                    parsed = json.loads(args)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    call["function"]["arguments"] = parsed
    return out


def reference(template, tokens, case, as_served=False):
    """The template rendered by jinja2 as apply_chat_template renders it;
    `as_served`: with the messages as the server hands them to a template
    (as_template_sees), rather than as given."""
    kwargs = dict(tokens)
    extra = {k: v for k, v in case.items() if k not in ("messages", "tools", "add_generation_prompt")}
    kwargs.update(extra)
    try:
        return ENV.from_string(template).render(
            messages=as_template_sees(case["messages"]) if as_served else copy.deepcopy(case["messages"]),
            tools=copy.deepcopy(case.get("tools")), documents=None,
            add_generation_prompt=case.get("add_generation_prompt", False), **kwargs), None
    except Exception as e:  # jinja2's TemplateError, TypeError, ...: all are failures to render
        return None, f"{type(e).__name__}: {e}"


# Messages of the conversations both suites render.
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city, in °C.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
        "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "The time now.",
                                              "parameters": {"type": "object", "properties": {}}}}
SYSTEM = {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly."}
U1 = {"role": "user", "content": "Hi! What's the weather in Paris?"}
A1 = {"role": "assistant", "content": "Let me check."}
U2 = {"role": "user", "content": "  And tomorrow?\n"}
CALL_ID = "abcDEF123"  # Mistral's templates want nine alphanumerics
A_CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
TOOL_ANSWER = {"role": "tool", "tool_call_id": CALL_ID, "name": "get_weather", "content": "{\"temp_c\": 21}"}
