#!/usr/bin/env python3
"""make bench-jump-forward: structured output with jump-forward on and off
(engine.jump_forward), two servers on the same model, in the same run, at
the same thread count.

The model has stories110M's shape and random weights (`troupe make-model
--preset stories110m`). Each workload is a constrained completion whose
grammar forces much of the text: a compact JSON record with long keys (GBNF),
a JSON schema through response_format, and guided_choice among long
options. Each round sends the workload to the server with jump-forward and
then to the one without (interleaved), `concurrency` requests at once with
seeds 1..concurrency; it times the round's wall clock and reads the tokens
generated and the tokens jump-forward appended (troupe_jump_forward_tokens_total):
the rest are the tokens the model sampled, one decode position each. One warm-up round, then the medians of
`rounds`. The text differs between the two (jump-forward's tokens are not
always the ones the model would pick), so the table gives time per request
and per generated character too.

usage: bench_jump_forward.py TROUPE [--rounds 5] [--threads 2] [--concurrency 1,8]
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from troupe_harness import make_model, server, use_troupe  # noqa: E402

RECORD = (r'root ::= "{\"customer_full_name\":\"" [a-z]{1,12} " " [a-z]{1,12} '
          r'"\",\"customer_email_address\":\"" [a-z]{1,10} "@example.com\",\"order_status\":\"" '
          r'("pending" | "shipped" | "delivered" | "cancelled") "\",\"is_priority_customer\":" ("true" | "false") '
          r'",\"shipping_address_country_code\":\"" [A-Z]{2} "\"}"')
SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["product_identifier", "product_display_name", "available_inventory_count", "category"],
          "properties": {"product_identifier": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                         "product_display_name": {"type": "string", "maxLength": 24},
                         "available_inventory_count": {"type": "integer", "minimum": 0, "maximum": 9999},
                         "category": {"enum": ["kitchen appliances", "garden furniture", "office supplies"]}}}
CHOICES = ["the shipment was delivered to the customer on time",
           "the shipment is delayed because of bad weather at the hub",
           "the customer cancelled the order before it was shipped"]

MODES = ("true", "false")  # engine.jump_forward: on, then off, interleaved

WORKLOADS = {
    "JSON record (GBNF)": {"guided_grammar": RECORD},
    "JSON schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}},
    "guided_choice": {"guided_choice": CHOICES},
}


def one(srv, extra, seed):
    body = {"prompt": "Record:", "max_tokens": 200, "seed": seed, "temperature": 1, **extra}
    r, t = srv.request("POST", "/v1/completions", body)
    if r.status != 200:
        raise RuntimeError(f"{r.status} {t}")
    j = json.loads(t)
    return j["usage"]["completion_tokens"], len(j["choices"][0]["text"]), j["choices"][0]["finish_reason"]


def round_of(srv, extra, concurrency):
    forced0 = srv.metric("troupe_jump_forward_tokens_total")
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        got = list(pool.map(lambda s: one(srv, extra, s), range(1, concurrency + 1)))
    wall = time.monotonic() - t
    forced = srv.metric("troupe_jump_forward_tokens_total") - forced0
    tokens = sum(g[0] for g in got)
    chars = sum(g[1] for g in got)
    if any(g[2] != "stop" for g in got):
        raise RuntimeError(f"an answer did not end: {got}")
    return {"wall": wall, "tokens": tokens, "sampled": tokens - forced, "chars": chars}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("troupe")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--concurrency", default="1,8")
    a = p.parse_args()
    use_troupe(a.troupe)
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(os.path.join(tmp, "stories110m"), "stories110m")
        servers = {}
        try:
            for jf in MODES:
                servers[jf] = server(model, f"engine.threads={a.threads}", f"engine.jump_forward={jf}")
            print(f"stories110m shape, random weights; engine.threads={a.threads}; medians of {a.rounds} interleaved "
                  "rounds after a warm-up; per round: wall s, tokens generated, tokens the model sampled (the "
                  "others jump-forward appended), ms per generated character")
            print("| workload | requests at once | jump-forward | wall s | tokens | sampled | ms/char | speed-up |")
            print("|---|---|---|---|---|---|---|---|")
            for name, extra in WORKLOADS.items():
                for c in (int(x) for x in a.concurrency.split(",")):
                    for jf in MODES:
                        round_of(servers[jf], extra, c)  # warm-up: the grammar compiled, its masks built
                    runs = {jf: [] for jf in MODES}
                    for _ in range(a.rounds):
                        for jf in MODES:
                            runs[jf].append(round_of(servers[jf], extra, c))
                    med = {jf: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for jf, rs in runs.items()}
                    for jf in MODES:
                        m = med[jf]
                        speed = (f"{med['false']['wall'] / m['wall']:.2f}x" if jf == "true" else "")
                        print(f"| {name} | {c} | {'on' if jf == 'true' else 'off'} | {m['wall']:.3f} | "
                              f"{m['tokens']:.0f} | {m['sampled']:.0f} | {1000 * m['wall'] / m['chars']:.2f} | {speed} |")
        finally:
            for srv in servers.values():
                srv.stop()


if __name__ == "__main__":
    main()
