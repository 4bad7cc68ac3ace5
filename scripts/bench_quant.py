#!/usr/bin/env python3
"""make bench-quant: troupe and llama.cpp (npm node-llama-cpp's prebuilt CPU
build) on the same GGUF files, in the same run, at the same thread counts.

For each model (random weights in the TinyLlama-1.1B and stories110M shapes,
`troupe make-model`) and each file type (Q8_0, Q4_K_M, BF16: the tests' GGUF
writer, tests/support/write_gguf.cpp), rounds alternate between the two
engines: each round runs `troupe bench-engine --model FILE.gguf --json` (its
own warm-up, then one measured pass, with this machine's read bandwidth
measured in the same pass) and then llama_cpp.mjs bench on the file (it
loads the model, then times batch-1, 8 and 32 decode and a 512-token
prefill). The table gives the medians over the rounds and troupe's ratio.

`make bench-moe` runs it on mixtures of experts: Qwen3-30B-A3B as Q4_K_M and
gpt-oss-20b as MXFP4, each with its real per-layer shapes but 4 of its
layers (--layers: the whole models do not fit this machine's memory and
disk as the random BF16 checkpoints they are made from), where batch-1 GB/s
counts the weights a token reads (its own experts, not all of them), and
"32 vs 1" is set beside the most the bytes allow: a batch of 32 reads the
experts its tokens route to (bench-engine's weight_mb, uniform routing).

usage: bench_quant.py TROUPE WRITE_GGUF [--rounds 3] [--threads 1,2]
                      [--models tinyllama-1.1b,stories110m] [--types q8_0,q4_k_m,bf16]
                      [--pairs MODEL:TYPE,...] [--layers N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from troupe_harness import TOOLS, llama_cpp, make_model, use_troupe  # noqa: E402

WORK = os.path.join(os.environ.get("TMPDIR", "/tmp"), "troupe-bench-quant")


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def troupe_round(troupe, gguf, threads):
    out = run([troupe, "bench-engine", "--model", gguf, "--threads", str(threads), "--runs", "1",
               "--prefill-tokens", "512", "--decode-steps", "16", "--json"])
    r = json.loads(out.strip().splitlines()[-1])
    d = r["decode"]
    return {"1": d["1"]["tokens_per_s"], "8": d["8"]["tokens_per_s"], "32": d["32"]["tokens_per_s"],
            "prefill": r["prefill_tokens_per_s"], "gbs": d["1"]["weight_gbs"], "read": d["1"]["read_gbs"],
            "mb1": d["1"]["weight_mb"], "mb32": d["32"]["weight_mb"]}


def llama_round(gguf, threads):
    r = llama_cpp("bench", gguf, "--threads", str(threads), "--steps", "32")
    d = r["decode_tokens_per_s"]
    return {"1": d["1"], "8": d["8"], "32": d["32"], "prefill": r["prefill_512_tokens_per_s"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("troupe")
    p.add_argument("write_gguf")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--models", default="tinyllama-1.1b,stories110m")
    p.add_argument("--types", default="q8_0,q4_k_m,bf16")
    p.add_argument("--pairs", default="", help="model:type pairs instead of --models x --types")
    p.add_argument("--layers", type=int, default=0, help="keep this many of each model's layers")
    a = p.parse_args()
    use_troupe(a.troupe)
    if not os.path.isdir(os.path.join(TOOLS, "node-llama-cpp")):
        print("bench-quant: tests/tools' node-llama-cpp is missing (scripts/bootstrap.sh installs it)")
        return 1
    os.makedirs(WORK, exist_ok=True)
    print(f"{'model':15} {'type':7} {'thr':>3} {'metric':12} {'troupe':>9} {'llama.cpp':>9} {'ratio':>6}")
    pairs = ([tuple(p.split(":")) for p in a.pairs.split(",")] if a.pairs else
             [(m, k) for m in a.models.split(",") for k in a.types.split(",")])
    for model, kind in pairs:
        name = f"{model}-{a.layers}l" if a.layers else model
        src = os.path.join(WORK, name)
        if not os.path.exists(os.path.join(src, "config.json")):
            print(f"(writing random {name} weights to {src})", file=sys.stderr)
            make_model(src, model, *(["--layers", str(a.layers)] if a.layers else []))
        gguf = os.path.join(WORK, f"{name}.{kind}.gguf")
        if not os.path.exists(gguf):
            run([a.write_gguf, "--type", kind, src, gguf])
        for threads in map(int, a.threads.split(",")):
            ours, theirs = [], []
            for _ in range(a.rounds):
                ours.append(troupe_round(a.troupe, gguf, threads))
                theirs.append(llama_round(gguf, threads))
            med = lambda rs, k: statistics.median(r[k] for r in rs)
            for key, label in [("1", "batch 1"), ("8", "batch 8"), ("32", "batch 32"), ("prefill", "prefill 512")]:
                t, l = med(ours, key), med(theirs, key)
                print(f"{model:15} {kind:7} {threads:3d} {label:12} {t:9.1f} {l:9.1f} {t / l:6.2f}")
            gbs, read = med(ours, "gbs"), med(ours, "read")
            print(f"{model:15} {kind:7} {threads:3d} {'batch-1 GB/s':12} {gbs:9.1f} {'':9} "
                  f"{gbs / read:6.2f} of the {read:.1f} GB/s read bandwidth")
            # A mixture of experts' batch of 32 reads more experts than one
            # token: the ratio the two steps' bytes allow at one bandwidth.
            bound = 32 * ours[0]["mb1"] / ours[0]["mb32"]
            print(f"{model:15} {kind:7} {threads:3d} {'32 vs 1':12} {med(ours, '32') / med(ours, '1'):9.2f} "
                  f"{med(theirs, '32') / med(theirs, '1'):9.2f}        (bytes allow at most {bound:.1f})")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
