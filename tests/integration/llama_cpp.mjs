// llama.cpp itself (npm node-llama-cpp's prebuilt CPU libraries, loaded with
// no network and no compiler) as the judge of troupe's GGUF files:
//   greedy FILE --prompt-ids 1,2,3 [--steps 32] [--threads N] [--top 5]
//     {"tokens": [...], "steps": [{"token": id, "top": [{"id", "logit", "p"}]}]}:
//     greedy ids after the prompt and, per step, the top next-token
//     probabilities (softmax in float64 of llama.cpp's raw logits; no
//     temperature, no penalties). F32 KV cache and no flash attention, the
//     arithmetic closest to troupe's.
//   tokenize FILE --texts JSON [--no-special]
//     {"ids": [[...], ...]}: each text of the JSON list tokenized as llama.cpp
//     does, BOS and EOS added where the file's add_bos/add_eos say,
//     special-token text parsed unless --no-special.
//   bench FILE [--threads N] [--steps 64]
//     tokens/s of batch-1 decode, of prefill for 512 tokens and of decode
//     with 8 and 32 sequences in one batch; llama.cpp's defaults otherwise.
// Exits 77 with one line where node-llama-cpp is not installed.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const entry = join(here, "..", "tools", "node_modules", "node-llama-cpp", "dist", "index.js");
if (!existsSync(entry)) {
  console.log("SKIP: node-llama-cpp is not installed in tests/tools (scripts/bootstrap.sh installs it)");
  process.exit(77);
}
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

function usage() {
  console.error("usage: llama_cpp.mjs greedy FILE --prompt-ids 1,2,3 [--steps 32] [--threads N] [--top 5]\n" +
                "       llama_cpp.mjs tokenize FILE --texts JSON [--no-special]\n" +
                "       llama_cpp.mjs bench FILE [--threads N] [--steps 64]");
  process.exit(2);
}

const [mode, file, ...rest] = process.argv.slice(2);
if (!mode || !file) usage();
const opts = {};
for (let i = 0; i < rest.length; ++i) {
  if (!rest[i].startsWith("--")) usage();
  const name = rest[i].slice(2);
  if (name === "no-special") opts[name] = true;
  else if (i + 1 < rest.length) opts[name] = rest[++i];
  else usage();
}
const int = (name, fallback) => {
  if (opts[name] === undefined) return fallback;
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < 0) usage();
  return n;
};
const threads = int("threads", 0);

// build "never": the prebuilt binary or nothing (no download, no cmake).
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads });
const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });

// Deterministic ids for the benchmarks (an LCG over the first 1000 ids past
// the usual specials): the text does not change the cost.
function syntheticIds(n, seed) {
  const ids = [];
  let x = seed >>> 0;
  for (let i = 0; i < n; ++i) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids.push(3 + (x % 1000));
  }
  return ids;
}

async function greedy() {
  if (!opts["prompt-ids"]) usage();
  const prompt = opts["prompt-ids"].split(",").map(Number);
  const steps = int("steps", 32), top = int("top", 5);
  const ctx = await model.createContext({
    contextSize: prompt.length + steps + 1, threads, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
  });
  const seq = ctx.getSequence();
  const out = { tokens: [], steps: [] };
  let input = [...prompt.slice(0, -1), [prompt[prompt.length - 1], { generateNext: { logits: true } }]];
  for (let s = 0; s < steps; ++s) {
    const res = await seq.controlledEvaluate(input);
    const logits = res[input.length - 1].next.logits;
    let max = -Infinity, best = -1;
    for (const [id, l] of logits)
      if (l > max || (l === max && id < best)) (max = l), (best = id);
    let sum = 0;
    for (const l of logits.values()) sum += Math.exp(l - max);
    const ranked = [...logits.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, top);
    out.tokens.push(best);
    out.steps.push({ token: best, top: ranked.map(([id, l]) => ({ id, logit: l, p: Math.exp(l - max) / sum })) });
    input = [[best, { generateNext: { logits: true } }]];
  }
  return out;
}

function tokenize() {
  if (opts.texts === undefined) usage();
  const t = model.tokens;
  return {
    ids: JSON.parse(opts.texts).map((text) => {
      const ids = Array.from(model.tokenize(text, !opts["no-special"]));
      if (t.shouldPrependBosToken && t.bos !== null) ids.unshift(t.bos);
      if (t.shouldAppendEosToken && t.eos !== null) ids.push(t.eos);
      return ids;
    }),
  };
}

// Decode in lockstep: every step evaluates each sequence's last token in one
// call per sequence, all issued in the same tick, so node-llama-cpp batches
// them into one llama_decode (a sequence's own generator would dispatch
// alone: measured no faster than batch 1).
async function timeDecode(ctx, numSequences, steps) {
  const seqs = Array.from({ length: numSequences }, () => ctx.getSequence());
  const prompts = seqs.map((_, i) => syntheticIds(16, 7 + i));
  await Promise.all(seqs.map((seq, i) => seq.evaluateWithoutGeneratingNewTokens(prompts[i])));
  let next = prompts.map((p) => p[p.length - 1]);
  const start = process.hrtime.bigint();
  for (let s = 0; s < steps; ++s) {
    const res = await Promise.all(seqs.map((seq, i) => seq.controlledEvaluate([[next[i], { generateNext: { token: true } }]])));
    next = res.map((r) => r[0].next.token);
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return (numSequences * steps) / seconds;
}

async function bench() {
  const steps = int("steps", 64);
  const result = { threads: threads || llama.cpuMathCores, decode_tokens_per_s: {}, prefill_512_tokens_per_s: 0 };
  for (const batch of [1, 8, 32]) {
    const ctx = await model.createContext({ sequences: batch, contextSize: batch * (16 + steps + 16), threads });
    result.decode_tokens_per_s[batch] = await timeDecode(ctx, batch, steps);
    await ctx.dispose();
  }
  const ctx = await model.createContext({ contextSize: 1024, batchSize: 512, threads });
  const seq = ctx.getSequence();
  const ids = syntheticIds(512, 3);
  const start = process.hrtime.bigint();
  await seq.evaluateWithoutGeneratingNewTokens(ids);
  result.prefill_512_tokens_per_s = 512 / (Number(process.hrtime.bigint() - start) / 1e9);
  await ctx.dispose();
  return result;
}

const modes = { greedy, tokenize, bench };
if (!modes[mode]) usage();
process.stdout.write(JSON.stringify(await modes[mode]()) + "\n");
await model.dispose();
await llama.dispose();
