// WebSocket tests of GET /v1/chat/stream with Node's own WebSocket client
// (node --experimental-websocket). Prints "ok    ..." / "FAIL  ..." lines like
// the Python tests and exits 1 on any failure.
//
//   basic PORT KEY BETA_KEY REFERENCE_JSON   auth, ping, multiplexing, cancel, errors, quotas
//   soak  PORT KEY SOCKETS REFERENCE_JSON    SOCKETS sockets at once, one request each: no token lost or doubled
//
// REFERENCE_JSON: {"request": {...chat request...}, "text": "...", "tokens": N},
// the answer of the same deterministic request over plain HTTP.

const [mode, port, key, arg, referenceJson] = process.argv.slice(2);
const url = `ws://127.0.0.1:${port}/v1/chat/stream`;
const reference = JSON.parse(referenceJson);
let failures = 0;

function check(cond, what) {
  console.log(`${cond ? "ok  " : "FAIL"}  ${what}`);
  if (!cond) failures++;
}

// A socket with a queue of received events and a way to wait for one.
function open() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const s = {ws, events: [], waiters: [], closed: false};
    ws.onopen = () => resolve(s);
    ws.onerror = (e) => reject(new Error("WebSocket error: " + (e.message || "connect failed")));
    ws.onclose = () => { s.closed = true; for (const w of s.waiters) w.wake(); };
    ws.onmessage = (m) => {
      s.events.push(JSON.parse(m.data));
      for (const w of s.waiters.slice()) w.wake();
    };
  });
}

// The first event (from `from` on) for which pred holds; null after ms.
function next(s, pred, ms = 30000, from = 0) {
  return new Promise((resolve) => {
    const look = () => {
      for (let i = from; i < s.events.length; i++) if (pred(s.events[i])) return s.events[i];
      return null;
    };
    const found = look();
    if (found) return resolve(found);
    const w = {wake: () => {
      const e = look();
      if (e || s.closed) { s.waiters.splice(s.waiters.indexOf(w), 1); clearTimeout(t); resolve(e); }
    }};
    const t = setTimeout(() => { s.waiters.splice(s.waiters.indexOf(w), 1); resolve(null); }, ms);
    s.waiters.push(w);
  });
}

const send = (s, obj) => s.ws.send(typeof obj === "string" ? obj : JSON.stringify(obj));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Checks one request's events: tokens in order, counted without gap or
// repeat, ending in done; returns {ok, text, why}.
function verify(events, id) {
  const mine = events.filter((e) => e.id === id);
  let text = "", last = 0, why = "";
  if (!mine.length || mine[0].type !== "start") why = "no start event first";
  for (const e of mine.slice(1)) {
    if (e.type === "token") {
      if (!(e.n > last)) why = why || `token count ${e.n} after ${last}`;
      last = e.n;
      text += e.text;
    } else if (e.type === "done") {
      if (e !== mine[mine.length - 1]) why = why || "events after done";
      if (e.usage.completion_tokens < last)
        why = why || `usage says ${e.usage.completion_tokens} tokens, the events counted ${last}`;
      if (e.usage.completion_tokens !== reference.tokens)
        why = why || `${e.usage.completion_tokens} tokens, over HTTP ${reference.tokens}`;
    } else {
      why = why || "unexpected event " + JSON.stringify(e);
    }
  }
  if (!mine.length || mine[mine.length - 1].type !== "done") why = why || "no done event";
  if (text !== reference.text) why = why || `text ${JSON.stringify(text)} differs from HTTP's ${JSON.stringify(reference.text)}`;
  return {ok: !why, text, why};
}

async function basic() {
  const betaKey = arg;
  const s = await open();
  send(s, {type: "ping"});
  check((await next(s, (e) => e.type === "pong")) !== null, "ping gets pong");

  send(s, {...reference.request, id: "early"});
  const early = await next(s, (e) => e.id === "early");
  check(early && early.type === "error" && early.status === 401 && early.error.code === "missing_api_key",
        "a request before auth gets an error event 401: " + JSON.stringify(early));
  let from = s.events.length;
  send(s, {type: "auth", api_key: "sk-not-a-key"});
  const bad = await next(s, (e) => e.type === "error" && e.status === 401, 30000, from);
  check(bad && bad.error.code === "invalid_api_key", "a wrong key in auth gets 401 invalid_api_key");
  send(s, {type: "auth", api_key: key});
  const auth = await next(s, (e) => e.type === "auth");
  check(auth && typeof auth.tenant === "string", "auth names the tenant: " + JSON.stringify(auth));

  // Three requests at once on one socket, with string and integer ids.
  const ids = ["a", 7, "c"];
  for (const id of ids) send(s, {...reference.request, id});
  for (const id of ids) await next(s, (e) => e.id === id && (e.type === "done" || e.type === "error"));
  for (const id of ids) {
    const v = verify(s.events, id);
    check(v.ok, `multiplexed request ${JSON.stringify(id)} streams HTTP's answer, every token once` + (v.why ? ": " + v.why : ""));
  }

  // An id still running may not be used again.
  send(s, {id: "long", messages: [{role: "user", content: "Go on and on"}], max_tokens: 1500, ignore_eos: true});
  await next(s, (e) => e.id === "long" && e.type === "token");
  send(s, {...reference.request, id: "long"});
  const dup = await next(s, (e) => e.id === "long" && e.type === "error");
  check(dup && dup.error.code === "duplicate_id", "an id already running gets duplicate_id: " + JSON.stringify(dup));
  // Cancel it mid-way: "cancelled", then nothing more for it.
  const at = s.events.length;
  send(s, {type: "cancel", id: "long"});
  const cancelled = await next(s, (e) => e.id === "long" && e.type === "cancelled", 30000, at);
  check(cancelled !== null, "cancel gets a cancelled event");
  await sleep(300);
  const after = s.events.slice(s.events.indexOf(cancelled) + 1).filter((e) => e.id === "long");
  check(after.length === 0, `no event for a cancelled request after cancelled (got ${after.length})`);
  const tokensBefore = s.events.filter((e) => e.id === "long" && e.type === "token").length;
  check(tokensBefore < 1500, `the cancelled request stopped early (${tokensBefore} token events of 1500)`);

  send(s, {type: "cancel", id: "nothing"});
  const nf = await next(s, (e) => e.id === "nothing");
  check(nf && nf.type === "error" && nf.error.code === "not_found", "cancelling an unknown id is an error event");
  from = s.events.length;
  send(s, "{not json");
  const bj = await next(s, (e) => e.type === "error" && e.id === null, 30000, from);
  check(bj && bj.error.code === "invalid_json", "a message that is not JSON gets an error event with id null");
  send(s, {id: "bad", messages: [], max_tokens: 4});
  const bv = await next(s, (e) => e.id === "bad");
  check(bv && bv.type === "error" && bv.status === 400 && bv.error.param === "messages",
        "an invalid chat request gets its 400 as an error event: " + JSON.stringify(bv));
  send(s, {type: "subscribe", id: 1});
  const bt = await next(s, (e) => e.type === "error" && e.error.param === "type");
  check(bt !== null, "an unknown message type is an error event");
  s.ws.close();

  // The same quotas: a tenant with max_concurrent = 1 runs one at a time.
  const b = await open();
  send(b, {type: "auth", api_key: betaKey});
  await next(b, (e) => e.type === "auth");
  send(b, {id: 1, messages: [{role: "user", content: "Long"}], max_tokens: 1000, ignore_eos: true});
  await next(b, (e) => e.id === 1 && e.type === "start");
  send(b, {...reference.request, id: 2});
  const q = await next(b, (e) => e.id === 2 && e.type !== "start");
  check(q && q.type === "error" && q.status === 429 && q.error.code === "concurrency_limit_exceeded" && q.retry_after_s >= 1,
        "over max_concurrent on a socket: error event 429 with retry_after_s: " + JSON.stringify(q));
  b.ws.close(); // closing the socket cancels request 1
  await sleep(200);
}

async function soak() {
  const n = Number(arg);
  const t0 = performance.now();
  const sockets = [];
  // Opened in waves of 100 (the listen backlog is large, but a burst of
  // 1,000 handshakes on 2 cores is better spread a little).
  for (let i = 0; i < n; i += 100) {
    const wave = [];
    for (let j = i; j < Math.min(n, i + 100); j++) wave.push(open());
    for (const s of await Promise.all(wave)) sockets.push(s);
  }
  check(sockets.length === n, `${n} WebSockets open at once`);
  for (const [i, s] of sockets.entries()) {
    if (key) send(s, {type: "auth", api_key: key});
    send(s, {...reference.request, id: i});
  }
  await Promise.all(sockets.map((s, i) => next(s, (e) => e.id === i && (e.type === "done" || e.type === "error"), 300000)));
  let good = 0, firstBad = "";
  for (const [i, s] of sockets.entries()) {
    const v = verify(s.events, i);
    if (v.ok) good++;
    else if (!firstBad) firstBad = `socket ${i}: ${v.why}`;
  }
  const seconds = (performance.now() - t0) / 1000;
  check(good === n, `${good} of ${n} sockets got HTTP's answer with every token once (${seconds.toFixed(1)} s)` +
        (firstBad ? "; first bad " + firstBad : ""));
  for (const s of sockets) s.ws.close();
  await sleep(200);
}

try {
  if (mode === "basic") await basic();
  else if (mode === "soak") await soak();
  else throw new Error("unknown mode " + mode);
} catch (e) {
  check(false, "the WebSocket test ran: " + e.stack);
}
process.exit(failures ? 1 : 0);
