// The agent-framework compatibility matrix (issue 47): official npm packages at pinned versions
// (scripts/install-agent-frameworks.sh), their own code unchanged but for the base URL, against
// `kamera serve` on a tiny random-weight Qwen3-vocabulary model. Per framework (tests/frameworks/
// rows.mjs) five cells:
//   chat        a 4-turn chat: four replies, each turn's prompt longer than the last;
//   stream      the same chat streamed: at temperature 0 the same four replies;
//   tools       a tool loop: the first call forced, its arguments valid for the tool's schema,
//               the framework runs the tool and feeds the result back, an answer within 4 calls;
//   structured  the framework's structured-output helper: the object it parsed fits the schema;
//   reuse       the framework's own usage field: turn n + 1 reports turn n's prompt as cached;
//   options     a turn with the options users commonly set: accepted, an answer comes back.
// A recording proxy sits between the frameworks and the server: a cell also fails when the server
// refused any request the framework sent (4xx/5xx), and --fields prints the fields each row sent.
//
//   node tests/frameworks/matrix.mjs --kamera build/bin/kamera --npm build/npm [--row NAME]
//        [--table FILE]   (the markdown tables of docs/SERVER.md's "Frameworks" section)
// Exits 77 (ctest's skip) with the reason when the npm packages are not installed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fieldsOf, recordingProxy, serve, setup } from './harness.mjs';
import { ROWS, schemas } from './rows.mjs';

const ctx = setup();
const { z } = ctx.require('zod');
const { weather, report } = schemas(z);
const rows = ctx.args.row ? [ctx.args.row] : Object.keys(ROWS);
for (const r of rows) if (!ROWS[r]) throw new Error(`no row ${r} (rows: ${Object.keys(ROWS).join(', ')})`);
const CELLS = ['chat', 'stream', 'tools', 'structured', 'reuse', 'options'];

const served = await serve(ctx);
const log = [];
let tag = '';
const proxy = await recordingProxy(served.port, log, () => tag);
// Qwen's <|im_end|>, for the rows that need replies to end by themselves.
const [imEnd] = (await (await fetch(`${proxy.base}/tokenize`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ content: '<|im_end|>', parse_special: true }) })).json()).tokens;
const results = {};
let failed = 0;

// Runs one cell: ok, or the failure (an exception, or a request of the cell that was refused).
async function cell(row, name, fn) {
  tag = `${row}/${name}`;
  const from = log.length;
  const t0 = Date.now();
  let error = null;
  try {
    await fn();
  } catch (e) {
    error = e;
  }
  const refused = log.slice(from).filter((e) => e.status >= 400);
  if (!error && refused.length) error = new Error(`refused: ${refused[0].status} ${refused[0].error}`);
  results[row][name] = error ? `✗ ${String(error.message || error).split('\n')[0].slice(0, 200)}` : '✓';
  console.log(`${error ? 'FAIL' : 'ok  '} ${row} ${name} (${Date.now() - t0} ms)${error ? `: ${error.stack || error}` : ''}`);
  if (error) {
    ++failed;
    if (process.env.FRAMEWORKS_DEBUG)
      for (const e of log.slice(from)) console.log(`  ${e.method} ${e.path} ${JSON.stringify(e.body)}\n  -> ${e.status} ${e.answer?.slice(0, 3000)}`);
    for (const e of refused) console.log(`  refused ${e.method} ${e.path} ${e.status}: ${e.error}\n  body ${JSON.stringify(e.body)}`);
  }
}

for (const row of rows) {
  results[row] = {};
  const fw = ROWS[row].make({ require: ctx.require, base: proxy.base, imEnd });
  let plain = null;
  await cell(row, 'chat', async () => {
    plain = await fw.chat(false);
    assert.equal(plain.length, 4);
    for (const [i, t] of plain.entries()) {
      assert.equal(typeof t.text, 'string', JSON.stringify(t));
      if (i) assert.ok(t.prompt > plain[i - 1].prompt, `turn ${i + 1}'s prompt is not longer: ${JSON.stringify(plain)}`);
    }
  });
  await cell(row, 'stream', async () => {
    const streamed = await fw.chat(true);
    assert.deepEqual(streamed.map((t) => t.text), plain?.map((t) => t.text), 'the streamed replies differ');
  });
  await cell(row, 'tools', async () => {
    const calls = [];
    const answer = await fw.tools(weather, (args) => { calls.push(args); return args; });
    assert.ok(calls.length >= 1, 'the forced call was not run');
    for (const a of calls) weather.parse(a);
    assert.equal(typeof answer, 'string');
    const requests = log.filter((e) => e.tag === `${row}/tools` && e.method === 'POST').length;
    assert.ok(requests >= 2 && requests <= 4, `${requests} model calls`);
  });
  await cell(row, 'structured', async () => {
    const obj = await fw.structured(report);
    report.parse(obj);
  });
  await cell(row, 'reuse', async () => {
    assert.ok(plain, 'no chat to read');
    for (let i = 1; i < plain.length; ++i)
      assert.ok(plain[i].cached > 0 && plain[i].cached >= plain[i - 1].prompt,
                `turn ${i + 1} reused ${plain[i].cached} of turn ${i}'s ${plain[i - 1].prompt}: ${JSON.stringify(plain)}`);
  });
  await cell(row, 'options', async () => {
    assert.equal(typeof await fw.options(), 'string');
  });
}
served.server.kill();
proxy.server.close();

// The fields each row sent, per path (union over its requests).
const sent = {};
for (const e of log.filter((x) => x.tag)) {
  const row = e.tag.split('/')[0];
  const key = `${row} ${e.method} ${e.path.replace(/\?.*/, '')}`;
  sent[key] ??= new Set();
  for (const f of fieldsOf(e.body)) sent[key].add(f);
}
for (const [k, v] of Object.entries(sent)) console.log(`fields ${k}: ${[...v].sort().join(', ')}`);

if (ctx.args.table) {
  const version = (p) => `${p}@${ctx.version(p)}`;
  const lines = [`| framework (packages) | ${CELLS.join(' | ')} |`, `|---|${CELLS.map(() => '---').join('|')}|`];
  for (const row of rows)
    lines.push(`| ${ROWS[row].label} (${ROWS[row].pkgs.map(version).join(', ')}) | ${CELLS.map((c) => results[row][c]).join(' | ')} |`);
  lines.push('', '| framework | request | fields sent (all cells) |', '|---|---|---|');
  for (const [k, v] of Object.entries(sent)) {
    const [row, method, route] = k.split(' ');
    lines.push(`| ${row} | ${method} ${route} | ${[...v].sort().map((f) => `\`${f}\``).join(', ')} |`);
  }
  fs.writeFileSync(ctx.args.table, lines.join('\n') + '\n');
}
console.log(failed ? `${failed} cell(s) failed (logs in ${served.tmp})` : 'all cells passed');
if (!failed) fs.rmSync(served.tmp, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
