// The official `@anthropic-ai/sdk` npm client's Messages API (client.messages.create, .stream,
// .countTokens) against `kamera serve` on a Qwen3-vocabulary model with Qwen3's chat template
// (random weights: the checks are exact properties, not quality), its API key sent as the SDK
// sends it (x-api-key): a message answers what the same chat completion answers (greedy), with
// the same prompt tokens, which countTokens counts too; the SDK's stream assembles to the same
// message, whose message_start tells the prompt's usage already; a tool loop (a forced tool
// whose input validates against its input_schema, checked by Python's jsonschema; the SDK's own
// content blocks fed back with a tool_result) gets an answer, and its second turn reports the
// first in usage.cache_read_input_tokens.
//
//   node tests/openai/messages_client.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm packages are not installed
// (scripts/install-anthropic-client.sh, scripts/install-tokenizer-refs.sh).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { checker, clientSetup, serveQwen3, validate, verdict } from './client_harness.mjs';

const setup = clientSetup('@anthropic-ai/sdk', 'Anthropic', 'install-anthropic-client.sh');
const Anthropic = setup.Client;
const key = 'sk-kamera-messages-test';
const served = await serveQwen3(setup, 'kamera-messages-', (tmp) => {
  fs.writeFileSync(path.join(tmp, 'keys'), `${key}\n`);
  return ['--api-key-file', path.join(tmp, 'keys')];
});
const { base, up, tmp } = served;
const client = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const auth = { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` };

const { check, fail, failed } = checker();

const post = async (route, body) =>
  (await fetch(`${base}${route}`, { method: 'POST', headers: auth, body: JSON.stringify(body) })).json();
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

try {
  if (!up) throw new Error(`kamera serve did not start (${tmp}/serve.log)`);
  // Qwen's end-of-generation tokens never show up by chance in these checks.
  const ends = await post('/tokenize', { content: '<|im_end|><|endoftext|>', parse_special: true });
  const noEnd = Object.fromEntries(ends.tokens.map((t) => [String(t), -100]));
  const weather = {
    name: 'get_weather', description: 'The weather in a city',
    input_schema: { type: 'object', additionalProperties: false, required: ['city', 'unit'], properties: {
      city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['celsius', 'fahrenheit'] } } } };

  // The prompt as Anthropic's usage counts it: input_tokens (not from the cache) + the cache's.
  const promptOf = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;

  await check('a message answers what the same chat completion answers; countTokens agrees', async () => {
    const req = { model: 'kamera', system: 'Be brief.', max_tokens: 16, temperature: 0, logit_bias: noEnd,
                  messages: [{ role: 'user', content: 'Tell me a story.' }] };
    const m = await client.messages.create(req);
    const c = await post('/v1/chat/completions', {
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }],
      max_tokens: 16, temperature: 0, logit_bias: noEnd });
    assert.equal(m.type, 'message');
    assert.ok(textOf(m).length > 0, JSON.stringify(m));
    assert.equal(textOf(m), c.choices[0].message.content);
    assert.equal(promptOf(m.usage), c.usage.prompt_tokens);
    assert.equal(m.usage.output_tokens, 16);
    assert.equal(m.stop_reason, 'max_tokens');
    const n = await client.messages.countTokens({ model: 'kamera', system: req.system, messages: req.messages });
    assert.equal(n.input_tokens, promptOf(m.usage));
  });

  await check("the SDK's stream assembles to the same message", async () => {
    const req = { model: 'kamera', max_tokens: 16, temperature: 0, logit_bias: noEnd,
                  messages: [{ role: 'user', content: 'Tell me a story.' }] };
    const whole = await client.messages.create(req);
    const stream = client.messages.stream(req);
    let text = '';
    let started = null;
    stream.on('text', (t) => { text += t; });
    stream.on('streamEvent', (e) => {  // a copy: the SDK updates the message it started with
      if (e.type === 'message_start') started = JSON.parse(JSON.stringify(e.message));
    });
    const last = await stream.finalMessage();
    assert.equal(text, textOf(whole));
    assert.equal(textOf(last), textOf(whole));
    assert.equal(last.stop_reason, 'max_tokens');
    assert.equal(last.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(promptOf(last.usage), promptOf(whole.usage));
    // message_start tells the prompt's usage already (the same request again: read from the cache)
    assert.equal(promptOf(started.usage), promptOf(whole.usage), JSON.stringify(started.usage));
    assert.equal(started.usage.input_tokens, last.usage.input_tokens, JSON.stringify(started.usage));
    assert.ok(started.usage.cache_read_input_tokens > 0, JSON.stringify(started.usage));
  });

  await check('a tool loop: a forced tool, its result fed back, an answer; turn 2 reuses turn 1', async () => {
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await client.messages.create({
      model: 'kamera', messages, tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      max_tokens: 80, temperature: 0.7, seed: 2 });
    const uses = first.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1, JSON.stringify(first.content));
    assert.equal(uses[0].name, 'get_weather');
    assert.equal(first.stop_reason, 'tool_use');
    validate(weather.input_schema, uses[0].input);
    const next = [...messages, { role: 'assistant', content: first.content },
                  { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: '{"celsius": 21}' }] }];
    const second = await client.messages.create({
      model: 'kamera', messages: next, tools: [weather], max_tokens: 12, temperature: 0, logit_bias: noEnd });
    assert.ok(second.content.length > 0, JSON.stringify(second));
    const cached = second.usage.cache_read_input_tokens;
    assert.ok(cached >= promptOf(first.usage) - 2, JSON.stringify([first.usage, second.usage]));
    assert.ok(cached < promptOf(second.usage), JSON.stringify(second.usage));
    // Anthropic's accounting: input_tokens are what the cache did not serve
    assert.equal(second.usage.input_tokens, promptOf(second.usage) - cached, JSON.stringify(second.usage));
  });

  await check("a refusal is the SDK's BadRequestError, naming the field", async () => {
    await assert.rejects(
      client.messages.create({ model: 'kamera', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, frobnicate: 1 }),
      (e) => e.status === 400 && e.error.type === 'error' && /frobnicate/.test(e.error.error.message));
  });
} catch (e) {
  fail(e);
}
verdict(served, failed());
