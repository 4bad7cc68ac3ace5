// Hugging Face tokenizers (the Rust library, npm @anush008/tokenizers) as the
// judge of troupe's encodes: reads {"tokenizer": "DIR/tokenizer.json",
// "texts": [...], "add_special_tokens": bool} on stdin and writes a JSON
// array of id arrays. With add_special_tokens, BOS/EOS follow
// tokenizer_config.json's add_bos_token/add_eos_token where it sets them, as
// transformers' LlamaTokenizerFast does; else the file's post-processor.
import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "tools", "package.json"));
const { Tokenizer } = require("@anush008/tokenizers");

const job = JSON.parse(readFileSync(0, "utf8"));
const tok = Tokenizer.fromFile(job.tokenizer);
const configFile = join(dirname(job.tokenizer), "tokenizer_config.json");
const config = existsSync(configFile) ? JSON.parse(readFileSync(configFile, "utf8")) : {};
const content = (t) => (t && typeof t === "object" ? t.content : t);
const rule = job.add_special_tokens && ("add_bos_token" in config || "add_eos_token" in config)
  ? { bos: config.add_bos_token ? content(config.bos_token) : null, eos: config.add_eos_token ? content(config.eos_token) : null }
  : null;
const out = [];
const encs = job.texts.length ? await tok.encodeBatch(job.texts, { addSpecialTokens: job.add_special_tokens && rule === null }) : [];
for (const e of encs) {
  let ids = Array.from(e.getIds());
  if (rule && rule.bos) ids = [tok.tokenToId(rule.bos), ...ids];
  if (rule && rule.eos) ids = [...ids, tok.tokenToId(rule.eos)];
  out.push(ids);
}
process.stdout.write(JSON.stringify(out));
