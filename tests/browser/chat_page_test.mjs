// The chat page, end to end: Debian's chromium, headless, driven by
// playwright-core, against a real `troupe serve`.
//   node chat_page_test.mjs URL API_KEY [SCREENSHOT.png]
// Types a message and watches the answer stream in, then stops a long one
// mid-way. Prints ok/FAIL lines; exits 1 on a failure.

import {chromium} from "playwright-core";

const [url, key, screenshot] = process.argv.slice(2);
let failures = 0;
function check(cond, what) {
  console.log(`${cond ? "ok  " : "FAIL"}  ${what}`);
  if (!cond) failures++;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu"],
});
try {
  const page = await browser.newPage();
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(url);
  check((await page.title()) === "troupe chat", "the page loads at /");

  await page.fill("#key", key);
  await page.dispatchEvent("#key", "change");
  await page.waitForFunction(() => [...document.querySelectorAll("#model option")].some((o) => o.value === "tiny"));
  check(true, "the model selector lists the models the key may use");

  // A first answer, streamed: its text grows before it is done.
  await page.fill("#max", "48");
  await page.fill("#input", "Hello there");
  await page.press("#input", "Enter");
  const lengths = new Set();
  for (let i = 0; i < 400; i++) {
    const state = await page.evaluate(() => {
      const a = document.querySelectorAll(".assistant");
      const last = a[a.length - 1];
      return last ? {len: last.firstChild ? last.firstChild.textContent.length : 0, done: !!last.querySelector(".stats")} : null;
    });
    if (state && state.len > 0 && !state.done) lengths.add(state.len);
    if (state && state.done) break;
    await page.waitForTimeout(10);
  }
  await page.waitForSelector(".assistant .stats", {timeout: 30000});
  check(lengths.size >= 2, `the answer streams in (${lengths.size} partial lengths seen before the end)`);
  const first = await page.textContent(".assistant .stats");
  check(/TTFT \d+ ms · [\d.]+ tokens\/s · 48 tokens · length/.test(first), `the answer shows its TTFT and tokens/s: "${first}"`);
  const user = await page.textContent(".user");
  check(user === "Hello there", "the message shows as sent");

  // A long answer, stopped mid-way.
  await page.fill("#max", "1500");
  await page.fill("#input", "Go on and on");
  await page.click("#send");
  await page.waitForFunction(() => {
    const a = document.querySelectorAll(".assistant");
    return a.length === 2 && a[1].firstChild && a[1].firstChild.textContent.length > 20;
  });
  check(await page.isEnabled("#stop"), "the stop button is enabled while an answer streams");
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelectorAll(".assistant .stats").length === 2, null, {timeout: 30000});
  const second = (await page.$$eval(".assistant .stats", (s) => s.map((x) => x.textContent)))[1];
  const tokens = Number((second.match(/(\d+) tokens ·/) || [])[1]);
  check(second.includes("stopped") && tokens > 0 && tokens < 1500, `stop ends the answer mid-way: "${second}"`);
  check(await page.isEnabled("#send"), "the page takes a new message after a stop");
  // A tool call (tool_choice required, given in the options field): shown as a block.
  await page.fill("#max", "80");
  await page.fill("#options", JSON.stringify({
    tools: [{type: "function", function: {name: "get_weather", parameters: {
      type: "object", properties: {city: {type: "string", maxLength: 8}}, required: ["city"]}}}],
    tool_choice: "required"}));
  await page.fill("#input", "The weather?");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelectorAll(".assistant .stats").length === 3, null, {timeout: 30000});
  const call = await page.evaluate(() => {
    const a = document.querySelectorAll(".assistant"), d = a[a.length - 1].querySelector(".tool-call");
    return d ? {name: d.querySelector("b").textContent, args: d.querySelector("pre").textContent} : {};
  });
  let args = null;
  try { args = JSON.parse(call.args); } catch (e) { /* checked below */ }
  check(call.name === "tool call: get_weather" && args && typeof args.city === "string",
        `a tool call shows as a block with its name and arguments: ${JSON.stringify(call)}`);
  const third = (await page.$$eval(".assistant .stats", (s) => s.map((x) => x.textContent)))[2];
  check(third.endsWith("tool_calls"), `the tool call's answer finishes tool_calls: "${third}"`);

  // A reasoning model's thinking (the template opens <think>; the answer after it is held to a regex):
  // collapsed above the answer.
  await page.fill("#options", JSON.stringify({guided_regex: "[a-z ]{4,12}"}));
  await page.fill("#input", "Think first");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelectorAll(".assistant .stats").length === 4, null, {timeout: 30000});
  const thought = await page.evaluate(() => {
    const all = document.querySelectorAll(".assistant"), a = all[all.length - 1];
    const d = a.querySelector("details.reasoning");
    return {open: d ? d.open : null, reasoning: d ? d.querySelector("div").textContent : "",
            answer: a.querySelector("span").textContent};
  });
  check(thought.open === false && thought.reasoning.length >= 1 && /^[ \n]*[a-z ]{4,12}$/.test(thought.answer),
        `reasoning shows collapsed, apart from the answer: ${JSON.stringify(thought)}`);
  const external = requests.filter((u) => !u.startsWith(url.replace(/\/$/, "")));
  check(external.length === 0, `the page loads nothing from outside the server (${external.join(", ")})`);
  if (screenshot) await page.screenshot({path: screenshot, fullPage: true});
} catch (e) {
  check(false, "the browser test ran: " + e.stack);
} finally {
  await browser.close();
}
process.exit(failures ? 1 : 0);
