#include "service/http/chat_page.hpp"

namespace troupe {

auto chat_page() -> std::string_view {
  static constexpr std::string_view page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>troupe chat</title>
<style>
  :root { font-family: system-ui, sans-serif; color: #1d1d1f; background: #f5f5f7; }
  body { margin: 0; display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; gap: .75rem; align-items: center; padding: .6rem 1rem; background: #fff;
           border-bottom: 1px solid #ddd; flex-wrap: wrap; }
  header h1 { font-size: 1rem; margin: 0 1rem 0 0; }
  label { font-size: .85rem; color: #555; }
  select, input, textarea, button { font: inherit; }
  #log { flex: 1; overflow-y: auto; padding: 1rem; display: flex; flex-direction: column; gap: .6rem; }
  .msg { max-width: 46rem; padding: .55rem .8rem; border-radius: .6rem; white-space: pre-wrap; word-wrap: break-word; }
  .user { align-self: flex-end; background: #0a66d8; color: #fff; }
  .assistant { align-self: flex-start; background: #fff; border: 1px solid #ddd; }
  .stats { display: block; margin-top: .35rem; font-size: .75rem; color: #777; }
  .error { align-self: stretch; background: #fdecea; color: #8a1c13; border: 1px solid #f5c2bd; }
  form { display: flex; gap: .5rem; padding: .75rem 1rem; background: #fff; border-top: 1px solid #ddd; }
  textarea { flex: 1; resize: none; height: 3rem; padding: .4rem; }
  #status { font-size: .8rem; color: #777; margin-left: auto; }
  details.reasoning { margin-bottom: .4rem; color: #666; font-size: .85rem; }
  details.reasoning summary { cursor: pointer; }
  .tool-call { margin-top: .4rem; padding: .35rem .5rem; border-left: 3px solid #0a66d8; background: #f0f5fc;
               font-size: .85rem; }
  .tool-call pre { margin: .2rem 0 0; white-space: pre-wrap; }
</style>
</head>
<body>
<header>
  <h1>troupe</h1>
  <label>Model <select id="model"></select></label>
  <label>API key <input id="key" type="password" autocomplete="off" placeholder="(none)" size="18"></label>
  <label>Max tokens <input id="max" type="number" min="1" value="64" style="width:5rem"></label>
  <label>Options <input id="options" placeholder='{"tools": [...]} (JSON)' size="24"></label>
  <span id="status">connecting…</span>
</header>
<main id="log" aria-live="polite"></main>
<form id="form">
  <textarea id="input" placeholder="Say something (Enter sends, Shift+Enter: new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];   // the conversation: {role, content[, tool_calls]}
let socket = null, current = null, nextId = 1;

function status(text) { $("status").textContent = text; }

function bubble(cls, text) {
  const d = document.createElement("div");
  d.className = "msg " + cls;
  d.textContent = text;
  $("log").appendChild(d);
  d.scrollIntoView({block: "end"});
  return d;
}

function headers() {
  const k = $("key").value.trim();
  return k ? {Authorization: "Bearer " + k} : {};
}

async function loadModels() {
  try {
    const r = await fetch("/v1/models", {headers: headers()});
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ? body.error.message : r.statusText);
    const sel = $("model"), was = sel.value;
    sel.innerHTML = "";
    for (const m of body.data) {
      const o = document.createElement("option");
      o.value = o.textContent = m.id;
      sel.appendChild(o);
    }
    if (was) sel.value = was;
  } catch (e) { status("models: " + e.message); }
}

function connect() {
  return new Promise((resolve, reject) => {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/v1/chat/stream");
    ws.onopen = () => {
      const k = $("key").value.trim();
      if (k) ws.send(JSON.stringify({type: "auth", api_key: k}));
      status("connected");
      resolve(ws);
    };
    ws.onerror = () => reject(new Error("cannot open the WebSocket"));
    ws.onclose = () => {
      status("disconnected");
      if (socket === ws) socket = null;
      if (current) finish(null, "the connection closed");
    };
    ws.onmessage = (ev) => onEvent(JSON.parse(ev.data));
  });
}

function onEvent(e) {
  if (e.type === "auth") { status("connected as " + e.tenant); return; }
  if (!current || e.id !== current.id) {
    if (e.type === "error") bubble("error", e.error.message);
    return;
  }
  const c = current;
  if (e.type === "token") {
    if (c.first === 0) c.first = performance.now();
    c.tokens = e.n;
    c.text += e.text;
    c.body.textContent = c.text;
    c.node.scrollIntoView({block: "end"});
  } else if (e.type === "reasoning") {
    // A reasoning model's thinking: collapsed, above the answer.
    if (c.first === 0) c.first = performance.now();
    c.tokens = e.n;
    if (!c.reasoning) {
      const d = document.createElement("details");
      d.className = "reasoning";
      d.innerHTML = "<summary>Reasoning</summary>";
      c.reasoning = document.createElement("div");
      d.appendChild(c.reasoning);
      c.node.insertBefore(d, c.body);
    }
    c.reasoning.textContent += e.text;
  } else if (e.type === "tool_call") {
    // A tool call, as a block: its name, then its arguments as they stream.
    if (c.first === 0) c.first = performance.now();
    c.tokens = e.n;
    let call = c.calls[e.index];
    if (!call) {
      const d = document.createElement("div");
      d.className = "tool-call";
      const name = document.createElement("b");
      const args = document.createElement("pre");
      d.append(name, args);
      c.node.appendChild(d);
      call = c.calls[e.index] = {id: "", name: "", arguments: "", nameNode: name, argsNode: args};
    }
    if (e.call_id) { call.id = e.call_id; call.name = e.name; call.nameNode.textContent = "tool call: " + e.name; }
    call.arguments += e.arguments;
    call.argsNode.textContent = call.arguments;
  } else if (e.type === "done") {
    c.tokens = e.usage.completion_tokens;
    finish(e.finish_reason, null);
  } else if (e.type === "cancelled") {
    finish("stopped", null);
  } else if (e.type === "error") {
    finish(null, e.error.message);
  }
}

function finish(reason, error) {
  const c = current;
  current = null;
  $("send").disabled = false;
  $("stop").disabled = true;
  const calls = c.calls.filter(Boolean).map((k) => ({id: k.id, type: "function", function: {name: k.name, arguments: k.arguments}}));
  if (calls.length) history.push({role: "assistant", content: c.text || null, tool_calls: calls});
  else if (c.text) history.push({role: "assistant", content: c.text});
  const end = performance.now();
  const ttft = c.first ? (c.first - c.start) : null;
  const rate = c.first && c.tokens > 1 && end > c.first ? (c.tokens - 1) / ((end - c.first) / 1000) : null;
  const stats = document.createElement("span");
  stats.className = "stats";
  stats.textContent = (ttft !== null ? "TTFT " + ttft.toFixed(0) + " ms" : "TTFT –") +
      " · " + (rate !== null ? rate.toFixed(1) + " tokens/s" : "– tokens/s") +
      " · " + c.tokens + " tokens" + (reason ? " · " + reason : "");
  c.node.appendChild(stats);
  if (error) bubble("error", error);
}

async function send(text) {
  if (!socket) socket = await connect();
  history.push({role: "user", content: text});
  bubble("user", text);
  const node = bubble("assistant", "");
  const body = document.createElement("span");
  node.appendChild(body);
  const id = "m" + (nextId++);
  current = {id, node, body, text: "", tokens: 0, start: performance.now(), first: 0, reasoning: null, calls: []};
  $("send").disabled = true;
  $("stop").disabled = false;
  // Options: more chat-completion fields for every request (tools, response_format, ...).
  let options = {};
  const raw = $("options").value.trim();
  if (raw) {
    try { options = JSON.parse(raw); } catch (e) { finish(null, "options: not JSON: " + e.message); return; }
  }
  const req = {...options, id, messages: history.slice(), max_tokens: Number($("max").value) || 64};
  if ($("model").value) req.model = $("model").value;
  socket.send(JSON.stringify(req));
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || current) return;
  $("input").value = "";
  send(text).catch((e) => bubble("error", e.message));
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => {
  if (current && socket) socket.send(JSON.stringify({type: "cancel", id: current.id}));
});
$("key").addEventListener("change", () => {
  if (socket) { socket.close(); socket = null; }
  loadModels();
});
loadModels();
connect().then((ws) => { socket = ws; }).catch((e) => status(e.message));
</script>
</body>
</html>
)html";
  return page;
}

} // namespace troupe
