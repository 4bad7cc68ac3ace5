// Reads both endpoints' SSE streams with Node's built-in fetch, as a
// browser-side client would: chunks split anywhere, events parsed by hand.
const base = process.argv[2];

async function stream(path, body) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`${path}: status ${res.status}`);
  if (!res.headers.get("content-type").startsWith("text/event-stream")) throw new Error(`${path}: not SSE`);
  const decoder = new TextDecoder();
  let buffered = "", text = "", usage = null, finish = null, done = false;
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes, { stream: true });
    let cut;
    while ((cut = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, cut);
      buffered = buffered.slice(cut + 2);
      if (!event.startsWith("data: ")) throw new Error(`${path}: bad event ${event}`);
      const data = event.slice(6);
      if (data === "[DONE]") { done = true; continue; }
      const obj = JSON.parse(data);
      if (obj.usage) usage = obj.usage;
      for (const ch of obj.choices) {
        text += ch.text ?? ch.delta?.content ?? "";
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
  }
  if (!done || finish !== "length" || !usage || usage.completion_tokens !== body.max_tokens)
    throw new Error(`${path}: done=${done} finish=${finish} usage=${JSON.stringify(usage)}`);
  return text;
}

const a = await stream("/v1/completions", { prompt: "This License", max_tokens: 12, ignore_eos: true });
const b = await stream("/v1/chat/completions", {
  messages: [{ role: "user", content: "Hello" }], max_tokens: 9, ignore_eos: true });
console.log(`completions: ${JSON.stringify(a)}; chat: ${JSON.stringify(b)}`);
