// The agent-building libraries as clients nobody here wrote, unchanged, from
// tests/agents/node_modules: the AI SDK (`ai` with @ai-sdk/openai chat and
// responses models, @ai-sdk/openai-compatible and @ai-sdk/anthropic),
// LangChain (ChatOpenAI, ChatAnthropic) and the OpenAI Agents SDK (an Agent
// with one function tool over the Responses API and over chat completions).
// Reads {"base": "http://127.0.0.1:PORT", "model": "qwen3"} on stdin, with
// optional "case_timeout_s" (default 60), "timeout_s" (whole run, default
// 900) and "only" (case names or name prefixes), and writes one JSON line per
// case:
//   {"case", "ok", "detail", "error"?, "fields": {path: [names]}, "http"?: [...]}
// The model may have random weights, so text is never read, only the shape of
// each result: a tool call must carry the tool's name and arguments that parse
// against its zod schema, an object must parse against its zod schema, a
// stream must end with a finish reason or text. Every client talks to troupe
// through a small proxy here (its own path prefix per case), which records
// the top-level body field names each request sent (and "parent.child" names
// one level into objects such as reasoning, text, thinking, output_config,
// stream_options), and in "http" every answer troupe refused (status >= 400)
// or that carried an error event in its stream, with a snippet of troupe's error.
import http from "node:http";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const agentsDir = join(here, "..", "agents");
const require = createRequire(join(agentsDir, "package.json"));

// The ESM build of a package installed under tests/agents (require() would
// pick the CommonJS build of the dual ones, and a second copy of zod).
function load(spec) {
  const parts = spec.split("/");
  const n = spec.startsWith("@") ? 2 : 1;
  const dir = join(agentsDir, "node_modules", ...parts.slice(0, n));
  const exp = require(join(dir, "package.json")).exports[[".", ...parts.slice(n)].join("/")];
  const entry = exp.import ?? exp.default ?? exp;
  return import(pathToFileURL(join(dir, typeof entry === "string" ? entry : entry.default)).href);
}

const [ai, { createOpenAI }, { createOpenAICompatible }, { createAnthropic }, { ChatOpenAI }, { ChatAnthropic },
       lcTools, agents, { OpenAI }, { z }] = await Promise.all(
  ["ai", "@ai-sdk/openai", "@ai-sdk/openai-compatible", "@ai-sdk/anthropic", "@langchain/openai",
   "@langchain/anthropic", "@langchain/core/tools", "@openai/agents", "openai", "zod"].map(load));

const job = JSON.parse(readFileSync(0, "utf8"));
const MODEL = job.model ?? "qwen3";
const PROMPT = "What is the weather in Paris? Answer briefly.";
const TEXT_TOKENS = 24;   // free text: its content is never read
const JSON_TOKENS = 256;  // grammar-constrained tool arguments and objects
const NO_THINKING = { chat_template_kwargs: { enable_thinking: false } };
const weather = z.object({ city: z.string(), unit: z.enum(["celsius", "fahrenheit"]) });
const cityInfo = z.object({ name: z.string(), population: z.number(), coastal: z.boolean() });

// ---- the recording proxy -------------------------------------------------

function fieldNames(body) {
  const names = [];
  for (const [k, v] of Object.entries(body ?? {})) {
    names.push(k);
    if (v && typeof v === "object" && !Array.isArray(v)) for (const s of Object.keys(v)) names.push(`${k}.${s}`);
  }
  return names;
}

function record(log, path, raw) {
  let body = {};
  try { body = raw.length ? JSON.parse(raw) : {}; } catch { body = {}; }
  const seen = (log.fields[path] ??= new Set());
  for (const name of fieldNames(body && !Array.isArray(body) ? body : {})) seen.add(name);
}

// Watches an answer for a refusal (status >= 400) or an error event in a stream.
function watch(log, path, upstream) {
  let text = "";  // the answer's last 8000 characters: where a stream's error event would be
  upstream.on("data", (c) => { text = (text + c).slice(-8000); });
  upstream.on("end", () => {
    const status = upstream.statusCode;
    const streamErr = /^event: *error|"type" *: *"error"/m.exec(text);
    if (status >= 400) log.http.push({ path, status, error: text.slice(0, 400) });
    else if (streamErr) log.http.push({ path, status, stream_error: text.slice(streamErr.index).slice(0, 400) });
  });
}

function startProxy(base) {
  const target = new URL(base);
  const logs = new Map();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const m = /^\/case\/(\d+)(\/.*)$/.exec(req.url);
      const path = m ? m[2] : req.url;
      const log = logs.get(m ? Number(m[1]) : -1) ?? { fields: {}, http: [] };
      const raw = Buffer.concat(chunks);
      record(log, `${req.method} ${path}`, raw);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method,
                                path: target.pathname.replace(/\/$/, "") + path,
                                headers: { ...req.headers, host: target.host } }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        watch(log, `${req.method} ${path}`, ur);
        ur.pipe(res);
      });
      up.on("error", (e) => {
        log.http.push({ path: `${req.method} ${path}`, status: 502, error: e.message });
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
      up.end(raw);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => {
    const url = `http://127.0.0.1:${server.address().port}`;
    resolve({ server, logs, baseFor: (i) => { logs.set(i, { fields: {}, http: [] }); return `${url}/case/${i}`; } });
  }));
}

// ---- the AI SDK ----------------------------------------------------------

// name -> (base) => {model, providerOptions}: troupe as each provider sees it.
const aiProviders = {
  openai_chat: (base) => ({ model: createOpenAI({ baseURL: base + "/v1", apiKey: "none" }).chat(MODEL) }),
  openai_responses: (base) => ({ model: createOpenAI({ baseURL: base + "/v1", apiKey: "none" }).responses(MODEL) }),
  openai_compatible: (base) => ({
    model: createOpenAICompatible({ name: "troupe", baseURL: base + "/v1", apiKey: "none",
                                    supportsStructuredOutputs: true }).chatModel(MODEL),
    providerOptions: { troupe: NO_THINKING },
  }),
  anthropic: (base) => ({
    model: createAnthropic({ baseURL: base + "/v1", apiKey: "none" }).messages(MODEL),
    providerOptions: { anthropic: { thinking: { type: "disabled" } } },
  }),
};

const FINISHES = ["stop", "length"];  // of free text under TEXT_TOKENS

async function aiText(p, signal) {
  const r = await ai.generateText({ ...p, prompt: PROMPT, maxOutputTokens: TEXT_TOKENS, maxRetries: 0,
                                    abortSignal: signal });
  if (typeof r.text !== "string" || !FINISHES.includes(r.finishReason)) {
    throw new Error(`bad result: finishReason ${r.finishReason}`);
  }
  return { finish: r.finishReason, chars: r.text.length, usage: r.usage?.outputTokens };
}

async function aiStream(p, signal) {
  const r = ai.streamText({ ...p, prompt: PROMPT, maxOutputTokens: TEXT_TOKENS, maxRetries: 0, abortSignal: signal });
  let textChunks = 0, finish = null;
  const types = new Set();
  for await (const part of r.fullStream) {
    types.add(part.type);
    if (part.type === "text-delta") textChunks++;
    if (part.type === "finish") finish = part.finishReason;
    if (part.type === "error") throw part.error instanceof Error ? part.error : new Error(JSON.stringify(part.error));
  }
  if (finish ? !FINISHES.includes(finish) : !textChunks) throw new Error(`stream ended with finish ${finish}`);
  return { finish, text_chunks: textChunks, parts: [...types] };
}

async function aiTool(p, signal) {
  const tools = { get_weather: ai.tool({ description: "Get the weather in a city", inputSchema: weather }) };
  const r = await ai.generateText({ ...p, prompt: PROMPT, tools, toolChoice: "required", maxOutputTokens: JSON_TOKENS,
                                    maxRetries: 0, abortSignal: signal });
  const call = r.toolCalls?.[0];
  if (!call) throw new Error(`no tool call (finishReason ${r.finishReason}, text ${r.text.length} chars)`);
  if (call.toolName !== "get_weather" || call.invalid) {
    throw new Error(`bad tool call: ${JSON.stringify(call).slice(0, 300)}`);
  }
  const parsed = weather.safeParse(call.input);
  if (!parsed.success) throw new Error(`tool input fails its schema: ${JSON.stringify(call.input).slice(0, 300)}`);
  return { finish: r.finishReason, tool: call.toolName, input_keys: Object.keys(call.input),
           calls: r.toolCalls.length };
}

async function aiObject(p, signal) {
  const r = await ai.generateText({ ...p, prompt: "Describe Paris as JSON.",
                                    output: ai.Output.object({ schema: cityInfo }), maxOutputTokens: JSON_TOKENS,
                                    maxRetries: 0, abortSignal: signal });
  const parsed = cityInfo.safeParse(r.output);
  if (!parsed.success) throw new Error(`output fails its schema: ${JSON.stringify(r.output).slice(0, 300)}`);
  return { finish: r.finishReason, keys: Object.keys(r.output) };
}

// generateObject: deprecated in AI SDK 7 for generateText's `output`, still what many agents call.
async function aiGenerateObject(p, signal) {
  const r = await ai.generateObject({ ...p, prompt: "Describe Paris as JSON.", schema: cityInfo,
                                      maxOutputTokens: JSON_TOKENS, maxRetries: 0, abortSignal: signal });
  const parsed = cityInfo.safeParse(r.object);
  if (!parsed.success) throw new Error(`object fails its schema: ${JSON.stringify(r.object).slice(0, 300)}`);
  return { finish: r.finishReason, keys: Object.keys(r.object) };
}

// ---- LangChain -----------------------------------------------------------

const lcModels = {
  openai: (base, maxTokens) => new ChatOpenAI({ model: MODEL, apiKey: "none", configuration: { baseURL: base + "/v1" },
                                                maxTokens, maxRetries: 0, modelKwargs: NO_THINKING }),
  anthropic: (base, maxTokens) => new ChatAnthropic({ model: MODEL, apiKey: "none", anthropicApiUrl: base, maxTokens,
                                                      maxRetries: 0, thinking: { type: "disabled" } }),
};
const lcForce = { openai: "required", anthropic: "any" };

// ChatOpenAI keeps the finish reason in response_metadata; ChatAnthropic's stream, in additional_kwargs.
function finishOf(msg) {
  const meta = msg.response_metadata;
  return meta?.finish_reason ?? meta?.stop_reason ?? msg.additional_kwargs?.stop_reason ?? null;
}

async function lcInvoke(m, signal) {
  const msg = await m.invoke(PROMPT, { signal });
  const finish = finishOf(msg);
  if (!(typeof msg.content === "string" || Array.isArray(msg.content)) || !finish) {
    const seen = { content: typeof msg.content, meta: msg.response_metadata };
    throw new Error(`bad message: ${JSON.stringify(seen).slice(0, 300)}`);
  }
  return { finish, content: Array.isArray(msg.content) ? "blocks" : "string" };
}

async function lcStream(m, signal) {
  let chunks = 0, textChunks = 0, finish = null;
  for await (const c of await m.stream(PROMPT, { signal })) {
    chunks++;
    const blocks = typeof c.content === "string" ? [{ type: "text", text: c.content }] : c.content ?? [];
    if (blocks.some((b) => b.type === "text" && b.text)) textChunks++;
    finish = finishOf(c) ?? finish;
  }
  if (!textChunks && !finish) throw new Error(`stream of ${chunks} chunks had neither text nor a finish reason`);
  return { finish, chunks, text_chunks: textChunks };
}

async function lcTool(m, signal, kind) {
  const t = lcTools.tool(async () => "sunny",
                         { name: "get_weather", description: "Get the weather in a city", schema: weather });
  const msg = await m.bindTools([t], { tool_choice: lcForce[kind] }).invoke(PROMPT, { signal });
  const call = msg.tool_calls?.[0];
  if (!call) throw new Error(`no tool_calls (invalid: ${JSON.stringify(msg.invalid_tool_calls ?? []).slice(0, 300)})`);
  if (call.name !== "get_weather" || !weather.safeParse(call.args).success) {
    throw new Error(`bad tool call: ${JSON.stringify(call).slice(0, 300)}`);
  }
  return { tool: call.name, arg_keys: Object.keys(call.args), calls: msg.tool_calls.length };
}

async function lcStructured(m, signal, kind, method) {
  const structured = m.withStructuredOutput(cityInfo, method ? { method } : undefined);
  const out = await structured.invoke("Describe Paris.", { signal });
  const parsed = cityInfo.safeParse(out);
  if (!parsed.success) throw new Error(`output fails its schema: ${JSON.stringify(out).slice(0, 300)}`);
  return { keys: Object.keys(out) };
}

// ---- the OpenAI Agents SDK -----------------------------------------------

async function agentRun(base, signal, api) {
  const client = new OpenAI({ baseURL: base + "/v1", apiKey: "none", maxRetries: 0 });
  const model = api === "responses" ? new agents.OpenAIResponsesModel(client, MODEL)
                                    : new agents.OpenAIChatCompletionsModel(client, MODEL);
  const invoked = [];
  const getWeather = agents.tool({
    name: "get_weather", description: "Get the weather in a city", parameters: weather,
    execute: async (input) => { invoked.push(input); return `It is sunny in ${input.city}.`; },
  });
  const agent = new agents.Agent({
    name: "weather", instructions: "Answer weather questions with the get_weather tool.", model, tools: [getWeather],
    modelSettings: { toolChoice: "required", maxTokens: JSON_TOKENS,
                     ...(api === "chat" ? { providerData: NO_THINKING } : {}) },
  });
  // With random weights the agent may never stop calling the tool: running out of turns after the tool
  // ran counts as ok too. Either way the first (forced) turn must have run the tool.
  let ended, turns = null;
  try {
    const r = await agents.run(agent, PROMPT, { maxTurns: 3, signal });
    ended = typeof r.finalOutput === "string" ? "completed" : "completed without a final output";
    turns = r.rawResponses.length;
  } catch (e) {
    if (!(e instanceof agents.MaxTurnsExceededError)) throw e;
    ended = "max_turns_exceeded";
  }
  const detail = { ended, model_calls: turns, tool_invocations: invoked.length,
                   tool_input_valid: invoked.every((i) => weather.safeParse(i).success) };
  const ok = (ended === "completed" || ended === "max_turns_exceeded") && invoked.length > 0 && detail.tool_input_valid;
  if (!ok) throw new Error(`agent run not ok: ${JSON.stringify(detail)}`);
  return detail;
}

// ---- the cases -----------------------------------------------------------

function cases() {
  const list = [];
  const aiOps = { text: aiText, stream: aiStream, tool: aiTool, object: aiObject, generate_object: aiGenerateObject };
  for (const [pname, make] of Object.entries(aiProviders)) {
    for (const [op, fn] of Object.entries(aiOps)) list.push([`ai_sdk.${pname}.${op}`, (b, s) => fn(make(b), s)]);
  }
  const lcOps = { invoke: [lcInvoke, TEXT_TOKENS], stream: [lcStream, TEXT_TOKENS], bind_tools: [lcTool, JSON_TOKENS],
                  structured: [lcStructured, JSON_TOKENS] };
  for (const [kind, make] of Object.entries(lcModels)) {
    for (const [op, [fn, tokens]] of Object.entries(lcOps)) {
      list.push([`langchain.${kind}.${op}`, (b, s) => fn(make(b, tokens), s, kind)]);
    }
  }
  // Anthropic's native structured output (output_config.format), which both pick only for Claude models by default.
  list.push(["ai_sdk.anthropic.object_output_format", (b, s) => {
    const p = aiProviders.anthropic(b);
    p.providerOptions.anthropic.structuredOutputMode = "outputFormat";
    return aiObject(p, s);
  }]);
  list.push(["langchain.anthropic.structured_json_schema",
             (b, s) => lcStructured(lcModels.anthropic(b, JSON_TOKENS), s, "anthropic", "jsonSchema")]);
  list.push(["openai_agents.responses", (b, s) => agentRun(b, s, "responses")]);
  list.push(["openai_agents.chat_completions", (b, s) => agentRun(b, s, "chat")]);
  const only = job.only;
  return only ? list.filter(([n]) => only.some((o) => n === o || n.startsWith(o))) : list;
}

function describe(e) {
  const parts = [];
  for (let x = e, depth = 0; x && depth < 4; x = x.cause ?? x.lastError, depth++) {
    const status = x.statusCode ?? x.status;
    parts.push(`${x.name ?? "Error"}${status ? ` ${status}` : ""}: ${String(x.message ?? x).slice(0, 300)}`);
    if (x.responseBody) parts.push(`body: ${String(x.responseBody).slice(0, 300)}`);
  }
  return parts.join(" <- ");
}

async function runCase(name, fn, base, ms) {
  const ac = new AbortController();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => { ac.abort(); reject(new Error(`timed out after ${ms / 1000}s`)); }, ms);
  });
  const started = Date.now();
  try {
    const detail = await Promise.race([fn(base, ac.signal), timeout]);
    return { case: name, ok: true, detail, ms: Date.now() - started };
  } catch (e) {
    return { case: name, ok: false, detail: null, error: describe(e), ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

function emit(result, log) {
  const fields = Object.fromEntries(Object.entries(log?.fields ?? {}).map(([p, s]) => [p, [...s].sort()]));
  const line = { ...result, fields };
  if (log?.http?.length) line.http = log.http;
  process.stdout.write(JSON.stringify(line) + "\n");
}

async function main() {
  agents.setTracingDisabled(true);
  const proxy = await startProxy(job.base);
  const list = cases();
  let next = 0;
  setTimeout(() => {
    for (; next < list.length; next++) {
      emit({ case: list[next][0], ok: false, detail: null, error: "whole run timed out" });
    }
    process.exit(2);
  }, (job.timeout_s ?? 900) * 1000);
  for (; next < list.length; next++) {
    const [name, fn] = list[next];
    const base = proxy.baseFor(next);
    const result = await runCase(name, fn, base, (job.case_timeout_s ?? 60) * 1000);
    await new Promise((r) => setTimeout(r, 50));  // let the proxy log the last answer's end
    emit(result, proxy.logs.get(next));
  }
  process.exit(0);
}

await main();
