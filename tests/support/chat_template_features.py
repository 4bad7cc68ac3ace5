"""Chat-template features, one small template each: the Jinja the real
models' templates use. tests/integration/chat_template_test.py renders
each against python3-jinja2; scripts/fuzz.sh seeds the template fuzzer
with them."""

# Small templates of this file that reach what the models' templates do not:
# each is rendered on the conversations too.
FEATURES = {
    "loop variables": """{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ loop.index0 }} {{ loop.revindex }} {{ loop.revindex0 }} {{ loop.first }} {{ loop.last }} {{ (loop.previtem or {}).role }} {{ (loop.nextitem or {}).role }} {{ loop.cycle('a', 'b') }} {{ loop.changed(m.role == 'user') }} {{ loop.depth }}{{ loop.depth0 }}
{% else %}none
{% endfor %}""",
    "loop filter, else, break, continue": """{% for m in messages if m.role != 'system' %}{% if loop.index > 3 %}{% break %}{% endif %}{% if m.role == 'tool' %}{% continue %}{% endif %}[{{ loop.index }}:{{ m.role }}:{{ loop.length }}]{% else %}empty{% endfor %}""",
    "macros and call": """{% macro turn(role, text='(none)', upper=false) -%}
<{{ role | upper if upper else role }}>{{ text }}{% if caller is defined %}{{ caller() }}{% endif %}
{%- endmacro %}
{% for m in messages %}{{ turn(m.role, m.content if m.content is string else m.content | tojson, upper=loop.first) }}
{% endfor %}{% call turn('end') %} and caller{% endcall %}""",
    "namespace and set": """{% set ns = namespace(count=0, roles=[], last='') %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.roles = ns.roles + [m.role] %}{% set inner = m.role %}{% endfor %}{{ ns.count }} {{ ns['count'] }} {{ ns.missing is defined }} {{ ns.roles | join(',') }} {{ inner is defined }}
{% set a, b = 'x', 'y' %}{{ a ~ b }}{% set block %}  block {{ a }}  {% endset %}[{{ block }}]""",
    "filters": """{{ messages | length }} {{ messages | map(attribute='role') | unique | list | tojson }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('content', 'none') | map(attribute='role') | join('|') }}
{{ (messages | first).role | capitalize }} {{ (messages | last).role | title }} {{ 'Hello World' | lower }} {{ 'a-b-c' | replace('-', '+') }} {{ '  pad  ' | trim }}! {{ 'xxhixx' | trim('x') }}
{{ [3, 1, 2] | sort | list }} {{ [3, 1, 2] | sort(reverse=true) | list }} {{ ['b', 'A', 'c'] | sort | list }} {{ {'b': 1, 'a': 2} | dictsort }} {{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }}
{{ [1, 2, 3] | sum }} {{ [4, 2, 9] | min }} {{ [4, 2, 9] | max }} {{ '42' | int + 1 }} {{ '3.5' | float }} {{ -3 | abs }} {{ 2.5 | round }} {{ 2.567 | round(2) }} {{ 7 | round(0, 'floor') }} {{ undefined_thing | default('dflt') }} {{ '' | default('e', true) }} {{ none | string }}
{{ "line1\\nline2\\n\\nline4" | indent(2) }}|{{ "a\\nb" | indent(4, true) }}|{{ 'x' | center(5) }}|{{ 'one two  three' | wordcount }}|{{ [1, 2, 2, 'a', 'A'] | unique | list }}|{{ {'k': 'v', 'n': [1, 2.0, none, true]} | items | list }}
{{ messages[0] | tojson }} {{ messages[0] | tojson(indent=2) }} {{ {'a': [1, {'b': 'ü'}]} | tojson(sort_keys=true) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ [1.0, 1e20, 0.0001, 1e-05, 12345678901234567890.0, -0.0] | tojson }}
{{ messages | map('length') | list }} {{ messages | map(attribute='missing', default='d') | list }} {{ [0, 1, '', 'a', none] | select | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ [1, 2, 3, 4] | select('divisibleby', 2) | list }}""",
    "tests": """{% for v in [none, true, false, 0, 1.5, 'str', [], {}, messages[0]] %}{{ v is none }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }}{{ v is callable }}{{ v is defined }}
{% endfor %}{{ nothing is defined }}{{ nothing is undefined }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'cat' }}{{ 2 is lt 3 }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ none is sameas none }}{{ 1 is eq 1.0 }}{{ 1 is ne 2 }}""",
    "expressions": """{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 10 / 3 }} {{ 1e3 }} {{ 2.0 * 3 }}
{{ '%s and %r, %d%%' % ('a', 'b', 2.7) }} {{ 'no args' % {} }} {{ 'k=%(k)s' % {'k': [1]} }} {{ 'u' % missing }} {{ '%s!' % messages[0].role }} {{ 'ab' ~ 1 ~ none ~ true }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'a' in 'cat' }} {{ 'x' not in ['x'] }} {{ 'role' in messages[0] }} {{ not true }} {{ none or 'fallback' }} {{ 0 and 'never' }} {{ 'yes' if messages else 'no' }} {{ 'never' if false }}|
{{ messages[0]['role'] }} {{ messages[-1].role }} {{ messages[1:] | length }} {{ messages[::-1] | map(attribute='role') | list }} {{ messages[:1] | length }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo'[-2:] }} {{ 'abc'[5:] }}|
{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'x'.join(['1', '2']) }} {{ ' a b c '.split(none, 1) }} {{ ['1_000', ' 7 ', '0x1A', '1.5', 'inf', '-2e2', 'abc', '1__0'] | map('int') | list }} {{ ['1_0.5', '0x1A', ' 2 ', 'nan', 'x'] | map('float') | list }} {{ '  s  '.strip() }}|{{ 'xxsxx'.lstrip('x') }}|{{ '--s--'.rstrip('-') }}|{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'hello world'.title() }} {{ 'MiXeD'.lower() }} {{ 'MiXeD'.upper() }} {{ 'hello'.capitalize() }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'banana'.count('a') }} {{ 'banana'.find('n') }}
{{ messages[0].get('role') }} {{ messages[0].get('missing', 'dflt') }} {{ messages[0].get('missing') }} {{ messages[0].keys() | list }} {{ messages[0].items() | list | length }} {{ {'a': 1}.values() | list }} {{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ dict(a=1, b='x') }} {{ [1, 2] }} {{ {'k': 'it\\'s'} }} {{ ('t', 1) | list }} {{ 1.0 }} {{ 100000000000000000000.0 }} {{ 0.00001 }}
{{ 'Hi {}, {} {{x}}'.format(messages[0].role, 1.0) }} {{ '{0}{1}{0}'.format('a', none) }} {{ 'v={v}'.format(v=[1]) }} {{ strftime_now('%Y-%m-%d %H:%M %A %b') }} {{ bos_token }}|{{ eos_token }}|{{ messages[0].content is string }}{# comment #}""",
    "whitespace control": """start
  {% if true %}
    indented {{ 'var' }}
  {% endif %}
  {%- for m in messages %}
    - {{ m.role -}}
  {% endfor %}
  {#- comment -#}
  {%+ if true %}plus{% endif %}
	{% if true %}tab{% endif %}
end {{- '\\n' }}   {# trailing #}
""",
    "scoping": """{% set top = 'top' %}{% macro show(x) %}{{ x }}/{{ top }}/{{ later | default('-') }}{% endmacro %}{% set later = 'later' %}
{% for m in messages %}{% if not loop.first %}{{ carried | default('none') }}{% endif %}{% set carried = m.role %}{% set top = 'shadow' %}{{ show(m.role) }} {% set outer = loop %}{% for c in 'ab' %}{{ outer.index }}.{{ loop.index }}{% endfor %};{% endfor %}
{{ top }} {{ carried | default('gone') }} {% if true %}{% set in_if = 'kept' %}{% endif %}{{ in_if }}""",
    "literals": """{{ 'a\\tb\\n' }}|{{ "d\\"q" }}|{{ '\\u00e9\\x41\\101\\U0001F600' }}|{{ 'back\\\\slash' }}|{{ 'un\\known' }}|{{ 'con' 'cat' }}|{{ 1_000 }}|{{ 1.5e3 }}|{{ 0.5 }}|{{ [1, 'two', 3.0, none, true, false] }}|{{ {'a': {'b': ['c']}} }}|{{ ('one',) }}|{{ () }}|{{ "it's" }}|{{ ['\\u3000', '\\xa0', '\\u200b', '\\ufeff', '\\ue000', 'é', '\\x7f', '\\u0600', '\\U000E0041', '\\U0010FFFD', '\\u2028', '😀'] }}|{{ ['it\\'s', "q\\"", 'both\\'"'] }}""",
    "raise on purpose": """{% if messages | length > 2 %}{{ raise_exception('too many: ' ~ messages | length) }}{% endif %}ok""",
    "undefined": """[{{ missing }}] [{{ missing | length }}] [{{ missing | default('d') }}] {% for x in missing %}never{% endfor %} {{ missing is defined }} {{ messages[0].missing is defined }} {{ messages[99] is defined }} {{ (missing ~ 'x') }} {{ 'k' in missing }}""",
    "undefined attribute error": """{{ missing.attr }}""",
    "type error": """{{ 'a' + 1 }}""",
    "generation tag": """{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.role }}{% endif %};{% endfor %}""",
}
