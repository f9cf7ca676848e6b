// The multi-agent trace of issue 29 replayed through the official `openai` npm client against one
// base URL (kamera route, or HAProxy / nginx in front of several kamera servers), every agent at
// once (closed loop: an agent sends its next turn when its answer ended). Companion of
// scripts/replay.mjs (one server, its arms); scripts/fleet_bench.py starts the fleet and calls it.
//
// The trace (generated here from a seed, no downloaded data): 16 agents; every request holds the
// one shared system prompt, two documents from a pool of 8 (agent a reads documents a mod 8 and
// 3a+1 mod 8), the agent's last K = 4 observations (one user message each: a sliding window over
// its own stream) and a question. Each agent's requests carry X-Session-Id: agent-<a>.
//
// Per request (stream: true, stream_options.include_usage, temperature 0): TTFT (request sent ->
// first chunk with content), prompt tokens, recomputed tokens (prompt - cached), the backend
// (x-kamera-backend, when kamera route answers) and the segments usage.kamera lists (ids, tokens,
// sources: the simulation replays them). Output: --out FILE (JSON: the requests and a summary).
//
//   node scripts/replay_fleet.mjs --base-url http://127.0.0.1:PORT/v1 [--agents 16] [--turns 6]
//        [--max-tokens 8] [--seed 29] [--npm build/npm] [--segments-url ROUTER] --out FILE
// --segments-url: a kamera route whose /router/segments cuts every body first (before the
// replay, untimed): each request's full segment list is kept (the simulation's input).
// --calibrate: instead, one request at a time against one server (the cost model's constants):
//   overhead (TTFT of a 1-token prompt), prefill seconds per token (cold turn-0 bodies: TTFT less
//   the overhead over the tokens recomputed), decode seconds per token (a 64-token answer); with
//   --second-url, agent 0's first turn again on a second server sharing the cluster, once the
//   first has stored its segments (its TTFT and the tokens served from the cluster).
// Exits 77 when the openai client is not installed (bash scripts/install-openai-client.sh DIR).
import fs from 'node:fs';
import { cliArgs, loadClient } from '../tests/openai/replay_harness.mjs';

const args = { agents: 16, turns: 6, 'max-tokens': 8, seed: 29, npm: 'build/npm', 'api-key': 'none',
               ...cliArgs() };
if (!args['base-url'] || !args.out) {
  console.log('usage: node scripts/replay_fleet.mjs --base-url URL --out FILE [--agents N] [--turns N]');
  process.exit(2);
}

// A seeded generator of plain words (mulberry32).
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ('red door house cat step sun boy hill kite string bird nest tree river water baker ' +
  'bread window street rain roof barn horse lamp ship night road bridge market fish boat field ' +
  'farmer cart wheel stone wall garden flower bee light cloud wind snow coat child teacher school ' +
  'bell clock tower square fountain dog ball shop price coin bag letter post train track station')
  .split(' ');
function sentence(r, n) {
  const w = [];
  for (let i = 0; i < n; ++i) w.push(WORDS[Math.floor(r() * WORDS.length)]);
  return w.join(' ');
}

export function makeTrace(agents, turns, seed) {
  const r = rng(seed);
  const K = 4;
  const system = ['You watch a small town with other agents and report what you see.',
    ...Array.from({ length: 5 }, () => sentence(r, 18) + '.')].join('\n');
  const docs = Array.from({ length: 8 }, (_, d) =>
    [`Document ${d}:`, ...Array.from({ length: 3 }, () => sentence(r, 20) + '.')].join('\n'));
  const out = [];
  for (let a = 0; a < agents; ++a) {
    const obs = Array.from({ length: turns + K }, (_, i) => `Agent ${a} observation ${i}: ${sentence(r, 22)}.`);
    const reqs = [];
    for (let t = 0; t < turns; ++t) {
      const messages = [{ role: 'system', content: system },
        { role: 'user', content: docs[a % 8] }, { role: 'user', content: docs[(3 * a + 1) % 8] }];
      for (let i = t; i < t + K; ++i) messages.push({ role: 'user', content: obs[i] });
      messages.push({ role: 'user', content: 'What changed since the last report?' });
      reqs.push(messages);
    }
    out.push(reqs);
  }
  return out;
}


const turn = (client, agent, t, messages) => turnWith(client, agent, t, messages, Number(args['max-tokens']));

async function turnWith(client, agent, t, messages, maxTokens) {
  const t0 = performance.now();
  const { data: stream, response } = await client.chat.completions.create(
    { model: 'kamera', messages, max_tokens: maxTokens, temperature: 0, stream: true,
      stream_options: { include_usage: true } },
    { headers: { 'X-Session-Id': `agent-${agent}` } }).withResponse();
  let ttft = null, usage = null, pieces = 0;
  for await (const chunk of stream) {
    if (chunk.choices?.[0]?.delta?.content && ttft === null) ttft = performance.now() - t0;
    if (chunk.choices?.[0]?.delta?.content) ++pieces;
    if (chunk.usage) usage = chunk.usage;
  }
  const end = performance.now() - t0;
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  return { agent, turn: t, t_send_ms: t0, ttft_ms: ttft ?? end, total_ms: end,
           backend: response.headers.get('x-kamera-backend') ?? null,
           prompt_tokens: usage?.prompt_tokens ?? 0, recomputed: (usage?.prompt_tokens ?? 0) - cached,
           completion_tokens: usage?.completion_tokens ?? pieces,
           segments: (usage?.kamera?.segments ?? []).map((s) => ({ id: s.id ?? null, tokens: s.tokens, source: s.source })) };
}

function pct(xs, p) {
  const s = [...xs].sort((x, y) => x - y);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
}

const median = (xs) => pct(xs, 50);

async function calibrate(client, trace) {
  const one = async (messages, maxTokens, c = client) => {
    const r = await turnWith(c, 0, 0, messages, maxTokens);
    return r;
  };
  const overhead = [];
  for (let i = 0; i < 3; ++i) overhead.push((await one([{ role: 'user', content: `hi ${i}` }], 1)).ttft_ms);
  const o = median(overhead);
  const perToken = [];
  const firsts = [];
  for (let a = 0; a < 3; ++a) {
    const r = await one(trace[a][0], 1);
    firsts.push(r);
    perToken.push((r.ttft_ms - o) / 1000 / Math.max(1, r.recomputed));
  }
  const d = await one([{ role: 'user', content: 'Tell a long story.' }], 64);
  const out = { overhead_s: o / 1000, prefill_s_per_token: median(perToken),
                decode_s_per_token: (d.total_ms - d.ttft_ms) / 1000 / Math.max(1, d.completion_tokens - 1),
                cold_turn0: firsts.map((r) => ({ ttft_ms: r.ttft_ms, recomputed: r.recomputed })) };
  if (args['second-url']) {
    await new Promise((r) => setTimeout(r, Number(args['idle-ms'] ?? 3000)));  // canonicals formed when idle
    const OpenAI = loadClient(args.npm);
    const second = new OpenAI({ baseURL: args['second-url'], apiKey: args['api-key'], maxRetries: 0, timeout: 600000 });
    const r = await one(trace[0][0], 1, second);
    out.second = { ttft_ms: r.ttft_ms, recomputed: r.recomputed,
                   store_patch_tokens: r.segments.filter((s) => s.source.startsWith('store-patch')).reduce((n, s) => n + s.tokens, 0),
                   cold_ttft_ms: firsts[0].ttft_ms, cold_recomputed: firsts[0].recomputed };
  }
  return out;
}

async function main() {
  const OpenAI = loadClient(args.npm);
  const client = new OpenAI({ baseURL: args['base-url'], apiKey: args['api-key'], maxRetries: 0, timeout: 600000 });
  const trace = makeTrace(Number(args.agents), Number(args.turns), Number(args.seed));
  if (args.calibrate) {
    const cal = await calibrate(client, trace);
    fs.writeFileSync(args.out, JSON.stringify(cal, null, 1));
    console.log(JSON.stringify(cal));
    process.exit(0);
  }
  const cuts = {};  // agent/turn -> the router's segments of the body
  let rowBytes = null;
  if (args['segments-url']) {
    for (let a = 0; a < trace.length; ++a)
      for (let t = 0; t < trace[a].length; ++t) {
        const res = await fetch(`${args['segments-url']}/router/segments`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ messages: trace[a][t], max_tokens: Number(args['max-tokens']) }) });
        const j = await res.json();
        cuts[`${a}/${t}`] = j.segments;
        rowBytes = j.row_bytes;
      }
  }
  const t0 = performance.now();
  const results = [];
  let failed = 0;
  await Promise.all(trace.map(async (reqs, a) => {
    for (let t = 0; t < reqs.length; ++t) {
      try {
        const r = await turn(client, a, t, reqs[t]);
        if (cuts[`${a}/${t}`]) r.cut = cuts[`${a}/${t}`];
        results.push(r);
      } catch (e) {
        ++failed;
        console.error(`agent ${a} turn ${t}: ${e.message}`);
      }
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const ttft = results.map((r) => r.ttft_ms);
  const byBackend = {};
  for (const r of results) byBackend[r.backend ?? '?'] = (byBackend[r.backend ?? '?'] ?? 0) + 1;
  const summary = {
    requests: results.length, failed, wall_s: wall,
    requests_per_s: results.length / wall,
    completion_tokens_per_s: results.reduce((s, r) => s + r.completion_tokens, 0) / wall,
    ttft_p50_ms: pct(ttft, 50), ttft_p99_ms: pct(ttft, 99),
    prompt_tokens: results.reduce((s, r) => s + r.prompt_tokens, 0),
    recomputed_tokens: results.reduce((s, r) => s + r.recomputed, 0),
    by_backend: byBackend, row_bytes: rowBytes,
  };
  fs.writeFileSync(args.out, JSON.stringify({ summary, results }, null, 1));
  console.log(JSON.stringify(summary));
  process.exit(failed ? 1 : 0);
}

main();
