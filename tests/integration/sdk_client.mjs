// The official SDKs as clients nobody here wrote: npm `openai` (chat
// completions, streamed through its ChatCompletionStream helper, which
// collects tool-call deltas itself) against a troupe server. Reads
// {"base": "http://127.0.0.1:PORT", "ops": [{"op": ..., "body": {...}}]} on
// stdin and writes one JSON result per op: {"ok": true, ...} or
// {"ok": false, "status", "error"}.
//   chat         client.chat.completions.create(body)
//   chat_stream  client.chat.completions.stream(body).finalChatCompletion()
//   chat_n            client.chat.completions.create(body): every choice
//   chat_n_stream     client.chat.completions.stream(body).finalChatCompletion(): every choice
//   completions       client.completions.create(body): every choice
//   completions_stream  client.completions.create({...body, stream: true}), chunks gathered by index
//   responses         client.responses.create(body)
//   responses_stream  client.responses.stream(body).finalResponse(), with the event types seen
//   responses_get     client.responses.retrieve(body.id)
//   responses_delete  client.responses.delete(body.id)
// and npm `@anthropic-ai/sdk` (the Messages API, x-api-key):
//   messages         client.messages.create(body)
//   messages_stream  client.messages.stream(body).finalMessage(), with the event types seen
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "tools", "package.json"));
const OpenAI = require("openai").OpenAI;
const Anthropic = require("@anthropic-ai/sdk").Anthropic;

const job = JSON.parse(readFileSync(0, "utf8"));
const openai = new OpenAI({ baseURL: job.base + "/v1", apiKey: job.api_key ?? "none", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: job.base, apiKey: job.api_key ?? "none", maxRetries: 0 });

function anthropicMessage(m) {
  return { id: m.id, type: m.type, role: m.role, content: m.content, stop_reason: m.stop_reason,
           stop_sequence: m.stop_sequence, usage: m.usage };
}

function response(r) {
  return { id: r.id, object: r.object, status: r.status, output: r.output, output_text: r.output_text,
           usage: r.usage, incomplete_details: r.incomplete_details, previous_response_id: r.previous_response_id,
           instructions: r.instructions, store: r.store, tools: r.tools, tool_choice: r.tool_choice, text: r.text };
}

function message(choice) {
  const m = choice.message;
  return {
    content: m.content ?? null,
    reasoning_content: m.reasoning_content ?? null,
    tool_calls: (m.tool_calls ?? []).map((c) => ({ id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments })),
    finish_reason: choice.finish_reason,
  };
}

async function run(op) {
  switch (op.op) {
    case "chat": {
      const r = await openai.chat.completions.create(op.body);
      return { ...message(r.choices[0]), usage: r.usage };
    }
    case "chat_stream": {
      const stream = openai.chat.completions.stream(op.body);
      let chunks = 0;
      const deltas = [];
      stream.on("chunk", (c) => {
        chunks++;
        for (const ch of c.choices) if (ch.delta?.tool_calls) deltas.push(...ch.delta.tool_calls);
      });
      const final = await stream.finalChatCompletion();
      // OpenAI's order: a call's first delta carries its id and name.
      const firsts = {};
      for (const d of deltas) if (!(d.index in firsts)) firsts[d.index] = d;
      const named_first = Object.values(firsts).every((d) => d.id && d.function?.name);
      return { ...message(final.choices[0]), chunks, named_first };
    }
    case "chat_n": {
      const r = await openai.chat.completions.create(op.body);
      return { choices: r.choices.map((c) => ({ index: c.index, ...message(c) })), usage: r.usage };
    }
    case "chat_n_stream": {
      const stream = openai.chat.completions.stream(op.body);
      const indexes = new Set();
      let usage = null;
      stream.on("chunk", (c) => {
        for (const ch of c.choices) indexes.add(ch.index);
        if (c.usage) usage = c.usage;
      });
      const final = await stream.finalChatCompletion();
      return { choices: final.choices.map((c) => ({ index: c.index, ...message(c) })), usage,
               indexes: [...indexes].sort() };
    }
    case "completions": {
      const r = await openai.completions.create(op.body);
      return { choices: r.choices.map((c) => ({ index: c.index, text: c.text, finish_reason: c.finish_reason,
                                                token_logprobs: c.logprobs?.token_logprobs ?? null })),
               usage: r.usage };
    }
    case "completions_stream": {
      const texts = {}, finishes = {};
      let usage = null, chunks = 0;
      for await (const c of await openai.completions.create({ ...op.body, stream: true })) {
        chunks++;
        if (c.usage) usage = c.usage;
        for (const ch of c.choices) {
          texts[ch.index] = (texts[ch.index] ?? "") + ch.text;
          if (ch.finish_reason) finishes[ch.index] = [...(finishes[ch.index] ?? []), ch.finish_reason];
        }
      }
      return { texts, finishes, usage, chunks };
    }
    case "responses":
      return response(await openai.responses.create(op.body));
    case "responses_stream": {
      const stream = openai.responses.stream(op.body);
      const events = [];
      let sequential = true;
      stream.on("event", (e) => {
        if (e.sequence_number !== events.length) sequential = false;
        events.push(e.type);
      });
      const final = await stream.finalResponse();
      return { ...response(final), events, sequential };
    }
    case "responses_get":
      return response(await openai.responses.retrieve(op.body.id));
    case "responses_delete": {
      const r = await openai.responses.delete(op.body.id);
      return { deleted: r === undefined || r === null ? true : r.deleted ?? true };
    }
    case "messages":
      return anthropicMessage(await anthropic.messages.create(op.body));
    case "messages_stream": {
      const stream = anthropic.messages.stream(op.body);
      const events = [];
      stream.on("streamEvent", (e) => events.push(e.type));
      const final = await stream.finalMessage();
      return { ...anthropicMessage(final), events };
    }
    default:
      throw new Error("unknown op " + op.op);
  }
}

const results = [];
for (const op of job.ops) {
  try {
    results.push({ ok: true, ...(await run(op)) });
  } catch (e) {
    results.push({ ok: false, status: e.status ?? null, error: String(e.message ?? e), body: e.error ?? null });
  }
}
process.stdout.write(JSON.stringify(results));
