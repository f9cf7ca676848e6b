// Two agent loops whose history changes in the middle (issue 47, docs/BENCHMARKS.md), sent with
// byte-identical bodies to kamera serve and to llama-server (--jinja -np 1 --cache-reuse 64) on
// the same GGUF, through each API kamera serves (chat completions, Responses, Messages):
//   thinking  a Qwen3-template tool loop: the assistant's reasoning is sent back while the loop
//             runs (the template renders it) and stays in the history when the next user message
//             arrives (the template then drops it: the rendered prompt changes inside turn 1);
//   edited    a tool loop whose first tool result is replaced by a stub at turn 4 (what context
//             managers do), then appended to as before.
// Per turn: the prompt's tokens, the tokens each server ran a forward on ("recomputed": kamera's
// usage, prompt less cached; llama-server's own log line "prompt eval time = ... / N tokens"),
// and TTFT (request sent -> first delta event, or the stream's end if none came). Each server is
// started afresh per API and loop, so no run reuses another's cache. Streams, temperature 0.
//
//   node scripts/bench-agent-loops.mjs --kamera build/bin/kamera \
//     --llama /tmp/llama-ref/build/bin/llama-server --model M.gguf --out DIR
//     [--threads 2] [--ctx 4096] [--max-tokens 4] [--apis chat,responses,messages]
//     [--loops thinking,edited] [--servers kamera,llama] [--kamera-args '--reuse prefix']
// Writes DIR/loops.json and DIR/loops.md (a table per loop: per API and server, recomputed and
// TTFT per turn, and their sums).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));
for (const need of ['model', 'out']) if (!args[need]) throw new Error(`--${need} is required`);
const threads = Number(args.threads || 2), ctx = Number(args.ctx || 4096), maxTokens = Number(args['max-tokens'] || 4);
const apis = (args.apis || 'chat,responses,messages').split(',');
const loops = (args.loops || 'thinking,edited').split(',');
const servers = (args.servers || 'kamera,llama').split(',');
fs.mkdirSync(args.out, { recursive: true });

// ---------------------------------------------------------------- the loops (seeded text)
function words(seed, n) {
  const pool = ('the river city weather north station report cold wind rain morning value table list ' +
    'search result page number first second answer check again tool call data open close light ' +
    'road bridge market price rise fall hour minute paris oslo lima berlin tokyo').split(' ');
  let x = seed >>> 0;
  const out = [];
  for (let i = 0; i < n; ++i) {
    x = (Math.imul(x ^ (x >>> 15), 2246822519) + 0x9e3779b9) >>> 0;
    out.push(pool[x % pool.length]);
  }
  return out.join(' ');
}
const SYSTEM = 'You are an agent. Call tools to look things up, then answer.';
const TOOL = { name: 'search', description: 'Searches the web',
               parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } };
const call = (i) => ({ id: `call_${i}`, name: 'search', args: { q: words(100 + i, 4) } });
const result = (i) => ({ id: `call_${i}`, text: words(200 + i, 160) });
const step = (i, reasoning) => [{ assistant: { reasoning, calls: [call(i)] } }, { tool: result(i) }];

// A loop is the conversation of each turn (system first): items user, assistant, tool.
function thinkingLoop() {
  const r = (i) => words(300 + i, 60);
  const turns = [];
  let h = [{ user: 'Find the weather in Paris and in Oslo.' }];
  turns.push(h);
  h = [...h, ...step(1, r(1))]; turns.push(h);
  h = [...h, ...step(2, r(2))]; turns.push(h);
  h = [...h, { assistant: { reasoning: r(3), content: words(400, 30) } }, { user: 'And in Lima?' }]; turns.push(h);
  h = [...h, ...step(3, r(4))]; turns.push(h);
  h = [...h, { assistant: { reasoning: r(5), content: words(401, 30) } }, { user: 'Which is warmest?' }]; turns.push(h);
  return turns;
}

function editedLoop() {
  const turns = [];
  let h = [{ user: 'Collect the prices in the market report, page by page.' }];
  turns.push(h);
  for (let i = 1; i <= 5; ++i) {
    h = [...h, ...step(i, '')];
    // Turn 4: the first result, read long ago, replaced by a stub.
    if (i === 3) h = h.map((x) => (x.tool?.id === 'call_1' ? { tool: { id: 'call_1', text: '[result elided]' } } : x));
    turns.push(h);
  }
  return turns;
}

// ---------------------------------------------------------------- the bodies per API
function chatBody(h) {
  const messages = [{ role: 'system', content: SYSTEM }];
  for (const x of h) {
    if (x.user) messages.push({ role: 'user', content: x.user });
    if (x.tool) messages.push({ role: 'tool', tool_call_id: x.tool.id, content: x.tool.text });
    if (x.assistant) {
      const a = x.assistant;
      messages.push({ role: 'assistant', content: a.content ?? null,
                      ...(a.reasoning ? { reasoning_content: a.reasoning } : {}),
                      ...(a.calls ? { tool_calls: a.calls.map((c) => ({ id: c.id, type: 'function',
                        function: { name: c.name, arguments: JSON.stringify(c.args) } })) } : {}) });
    }
  }
  return { model: 'm', messages, tools: [{ type: 'function', function: TOOL }], temperature: 0,
           max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } };
}

function responsesBody(h) {
  const input = [];
  for (const x of h) {
    if (x.user) input.push({ role: 'user', content: x.user });
    if (x.tool) input.push({ type: 'function_call_output', call_id: x.tool.id, output: x.tool.text });
    if (x.assistant) {
      const a = x.assistant;
      if (a.reasoning) input.push({ type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: a.reasoning }] });
      if (a.content) input.push({ role: 'assistant', content: [{ type: 'output_text', text: a.content }] });
      for (const c of a.calls ?? [])
        input.push({ type: 'function_call', call_id: c.id, name: c.name, arguments: JSON.stringify(c.args) });
    }
  }
  return { model: 'm', instructions: SYSTEM, input, tools: [{ type: 'function', ...TOOL }], temperature: 0,
           max_output_tokens: maxTokens, stream: true };
}

function messagesBody(h) {
  const messages = [];
  const push = (role, block) => {
    if (messages.at(-1)?.role !== role) messages.push({ role, content: [] });
    messages.at(-1).content.push(block);
  };
  for (const x of h) {
    if (x.user) push('user', { type: 'text', text: x.user });
    if (x.tool) push('user', { type: 'tool_result', tool_use_id: x.tool.id, content: x.tool.text });
    if (x.assistant) {
      const a = x.assistant;
      if (a.reasoning) push('assistant', { type: 'thinking', thinking: a.reasoning, signature: '' });
      if (a.content) push('assistant', { type: 'text', text: a.content });
      for (const c of a.calls ?? []) push('assistant', { type: 'tool_use', id: c.id, name: c.name, input: c.args });
    }
  }
  return { model: 'm', system: SYSTEM, messages, temperature: 0, max_tokens: maxTokens, stream: true,
           tools: [{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.parameters }] };
}

const API = {
  chat: { route: '/v1/chat/completions', body: chatBody },
  responses: { route: '/v1/responses', body: responsesBody },
  messages: { route: '/v1/messages', body: messagesBody },
};

// ---------------------------------------------------------------- servers
const freePort = () => new Promise((ok) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});

async function start(kind, logFile) {
  const port = await freePort();
  const cmd = kind === 'kamera'
    ? [args.kamera, 'serve', '-m', args.model, '--port', String(port), '--threads', String(threads),
       ...(args['kamera-args'] ? args['kamera-args'].split(' ') : [])]
    : [args.llama, '-m', args.model, '--port', String(port), '--host', '127.0.0.1', '-t', String(threads),
       '-c', String(ctx), '-np', '1', '--cache-reuse', '64', '--jinja'];
  const log = fs.openSync(logFile, 'w');
  const proc = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', log, log] });
  for (let i = 0; i < 1200; ++i) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return { proc, base: `http://127.0.0.1:${port}`, cmd };
    } catch { /* not up */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill();
  throw new Error(`${cmd.join(' ')} did not start (${logFile})`);
}

// llama-server's per-request log lines "prompt eval time = X ms / N tokens", in order.
const llamaPromptEvals = (logFile) =>
  [...fs.readFileSync(logFile, 'utf8').matchAll(/prompt eval time =\s*([\d.]+) ms \/\s*(\d+) tokens/g)].map((m) => Number(m[2]));

// One streamed turn: { ttft_ms, usage (the last one the stream carried), status, error }.
async function turn(base, api, body) {
  const t0 = performance.now();
  const r = await fetch(base + API[api].route, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                 body: JSON.stringify(body) });
  if (!r.ok) return { status: r.status, error: (await r.text()).slice(0, 300) };
  let ttft = null, usage = null, buf = '';
  const dec = new TextDecoder();
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const data = ev.split('\n').find((l) => l.startsWith('data: '))?.slice(6);
      if (!data || data === '[DONE]') continue;
      let d;
      try { d = JSON.parse(data); } catch { continue; }
      const delta = d.choices?.some((c) => c.delta && (c.delta.content || c.delta.reasoning_content || c.delta.tool_calls)) ||
                    /\.delta$/.test(d.type ?? '') || d.type === 'content_block_delta';
      if (delta && ttft === null) ttft = performance.now() - t0;
      usage = d.usage ?? d.response?.usage ?? d.message?.usage ?? usage;
    }
  }
  return { status: r.status, ttft_ms: ttft ?? performance.now() - t0, usage };
}

// kamera's prompt and cached tokens from each API's own usage field.
function kameraCounts(api, u) {
  if (!u) return {};
  if (api === 'chat') return { prompt: u.prompt_tokens, cached: u.prompt_tokens_details?.cached_tokens };
  if (api === 'responses') return { prompt: u.input_tokens, cached: u.input_tokens_details?.cached_tokens };
  // Anthropic's accounting: input_tokens are what the cache did not serve.
  const cached = (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
  return { prompt: u.input_tokens + cached, cached: u.cache_read_input_tokens };
}

// ---------------------------------------------------------------- run
const LOOPS = { thinking: thinkingLoop, edited: editedLoop };
const results = [];
for (const loop of loops) {
  const convs = LOOPS[loop]();
  for (const api of apis) {
    for (const kind of servers) {
      const logFile = path.join(args.out, `${kind}-${loop}-${api}.log`);
      const s = await start(kind, logFile);
      const rows = [];
      for (const [i, h] of convs.entries()) {
        const seen = kind === 'llama' ? llamaPromptEvals(logFile).length : 0;
        const t = await turn(s.base, api, API[api].body(h));
        const row = { turn: i + 1, status: t.status, ttft_ms: t.ttft_ms, error: t.error };
        if (kind === 'kamera') {
          const c = kameraCounts(api, t.usage);
          Object.assign(row, { prompt: c.prompt, recomputed: c.prompt - c.cached, segments: t.usage?.kamera?.segments });
        } else {
          await new Promise((r) => setTimeout(r, 200));  // its log line follows the stream's end
          const evals = llamaPromptEvals(logFile);
          row.recomputed = evals.length > seen ? evals.at(-1) : null;
        }
        rows.push(row);
        console.log(`${loop} ${api} ${kind} turn ${i + 1}: ${JSON.stringify(row)}`);
      }
      s.proc.kill();
      await new Promise((r) => s.proc.once('exit', r));
      results.push({ loop, api, server: kind, command: s.cmd.join(' '), turns: rows });
    }
  }
}

fs.writeFileSync(path.join(args.out, 'loops.json'), JSON.stringify(results, null, 1));
const md = [];
for (const loop of loops) {
  const n = LOOPS[loop]().length;
  md.push(`**${loop}** (${n} turns, max_tokens ${maxTokens}; recomputed tokens per turn / TTFT ms per turn)`, '',
          `| API | server | prompt tokens | recomputed per turn | sum | TTFT ms per turn | sum |`, '|---|---|---|---|---|---|---|');
  for (const r of results.filter((x) => x.loop === loop)) {
    const kam = results.find((x) => x.loop === loop && x.api === r.api && x.server === 'kamera');
    const prompts = kam ? kam.turns.map((t) => t.prompt ?? '?').join(' ') : '';
    const fail = r.turns.find((t) => t.status !== 200);
    if (fail) {
      md.push(`| ${r.api} | ${r.server} | ${prompts} | refused: ${fail.status} ${fail.error.replace(/\|/g, '/').slice(0, 120)} | | | |`);
      continue;
    }
    const rec = r.turns.map((t) => t.recomputed ?? '?');
    const ttft = r.turns.map((t) => Math.round(t.ttft_ms));
    const sum = (a) => a.reduce((x, y) => x + (typeof y === 'number' ? y : 0), 0);
    md.push(`| ${r.api} | ${r.server} | ${prompts} | ${rec.join(' ')} | ${sum(rec)} | ${ttft.join(' ')} | ${sum(ttft)} |`);
  }
  md.push('');
}
fs.writeFileSync(path.join(args.out, 'loops.md'), md.join('\n'));
console.log(md.join('\n'));
