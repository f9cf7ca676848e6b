// Replays agent traffic (issue 25) through the official `openai` npm client against server arms
// (each arm is a server command line: kamera serve with a reuse policy, llama-server with
// --cache-reuse) and measures, per arm, trace and turn, what a server reuses and what it costs.
//
// Traces (generated here from a seed, no downloaded data; a turn's body is the whole messages
// array an agent would resend):
//   chat      multi-turn chat, append-only; the assistant messages are the reference arm's replies
//             (run first), so every arm gets byte-identical bodies
//   window    a sliding window of K = 4 observations: system, the last 4 observations (one user
//             message each), a question
//   rerank    a pool of 6 retrieved documents, a different subset of 4 in a different order per
//             question
//   tools     a tool loop: tools declared, fixed assistant tool_calls, tool results, the next call
//   lookback  the window slides, then an evicted observation comes back (last turn)
//   images    a sliding window of K pictures (--model ...,images=K): system, the last K picture
//             observations (one user message each: a short text and a seeded PNG image_url part
//             of side x side pixels, or of the model's sizes in turn), a question
//   imagelookback  the picture window slides, then an evicted picture comes back (last turn)
//   clips     a sliding window of K audio clips (--model ...,clips=K): system, the last K clip
//             observations (one user message each: a short text and a seeded WAV input_audio
//             part, 16 kHz mono 16-bit, 1 to 2 s of a chirp with harmonics), a question
//   cliplookback  the clip window slides, then an evicted clip comes back (last turn)
//   crossconv two conversations: turn 1 is conversation 1 (a note, a question); turns 2.. are
//             conversation 2, append-only, whose first message precedes the same note (served
//             from conversation 1's context), with the reference's replies (issue 52, item 4)
//
// Per turn (stream: true, temperature 0, fixed max_tokens, logprobs with top_logprobs = 20):
//   ttft_ms      request sent -> first chunk carrying content (no content: the end of the stream)
//   prompt_tokens, recomputed: kamera: usage.prompt_tokens - usage.prompt_tokens_details
//                .cached_tokens (usage.kamera kept as sent); llama-server: timings.prompt_n of the
//                final chunk (prompt_ms, cache_n kept)
//   tokens       the generated tokens with their top logprobs, keyed by their bytes (both servers
//                send `bytes`), so that distributions of one server compare exactly
//
// Fidelity, against the arm's reference (kamera arms: kamera reprefill, i.e. a full re-prefill of
// the same body; llama-server arms: the same binary with cache_prompt: false per request):
//   KL(p_ref || p_arm) from top-20 logprobs. Both distributions are taken over U = the union of the
//   two top sets plus one "rest" bucket. A token of U missing from a top set gets an equal share of
//   that set's missing mass (1 - its top mass), capped at the set's smallest listed probability
//   (it ranked below all of them); the rest bucket gets what remains; every bucket is floored at
//   1e-9 and the two are renormalised. This coarsens the tail (so it can only under-state the tail's
//   part of the true KL) but is exact when both top sets hold all the mass.
//   kl_first     that KL at the first generated position (identical contexts by construction)
//   kl_prefix    its mean over the common greedy prefix: positions 0..d where d is the first
//                position whose greedy tokens differ (the contexts are identical up to d)
//   dlogp_first  max |logprob difference| at the first position over the tokens both top sets
//                list (the table adds the reference's top-20 mass in the JSON: ref_top_mass; on
//                random weights the top 20 hold well under 1% and the KL says little)
//   agreement    common greedy prefix length / max(len_ref, len_arm), where a sequence that ended
//                on a stop gets an end marker as its last token. Positions after the first
//                divergence count as disagreements: past it the two contexts differ, so a
//                position-wise comparison would no longer compare like with like.
//   cross check  a llama-server reference against kamera's reference, both full re-prefills of the
//                same body: whether the two servers see the same prompt and model (in the table's
//                reference column; it is no arm's fidelity)
//
// Output: OUT/replay.json (every arm, trace, turn) and OUT/replay.md (a table per model and trace:
// arm | TTFT p50 | TTFT p99 | recomputed per turn | KL | argmax agreement, with `kamera info`).
// p99 is nearest-rank over a trace's turns (with a handful of turns, the slowest).
// An arm whose server does not start (an unknown flag, a model it cannot load) is reported as
// failed with its log's last lines; the run goes on.
//
//   node scripts/replay.mjs --help
import { spawn, execFileSync } from 'node:child_process';
import zlib from 'node:zlib';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadClient } from '../tests/openai/replay_harness.mjs';

const HELP = `usage: node scripts/replay.mjs --kamera BIN [options]
  --kamera BIN            kamera binary (its serve is every kamera arm)
  --llama NAME=BIN        a llama-server binary (repeatable): arms llama-NAME (-np 1
                          --cache-reuse 64) and llama-NAME-nocache (its reference)
  --model NAME=PATH[,ctx=N][,llama=PATH][,template=T][,turns=N][,max_tokens=N][,traces=A+B]
                          a model (repeatable); .bin (llama2.c) files run on kamera only unless
                          llama= names a GGUF of the same weights; ctx (default 512) sizes the
                          traces and llama-server's -c; template: both servers' --chat-template
                          (default chatml; none: kamera's 'role: content' lines); turns,
                          max_tokens, traces override the options below for this model;
                          mmproj=PATH and frames=DIR[+DIR...] (scripts/minivl_frames.py --out DIR
                          --bodies [--binding reorder|recall]) replay the mini-VL's frame traces
                          instead (frames, frames-reorder, frames-recall; kamera only), with the
                          answers' accuracy against the gold answers and, for the binding traces,
                          every question's answer per arm; mmproj=PATH and images=K
                          [,side=N] (N a multiple of 28, default 112) replay the picture traces
                          (images, imagelookback) of a Qwen2-VL pair on both servers
                          (llama-server gets --mmproj and --cache-ram 1024); tower=N instead of
                          side: a tower of one fixed N x N picture or tile (LLaVA, InternVL,
                          Gemma 3), pictures of N x N; sizes=WxH+WxH+... instead: pictures
                          of those sizes in turn (a tower that tiles them: SmolVLM); mmproj=PATH
                          and clips=K (ctx at least
                          K x 752 + 128) replay the audio traces (clips, cliplookback) of an
                          audio tower (Qwen2.5-Omni) on both servers, as the picture traces
  --arms A,B,...          only these arms (names as in the report; references are added)
  --traces T,...          chat,window,rerank,tools,lookback (default: all), crossconv (on
                          request only); a model with
                          images=K: images,imagelookback; with clips=K: clips,cliplookback
  --turns N               turns per trace (default 6)
  --max-tokens N          tokens generated per turn (default 16)
  --top-logprobs N        top logprobs per position (default 20)
  --seed N                trace seed (default 25)
  --threads N             threads of every server (default 2)
  --npm DIR               where the openai npm client is installed (default build/npm)
  --out DIR               report directory (default /tmp/replay-out)
  --gap-ms N              pause N ms after each turn (default 0: back to back); a kamera
                          server does its background work (canonicals, idle repair) in such
                          pauses, once idle 0.3 s
  --kamera-flags "F ..."  flags added to every kamera arm's serve command (e.g.
                          "--idle-repair off")
Exits 77 when the openai client is not installed (bash scripts/install-openai-client.sh DIR).`;

// ---------------------------------------------------------------- command line
function parseArgs(argv) {
  const a = { llama: [], model: [], turns: 6, 'max-tokens': 16, 'top-logprobs': 20, seed: 25,
              threads: 2, npm: 'build/npm', out: '/tmp/replay-out', traces: 'chat,window,rerank,tools,lookback',
              'gap-ms': 0, 'kamera-flags': '' };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i].replace(/^--/, '');
    if (k === 'help' || k === 'h') { console.log(HELP); process.exit(0); }
    if (!(k in a) && !['kamera', 'arms'].includes(k)) throw new Error(`unknown option --${k} (see --help)`);
    const v = argv[++i];
    if (v === undefined) throw new Error(`--${k} needs a value`);
    if (Array.isArray(a[k])) a[k].push(v);
    else a[k] = typeof a[k] === 'number' ? Number(v) : v;
  }
  if (!a.kamera) throw new Error('--kamera BIN is required (see --help)');
  return a;
}

function parseModel(spec) {
  const [head, ...opts] = spec.split(',');
  const eq = head.indexOf('=');
  const m = { name: head.slice(0, eq), path: path.resolve(head.slice(eq + 1)), ctx: 512, llama: null, template: 'chatml',
              overrides: {} };
  for (const o of opts) {
    const [k, v] = o.split('=');
    if (k === 'ctx') m.ctx = Number(v);
    else if (k === 'llama') m.llama = path.resolve(v);
    else if (k === 'template') m.template = v;
    else if (k === 'turns') m.overrides.turns = Number(v);
    else if (k === 'max_tokens') m.overrides.maxTokens = Number(v);
    else if (k === 'traces') m.overrides.traceNames = v.split('+');
    else if (k === 'mmproj') m.mmproj = path.resolve(v);
    else if (k === 'frames') m.frames = v.split('+').map((d) => path.resolve(d));
    else if (k === 'images') m.images = Number(v);
    else if (k === 'side') m.side = Number(v);
    else if (k === 'tower') m.tower = Number(v);
    else if (k === 'sizes') m.sizes = v.split('+').map((wh) => wh.split('x').map(Number));
    else if (k === 'clips') m.clips = Number(v);
    else throw new Error(`--model ${spec}: unknown key ${k}`);
  }
  if (m.images !== undefined) checkPictures(spec, m);
  if (m.clips !== undefined) checkClips(spec, m);
  if (!m.llama && m.path.endsWith('.gguf') && (!m.mmproj || m.images || m.clips)) m.llama = m.path;
  if (m.frames) m.overrides.traceNames = m.frames.map(frameTraceName);
  else if (m.images && !m.overrides.traceNames) m.overrides.traceNames = ['images', 'imagelookback'];
  else if (m.clips && !m.overrides.traceNames) m.overrides.traceNames = ['clips', 'cliplookback'];
  return m;
}

// The picture traces: K >= 2 pictures (a slide keeps K - 1), each side x side pixels with side a
// multiple of 28 (Qwen2-VL's 14-pixel patches merged 2 x 2) and at least 84, so that neither
// server resizes it: kamera and llama.cpp's mtmd both round to a multiple of 28 and raise a
// picture below their smallest size (llama.cpp d32676d: 8 merged tokens, 6,272 pixels). A tower
// of one fixed picture size (tower=N: LLaVA's picture, InternVL's tile, Gemma 3's picture) gets
// pictures of exactly N x N, which neither server resizes, pads or cuts into tiles.
function checkPictures(spec, m) {
  if (!m.mmproj) throw new Error(`--model ${spec}: images=K needs mmproj=PATH`);
  if (!(Number.isInteger(m.images) && m.images >= 2)) throw new Error(`--model ${spec}: images=K needs K >= 2`);
  if (m.sizes !== undefined) return checkSizes(spec, m);
  if (m.tower !== undefined) {
    if (m.side !== undefined) throw new Error(`--model ${spec}: tower=N sets the side; leave side out`);
    if (!(Number.isInteger(m.tower) && m.tower >= 16)) throw new Error(`--model ${spec}: tower=N needs N >= 16`);
    m.side = m.tower;
    return;
  }
  m.side ??= 112;
  if (!(Number.isInteger(m.side) && m.side >= 84 && m.side % 28 === 0))
    throw new Error(`--model ${spec}: side=N needs N a multiple of 28, at least 84`);
}

// A tower that cuts a picture into tiles and a global view (sizes=WxH+WxH+...: SmolVLM's
// idefics3) gets pictures of those sizes in turn (picture i: size i mod n), each sent as given:
// sizes whose longer side is the processor's longest edge and whose sides are multiples of its
// tile are cut into the same tiles by both servers without resizing (docs/BENCHMARKS.md).
function checkSizes(spec, m) {
  if (m.side !== undefined || m.tower !== undefined) throw new Error(`--model ${spec}: sizes= sets the sizes; leave side and tower out`);
  if (!m.sizes.length || !m.sizes.every((wh) => wh.length === 2 && wh.every((x) => Number.isInteger(x) && x >= 16)))
    throw new Error(`--model ${spec}: sizes=WxH+WxH... needs integer sides of at least 16`);
}

// The size of picture i of a picture trace: [w, h].
const pictureSize = (m, i) => (m.sizes ? m.sizes[i % m.sizes.length] : [m.side, m.side]);

// The audio traces: K >= 2 clips (a slide keeps K - 1). Both servers pad a clip to whole 30-s
// windows of 750 rows (docs/VISION.md, "Audio"), so a clip of 1 to 2 s is 750 rows and its two
// delimiters whatever its length: the window needs that much context per clip.
const CLIP_ROWS = 752;
function checkClips(spec, m) {
  if (!m.mmproj) throw new Error(`--model ${spec}: clips=K needs mmproj=PATH`);
  if (m.images !== undefined) throw new Error(`--model ${spec}: clips=K and images=K are two models`);
  if (!(Number.isInteger(m.clips) && m.clips >= 2)) throw new Error(`--model ${spec}: clips=K needs K >= 2`);
  if (m.ctx < m.clips * CLIP_ROWS + 128)
    throw new Error(`--model ${spec}: ${m.clips} clips of ${CLIP_ROWS} rows need ctx=N of at least ${m.clips * CLIP_ROWS + 128}`);
}

// ---------------------------------------------------------------- arms
// Both servers get the same built-in template (none: each server's own fallback, kamera's
// 'role: content' lines, for a kamera-only model whose context is too small for chatml).
const templateFlag = (m) => (m.template === 'none' ? [] : ['--chat-template', m.template]);
// llama.cpp d32676d renders with Jinja by default and reads --chat-template NAME as Jinja source
// unless NAME is chatml (common_chat_templates_init); --no-jinja gives its built-in templates.
const llamaTemplateFlags = (m) => [...templateFlag(m), ...(['none', 'chatml'].includes(m.template) ? [] : ['--no-jinja'])];

// An arm is a server command line (a function of model and port) plus extra request fields.
// `ref` names the arm its fidelity is measured against; a reference arm has ref === null.
function kameraArm(bin, name, flags, ref) {
  return { name, ref, server: 'kamera', extra: {}, needs: 'kamera',
           command: (m, port, threads) => [bin, 'serve', '-m', m.path, '--port', String(port),
             '--threads', String(threads), ...templateFlag(m), ...(m.mmproj ? ['--mmproj', m.mmproj] : []),
             ...flags, ...KAMERA_FLAGS] };
}
let KAMERA_FLAGS = [];  // --kamera-flags (set once, before any arm starts)

// A picture or audio model's arm also gets the tower and the host-memory prompt cache (d32676d's
// --cache-ram; a build without them refuses the flags and the arm is reported as failed).
function llamaArm(bin, name, ref, extra) {
  return { name, ref, server: 'llama', extra, needs: 'llama',
           command: (m, port, threads) => [bin, '-m', m.llama, '--port', String(port), '--host',
             '127.0.0.1', '-t', String(threads), '-c', String(m.ctx), '-np', '1',
             '--cache-reuse', '64', ...llamaTemplateFlags(m),
             ...(m.images || m.clips ? ['--mmproj', m.mmproj, '--cache-ram', '1024'] : [])] };
}

// The kamera reference is `--reuse reprefill` (a full re-prefill of the same body).
function defaultArms(args) {
  const k = args.kamera, refs = ['kamera-reprefill'];
  const arms = [
    kameraArm(k, 'kamera-reprefill', ['--reuse', 'reprefill'], null),
    kameraArm(k, 'kamera-patch', ['--reuse', 'patch', '--reuse-budget', '0'], refs),
    // the repair budget (cache/repair_plan.h): 5 to 100% of the tokens held from another context
    ...[5, 15, 30, 50, 100].map((p) => kameraArm(k, `kamera-repair-${p}`,
                                        ['--reuse', 'patch', '--reuse-budget', String(p / 100)], refs)),
    kameraArm(k, 'kamera-keep', ['--reuse', 'keep'], refs),
    kameraArm(k, 'kamera-prefix', ['--reuse', 'prefix'], refs),
    kameraArm(k, 'kamera-default', [], refs),
  ];
  for (const spec of args.llama) {
    const [name, bin] = spec.split('=');
    arms.push(llamaArm(path.resolve(bin), `llama-${name}-nocache`, null, { cache_prompt: false }));
    arms.push(llamaArm(path.resolve(bin), `llama-${name}`, [`llama-${name}-nocache`], {}));
  }
  return arms;
}

function selectArms(all, only) {
  if (!only) return all;
  const want = new Set(only.split(','));
  for (const a of all) if (want.has(a.name) && a.ref) a.ref.forEach((r) => want.add(r));
  const unknown = [...want].filter((n) => !all.some((a) => a.name === n));
  if (unknown.length) throw new Error(`--arms: no arm named ${unknown.join(', ')}`);
  return all.filter((a) => want.has(a.name));
}

// ---------------------------------------------------------------- traces
function rng(seed) {  // mulberry32: a small seeded generator, the same on every host
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ('the cat dog sun tree ball girl boy mom dad park sky red big little happy sad '
  + 'ran jumped saw played found had wanted said went home friend toy fish bird water cake '
  + 'day night box door hat car garden flower rain snow warm cold small tall green blue').split(' ');

function sentence(r, words) {
  const w = Array.from({ length: words }, () => WORDS[Math.floor(r() * WORDS.length)]);
  return w.join(' ').replace(/^./, (c) => c.toUpperCase()) + '.';
}

function shuffle(r, xs) {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; --i) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

// Words per item, so that the largest body fits the context with max_tokens to spare.
const itemWords = (ctx) => Math.max(2, Math.floor(ctx / 50));
const system = { role: 'system', content: 'Tell stories.' };

// Chat: turn t resends the system, every user message and the reference's replies (marked
// { role: 'assistant', replyOf: k } until the reference has answered turn k).
function chatTrace(r, turns, w) {
  const users = Array.from({ length: turns }, (_, t) => sentence(r, Math.ceil(w / 3)));
  return users.map((_, t) => [system, ...users.slice(0, t + 1).flatMap((u, k) =>
    k < t ? [{ role: 'user', content: u }, { role: 'assistant', replyOf: k }] : [{ role: 'user', content: u }])]);
}

const observation = (r, i, w) => `Seen ${i + 1}: ${sentence(r, w)}`;
const question = (t) => ({ role: 'user', content: `Step ${t + 1}: what changed?` });
const asUsers = (xs) => xs.map((content) => ({ role: 'user', content }));

// A sliding window over observation messages: turn t sees obs[t .. t + k).
const slideBodies = (obs, turns, k) =>
  Array.from({ length: turns }, (_, t) => [system, ...obs.slice(t, t + k), question(t)]);

function windowTrace(r, turns, w, k = 4) {
  return slideBodies(asUsers(Array.from({ length: turns + k - 1 }, (_, i) => observation(r, i, w))), turns, k);
}

function rerankTrace(r, turns, w, pool = 6, k = 4) {
  const docs = Array.from({ length: pool }, (_, i) => `Doc ${i + 1}: ${sentence(r, w)}`);
  return Array.from({ length: turns }, (_, t) => [system,
    ...asUsers(shuffle(r, docs).slice(0, k)), { role: 'user', content: `Which says ${WORDS[t]}?` }]);
}

const TOOLS = [
  { type: 'function', function: { name: 'look', description: 'Look at a place',
    parameters: { type: 'object', properties: { place: { type: 'string' } }, required: ['place'] } } },
  { type: 'function', function: { name: 'take', description: 'Take a thing',
    parameters: { type: 'object', properties: { thing: { type: 'string' } }, required: ['thing'] } } },
];

// Tools: turn t resends the task and t fixed (call, result) pairs.
function toolsTrace(r, turns, w) {
  const msgs = [system, { role: 'user', content: `Find the lost toy. ${sentence(r, w)}` }];
  const bodies = [];
  for (let t = 0; t < turns; ++t) {
    bodies.push({ messages: [...msgs], tools: TOOLS, tool_choice: 'none' });
    const fn = t % 2 ? { name: 'take', arguments: JSON.stringify({ thing: WORDS[t + 3] }) }
                     : { name: 'look', arguments: JSON.stringify({ place: WORDS[t + 10] }) };
    msgs.push({ role: 'assistant', content: null, tool_calls: [{ id: `call_${t}`, type: 'function', function: fn }] });
    msgs.push({ role: 'tool', tool_call_id: `call_${t}`, content: sentence(r, Math.ceil(w / 2)) });
  }
  return bodies;
}

// Two conversations sharing a note: turn 0 is conversation 1; turn t > 0 resends conversation 2
// (its own opening, the note, its questions up to t and the reference's replies to turns 1..t-1).
function crossconvTrace(r, turns, w) {
  const note = { role: 'user', content: `Note: ${sentence(r, 2 * w)}` };
  const first = [system, note, { role: 'user', content: `Why? ${sentence(r, w)}` }];
  const opening = { role: 'user', content: sentence(r, w) };
  const asks = Array.from({ length: turns }, () => sentence(r, Math.ceil(w / 2)));
  return [first, ...Array.from({ length: turns - 1 }, (_, t) => [system, opening, note,
    ...asks.slice(0, t + 1).flatMap((u, k) => (k < t ? [{ role: 'user', content: u },
      { role: 'assistant', replyOf: k + 1 }] : [{ role: 'user', content: u }]))])];
}

// Look-back: the window slides for turns - 1 turns, then observation 1 (evicted at turn 2) comes
// back in front of the newest three.
function lookbackBodies(obs, turns, k) {
  const bodies = slideBodies(obs, turns - 1, k);
  const last = turns - 2;
  bodies.push([system, obs[0], ...obs.slice(last + 1, last + k), question(turns - 1)]);
  return bodies;
}

function lookbackTrace(r, turns, w, k = 4) {
  return lookbackBodies(asUsers(Array.from({ length: turns + k - 2 }, (_, i) => observation(r, i, w))), turns, k);
}

// ---------------------------------------------------------------- pictures
// A seeded picture as a PNG (8-bit RGB, no interlace): a background and three rectangles of
// random colours. Written here (zlib's deflate and the PNG CRC), the same bytes on every host.
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

// (w x h; a square draws the same bytes as before sizes were added)
function picturePng(r, w, h = w) {
  const colour = () => [0, 1, 2].map(() => Math.floor(r() * 256));
  const px = Buffer.alloc(w * h * 3);
  const paint = (x0, y0, x1, y1, c) => {
    for (let y = y0; y < y1; ++y) for (let x = x0; x < x1; ++x) px.set(c, (y * w + x) * 3);
  };
  paint(0, 0, w, h, colour());
  for (let i = 0; i < 3; ++i) {
    const [x0, y0] = [Math.floor(r() * w), Math.floor(r() * h)];
    paint(x0, y0, Math.min(w, x0 + 8 + Math.floor(r() * w / 2)), Math.min(h, y0 + 8 + Math.floor(r() * h / 2)), colour());
  }
  const rows = Buffer.alloc(h * (w * 3 + 1));  // filter byte 0 (none) before each row
  for (let y = 0; y < h; ++y) px.copy(rows, y * (w * 3 + 1) + 1, y * w * 3, (y + 1) * w * 3);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);  // depth 8, RGB, deflate, filter 0, no interlace
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', ihdr),
    pngChunk('IDAT', zlib.deflateSync(rows, { level: 9 })), pngChunk('IEND', Buffer.alloc(0))]);
}

// Picture observation i: a user message of a short text and the picture as an image_url part.
const pictureMessage = (r, i, [w, h]) => ({ role: 'user', content: [
  { type: 'text', text: `Picture ${i + 1}:` },
  { type: 'image_url', image_url: { url: `data:image/png;base64,${picturePng(r, w, h).toString('base64')}` } }] });

const pictures = (r, n, m) => Array.from({ length: n }, (_, i) => pictureMessage(r, i, pictureSize(m, i)));

// The picture window: K pictures per turn, one more each turn, the oldest evicted.
const pictureTrace = (r, turns, m) => slideBodies(pictures(r, turns + m.images - 1, m), turns, m.images);

// The picture look-back: the window slides for turns - 1 turns, then picture 1 comes back.
const pictureLookbackTrace = (r, turns, m) =>
  lookbackBodies(pictures(r, turns + m.images - 2, m), turns, m.images);

// ---------------------------------------------------------------- audio clips
// A seeded clip as a WAV (16 kHz mono 16-bit PCM, so that neither server resamples it): 1 to 2 s
// of a linear chirp between two random frequencies with 1 to 3 harmonics, under a half-sine
// envelope (peak below half of full scale). The same bytes on every host.
const CLIP_RATE = 16000;

function wavHeader(samples) {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + samples * 2, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);  // the fmt chunk's size
  h.writeUInt16LE(1, 20);   // PCM
  h.writeUInt16LE(1, 22);   // mono
  h.writeUInt32LE(CLIP_RATE, 24);
  h.writeUInt32LE(CLIP_RATE * 2, 28);  // bytes a second
  h.writeUInt16LE(2, 32);   // bytes a frame
  h.writeUInt16LE(16, 34);  // bits a sample
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(samples * 2, 40);
  return h;
}

function clipWav(r) {
  const n = Math.round((1 + Math.floor(r() * 5) / 4) * CLIP_RATE);  // 1, 1.25, .. 2 s
  const f0 = 150 + r() * 850, f1 = 150 + r() * 2850, harmonics = 1 + Math.floor(r() * 3);
  const data = Buffer.alloc(n * 2);
  let phase = 0;
  for (let i = 0; i < n; ++i) {
    phase += (2 * Math.PI * (f0 + ((f1 - f0) * i) / n)) / CLIP_RATE;
    let x = 0;
    for (let h = 1; h <= harmonics; ++h) x += Math.sin(h * phase) / h;
    data.writeInt16LE(Math.round(8000 * Math.sin((Math.PI * i) / n) * x), i * 2);  // |x| < 1.84
  }
  return Buffer.concat([wavHeader(n), data]);
}

// Clip observation i: a user message of a short text and the clip as an input_audio part.
const clipMessage = (r, i) => ({ role: 'user', content: [
  { type: 'text', text: `Clip ${i + 1}:` },
  { type: 'input_audio', input_audio: { data: clipWav(r).toString('base64'), format: 'wav' } }] });

const clips = (r, n) => Array.from({ length: n }, (_, i) => clipMessage(r, i));

// The clip window and its look-back, as the picture ones.
const clipTrace = (r, turns, m) => slideBodies(clips(r, turns + m.clips - 1), turns, m.clips);
const clipLookbackTrace = (r, turns, m) => lookbackBodies(clips(r, turns + m.clips - 2), turns, m.clips);

// The mini-VL's frame window (scripts/minivl_frames.py --bodies): each question a chat request of
// the frames it sees (PNG image_url parts) and its words, with its gold answer. A folder made with
// --binding reorder|recall is the trace frames-reorder / frames-recall (views that re-sort the
// frames or put an evicted one back; `info` keeps each question's situation and whether it binds).
const frameTraceName = (dir) => {
  const { config } = JSON.parse(fs.readFileSync(path.join(dir, 'trace.json'), 'utf8'));
  return config.binding ? `frames-${config.binding}` : 'frames';
};

function frameTrace(dir) {
  const bodies = fs.readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const { questions } = JSON.parse(fs.readFileSync(path.join(dir, 'trace.json'), 'utf8'));
  const info = (q) => ({ type: q.type, kind: q.kind, question: q.question, view: q.stream_frames,
                         ...(q.binds !== undefined ? { binds: q.binds, needs: q.answer_frames } : {}) });
  return { name: frameTraceName(dir),
           turns: bodies.map((b, i) => ({ ...b, gold: questions[i].gold, info: info(questions[i]) })) };
}

function makeTraces(names, seed, turns, model) {
  if (model.frames) return model.frames.map(frameTrace);
  const text = { chat: chatTrace, window: windowTrace, rerank: rerankTrace, tools: toolsTrace, lookback: lookbackTrace,
    crossconv: crossconvTrace };
  const media = model.images ? { images: pictureTrace, imagelookback: pictureLookbackTrace }
    : model.clips ? { clips: clipTrace, cliplookback: clipLookbackTrace } : null;
  const gens = media ?? text;
  const w = itemWords(model.ctx);
  return names.map((name, i) => {
    if (!gens[name]) throw new Error(`--traces: no trace named ${name}${media ? ` for this model (${Object.keys(media).join(', ')})` : ''}`);
    const r = rng(seed * 7919 + i);
    const bodies = media ? gens[name](r, turns, model) : gens[name](r, turns, w);
    return { name, turns: bodies.map((b) => (Array.isArray(b) ? { messages: b } : b)) };
  });
}

// A turn's body with the reference's replies filled in (chat); the same bytes for every arm.
function resolveBody(turn, replies) {
  const { gold, info, ...body } = turn;  // the gold answer and info are the tool's, not the request's
  return { ...body, messages: body.messages.map((m) => {
    if (m.replyOf === undefined) return m;
    if (replies[m.replyOf] === undefined) throw new Error(`no reply to turn ${m.replyOf} to resend (its reference turn failed)`);
    return { role: 'assistant', content: replies[m.replyOf] };
  }) };
}

// The body as the report lists it: a reply nobody gave stays a marker.
function sentBody(turn, replies) {
  try {
    return resolveBody(turn, replies);
  } catch (e) {
    return { ...turn, unresolved: e.message };
  }
}

// ---------------------------------------------------------------- servers
const freePort = () => new Promise((ok) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});

const tail = (file, n = 6) => fs.readFileSync(file, 'utf8').trim().split('\n').slice(-n).join('\n');

// Starts an arm's server; resolves to { proc, port, log } or { error } (it exited or never got
// healthy: an unknown flag, a model it cannot load).
async function startServer(argv, logFile, timeoutMs = 60000) {
  const port = await freePort();
  argv = argv(port);
  const log = fs.openSync(logFile, 'w');
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', log, log] });
  let exited = null;
  proc.on('exit', (code, sig) => { exited = `exited with ${code ?? sig}`; });
  proc.on('error', (e) => { exited = e.message; });
  const cmd = argv.join(' ');
  for (const t0 = Date.now(); Date.now() - t0 < timeoutMs;) {
    if (exited) return { error: `server ${exited}: ${tail(logFile, 3).replace(/\n/g, ' / ')}`, cmd };
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return { proc, port, cmd };
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill();
  return { error: `server not healthy after ${timeoutMs} ms: ${tail(logFile, 3).replace(/\n/g, ' / ')}`, cmd };
}

const stopServer = (s) => new Promise((ok) => {
  if (!s.proc || s.proc.exitCode !== null) return ok();
  s.proc.on('exit', ok);
  s.proc.kill();
});

// ---------------------------------------------------------------- one turn
const tokenKey = (e) => (e.bytes ? e.bytes.join(',') : `s:${e.token}`);

// Sends one body (streamed) and returns what the turn measured.
async function sendTurn(client, body, opts, extra) {
  const t0 = performance.now();
  let ttft = null, content = '', finish = null, usage = null, timings = null;
  const tokens = [];
  const stream = await client.chat.completions.create({
    model: 'replay', ...body, ...extra, stream: true, stream_options: { include_usage: true },
    temperature: 0, max_tokens: opts.maxTokens,
    ...(opts.topLogprobs ? { logprobs: true, top_logprobs: opts.topLogprobs } : {}) });
  for await (const chunk of stream) {
    const c = chunk.choices?.[0];
    if (c?.delta?.content && ttft === null) ttft = performance.now() - t0;
    if (c?.delta?.content) content += c.delta.content;
    for (const e of c?.logprobs?.content ?? [])
      tokens.push({ key: tokenKey(e), token: e.token, top: (e.top_logprobs ?? []).map((x) => [tokenKey(x), x.logprob]) });
    if (c?.finish_reason) finish = c.finish_reason;
    if (chunk.usage) usage = chunk.usage;
    if (chunk.timings) timings = chunk.timings;
  }
  const total = performance.now() - t0;
  return { ttft_ms: ttft ?? total, no_content: ttft === null, total_ms: total, content, finish_reason: finish,
           ...accounting(usage, timings), tokens };
}

// One turn; a server that refuses logprobs for this body (llama-server: "logprobs is not supported
// with tools + stream") gets it again without them (timed, no fidelity), saying so.
async function tryTurn(client, turn, replies, opts, extra) {
  let body;
  try {
    body = resolveBody(turn, replies);
  } catch (e) {
    return { error: e.message };
  }
  try {
    return await sendTurn(client, body, opts, extra);
  } catch (e) {
    const msg = String(e.message || e);
    if (!(e.status === 400 && /logprobs/.test(msg))) return { error: msg };
    try {
      return { ...(await sendTurn(client, body, { ...opts, topLogprobs: 0 }, extra)), logprobs_refused: msg };
    } catch (e2) {
      return { error: String(e2.message || e2) };
    }
  }
}

// Prompt tokens and those recomputed, from whichever accounting the server sent.
function accounting(usage, timings) {
  const prompt = usage?.prompt_tokens ?? null;
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  let recomputed = null, source = 'none';
  if (timings && typeof timings.prompt_n === 'number') { recomputed = timings.prompt_n; source = 'timings.prompt_n'; }
  else if (prompt !== null && typeof cached === 'number') { recomputed = prompt - cached; source = 'usage.cached_tokens'; }
  else if (prompt !== null && typeof usage?.kamera?.reused_tokens === 'number') {  // before cached_tokens
    recomputed = prompt - usage.kamera.reused_tokens; source = 'usage.kamera.reused_tokens';
  }
  return { prompt_tokens: prompt, cached_tokens: cached ?? null, recomputed, recomputed_source: source,
           kamera_usage: usage?.kamera ?? null,
           llama_timings: timings ? { prompt_n: timings.prompt_n, prompt_ms: timings.prompt_ms, cache_n: timings.cache_n } : null };
}

// ---------------------------------------------------------------- fidelity
function klTop(refTop, armTop) {
  const P = new Map(refTop.map(([k, lp]) => [k, Math.exp(lp)]));
  const Q = new Map(armTop.map(([k, lp]) => [k, Math.exp(lp)]));
  const union = [...new Set([...P.keys(), ...Q.keys()])];
  const fill = (D) => {
    const listed = [...D.values()], missing = union.filter((k) => !D.has(k));
    const mass = Math.max(0, 1 - listed.reduce((s, p) => s + p, 0));
    const share = missing.length ? Math.min(mass / missing.length, Math.min(...listed)) : 0;
    const v = union.map((k) => (D.has(k) ? D.get(k) : share));
    v.push(mass - share * missing.length);
    const f = v.map((p) => Math.max(p, 1e-9)), s = f.reduce((a, b) => a + b, 0);
    return f.map((p) => p / s);
  };
  const p = fill(P), q = fill(Q);
  return p.reduce((s, pi, i) => s + pi * Math.log(pi / q[i]), 0);
}

const withEnd = (turn) => [...turn.tokens.map((t) => t.key), ...(turn.finish_reason === 'stop' ? ['<end>'] : [])];

function fidelity(ref, arm) {
  if (!ref?.tokens?.length || !arm?.tokens?.length) return null;
  const a = withEnd(ref), b = withEnd(arm);
  let d = 0;
  while (d < a.length && d < b.length && a[d] === b[d]) ++d;
  const kls = [];
  for (let i = 0; i <= d && i < ref.tokens.length && i < arm.tokens.length; ++i)
    kls.push(klTop(ref.tokens[i].top, arm.tokens[i].top));
  const n = Math.max(a.length, b.length);
  return { kl_first: kls.length ? kls[0] : null, kl_prefix: kls.length ? mean(kls) : null,
           dlogp_first: maxLogprobGap(ref.tokens[0].top, arm.tokens[0].top),
           ref_top_mass: ref.tokens[0].top.reduce((s, [, lp]) => s + Math.exp(lp), 0),
           common_prefix: d, agreement: n ? d / n : 1 };
}

// The largest |logprob difference| over the tokens both top sets list: sensitive where the top
// sets hold little of the mass (random weights), which the coarsened KL is not.
function maxLogprobGap(refTop, armTop) {
  const P = new Map(refTop);
  return armTop.reduce((m, [k, lp]) => (P.has(k) ? Math.max(m, Math.abs(P.get(k) - lp)) : m), 0);
}

// ---------------------------------------------------------------- replay
async function replayArm(arm, model, traces, opts, replies) {
  const logFile = path.join(opts.out, `${model.name}-${arm.name}.log`);
  if (arm.needs === 'llama' && !model.llama)
    return { arm: arm.name, error: `llama-server cannot load ${model.path} (no GGUF of it given: --model ...,llama=PATH)` };
  const server = await startServer((port) => arm.command(model, port, opts.threads), logFile);
  if (server.error) return { arm: arm.name, cmd: server.cmd, error: server.error };
  const { OpenAI } = opts;
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'none', maxRetries: 0 });
  const out = { arm: arm.name, cmd: server.cmd, traces: {} };
  try {
    for (const trace of traces) {
      replies[trace.name] ??= [];
      out.traces[trace.name] = [];
      for (const [t, turn] of trace.turns.entries()) {
        let rec;
        rec = await tryTurn(client, turn, replies[trace.name], opts, arm.extra);
        if (replies[trace.name][t] === undefined && !rec.error) replies[trace.name][t] = rec.content || '...';
        if (turn.gold !== undefined) rec.correct = !rec.error && (rec.content ?? '').trim() === turn.gold;
        out.traces[trace.name].push({ turn: t, ...(turn.info ? { info: turn.info, gold: turn.gold } : {}), ...rec });
        if (opts.gapMs > 0) await new Promise((done) => setTimeout(done, opts.gapMs));
      }
    }
  } finally {
    await stopServer(server);
  }
  return out;
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
function nearestRank(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

// Attaches fidelity against the arm's reference (the first of its refs that ran).
function attachFidelity(results) {
  const byName = new Map(results.map((r) => [r.arm, r]));
  for (const r of results) {
    const ref = (r.refCandidates ?? []).map((n) => byName.get(n)).find((x) => x && !x.error);
    r.reference = r.refCandidates ? ref?.arm ?? null : r.arm;
    if (r.error || !r.refCandidates || !ref) continue;
    for (const [trace, turns] of Object.entries(r.traces))
      turns.forEach((turn, t) => { turn.fidelity = fidelity(ref.traces[trace]?.[t], turn); });
  }
  attachCrossCheck(results);
}

// A llama-server reference against kamera's (the same body, both re-prefilled in full): how far
// the two implementations agree on the model and the prompt; kept apart from the arms' fidelity.
function attachCrossCheck(results) {
  const kref = results.find((r) => r.server === 'kamera' && !r.refCandidates && !r.error);
  for (const r of results) {
    if (!kref || r.server !== 'llama' || r.refCandidates || r.error) continue;
    r.crossReference = kref.arm;
    for (const [trace, turns] of Object.entries(r.traces))
      turns.forEach((turn, t) => { turn.cross = fidelity(kref.traces[trace]?.[t], turn); });
  }
}

function summarize(turns, self) {
  const ok = turns.filter((t) => !t.error);
  if (!ok.length) return { error: turns[0]?.error ?? 'no turns' };
  const ttft = ok.map((t) => t.ttft_ms), rec = ok.map((t) => t.recomputed);
  const fid = ok.map((t) => t.fidelity).filter(Boolean);
  return { ttft_p50: nearestRank(ttft, 0.5), ttft_p99: nearestRank(ttft, 0.99),
           recomputed_mean: rec.every((x) => x !== null) ? mean(rec) : null, recomputed: rec,
           prompt: ok.map((t) => t.prompt_tokens), errors: turns.length - ok.length,
           first_error: turns.find((t) => t.error)?.error ?? null,
           kl_first: self ? 0 : fid.length ? mean(fid.map((f) => f.kl_first ?? 0)) : null,
           kl_prefix: self ? 0 : fid.length ? mean(fid.map((f) => f.kl_prefix ?? 0)) : null,
           agreement: self ? 1 : fid.length ? mean(fid.map((f) => f.agreement)) : null,
           dlogp_first: self ? 0 : fid.length ? Math.max(...fid.map((f) => f.dlogp_first)) : null,
           ref_top_mass: fid.length ? mean(fid.map((f) => f.ref_top_mass)) : null,
           accuracy: turns.some((t) => t.correct !== undefined) ? mean(turns.map((t) => (t.correct ? 1 : 0))) : null,
           ...crossSummary(ok) };
}

function crossSummary(turns) {
  const c = turns.map((t) => t.cross).filter(Boolean);
  return c.length ? { cross_kl_first: mean(c.map((f) => f.kl_first ?? 0)), cross_agreement: mean(c.map((f) => f.agreement)) } : {};
}

// ---------------------------------------------------------------- report
const fmtE = (x) => (x === null || x === undefined ? '-' : x === 0 ? '0' : Number(x).toExponential(1));
const fmt = (x, d = 1) => (x === null || x === undefined ? '-' : Number(x).toFixed(d));

// An arm whose server refused some turns (and not all): how many, and the first refusal.
const armCell = (r, s) => (s.errors ? `${r.arm} (${s.errors} turns failed: ${s.first_error.slice(0, 120)})` : r.arm);

function referenceCell(r, s) {
  if (s.cross_agreement === undefined) return r.reference ?? '-';
  return `${r.reference} (vs ${r.crossReference}: ${fmt(s.cross_agreement * 100, 1)}%, KL ${fmt(s.cross_kl_first, 4)})`;
}

function markdown(report) {
  const lines = [`# Replay (issue 25)`, '', `host: \`${JSON.stringify(report.host)}\``, '',
    `command: \`${report.command}\``, '',
    `TTFT in ms (p99: nearest rank over the turns); recomputed = prompt tokens the server ran a forward on; `
    + `KL = KL(p_ref || p_arm) nats at the first generated position / mean over the common greedy prefix; `
    + `agreement = common greedy prefix / longer output (the reference row reads 1 by definition).`, ''];
  for (const model of report.models) {
    for (const trace of model.traceNames) {
      const turns = model.traces.find((t) => t.name === trace)?.bodies.length ?? model.turns;  // a frame trace: its questions
      lines.push(`## ${model.name} · ${trace}`, '', `${turns} turns, max_tokens ${model.maxTokens}, context ${model.ctx}`
        + (model.images ? `, ${model.images} pictures ${model.sizes ? `of ${model.sizes.map((s) => s.join(' x ')).join(', ')} in turn`
          : `of ${model.side} x ${model.side}`} per window` : '')
        + (model.clips ? `, ${model.clips} clips of 1 to 2 s at 16 kHz per window` : ''), '',
        '| arm | TTFT p50 | TTFT p99 | recomputed per turn: mean (list) | prompt tokens | KL first / prefix | max \\|Δlogp\\| first | argmax agreement | answer accuracy | reference |',
        '|---|---|---|---|---|---|---|---|---|---|');
      for (const r of model.results) {
        if (r.error) { lines.push(`| ${r.arm} | failed: ${r.error.slice(0, 160)} | | | | | | | | |`); continue; }
        const s = r.summary[trace];
        if (s.error) { lines.push(`| ${r.arm} | failed: ${s.error.slice(0, 120)} | | | | | | | | |`); continue; }
        lines.push(`| ${armCell(r, s)} | ${fmt(s.ttft_p50)} | ${fmt(s.ttft_p99)} | ${fmt(s.recomputed_mean)} (${s.recomputed.join(', ')}) `
          + `| ${s.prompt.join(', ')} | ${fmt(s.kl_first, 4)} / ${fmt(s.kl_prefix, 4)} | ${fmtE(s.dlogp_first)} | ${s.agreement === null ? (r.reference ? '- (no logprobs)' : '- (no reference)') : `${fmt(s.agreement * 100, 1)}%`} `
          + `| ${s.accuracy === null ? '-' : `${fmt(s.accuracy * 100, 1)}%`} | ${referenceCell(r, s)} |`);
      }
      lines.push('', ...answerLines(model, trace));
    }
  }
  return lines.join('\n');
}

// A binding frame trace's questions (situation, whether a frame it needs follows a new
// neighbour, gold) and every arm's answer, marked * where it is wrong.
function answerLines(model, trace) {
  const ran = model.results.filter((r) => !r.error && r.traces[trace]);
  const turns = ran[0]?.traces[trace];
  if (!turns?.some((t) => t.info?.binds !== undefined)) return [];
  const lines = [`| # | situation | binds | question | view (stream frames) | needs | gold | ${ran.map((r) => r.arm).join(' | ')} |`,
    `|---|---|---|---|---|---|---|${ran.map(() => '---|').join('')}`];
  turns.forEach((t, i) => {
    const answers = ran.map((r) => {
      const a = r.traces[trace][i];
      return a.error ? 'error' : `${(a.content ?? '').trim()}${a.correct ? '' : '*'}`;
    });
    lines.push(`| ${i} | ${t.info.type} | ${t.info.binds ? 'yes' : 'no'} | ${t.info.question} | ${t.info.view.join(' ')} | ${t.info.needs.join(' ')} `
      + `| ${t.gold} | ${answers.join(' | ')} |`);
  });
  return [...lines, ''];
}

function hostInfo(kamera) {
  try {
    return JSON.parse(execFileSync(kamera, ['info', '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
  } catch (e) {
    return { error: `kamera info --json: ${e.message}` };
  }
}

async function replayModel(model, arms, globalOpts) {
  const opts = { ...globalOpts, ...model.overrides };
  const traces = makeTraces(opts.traceNames, opts.seed, opts.turns, model);
  const replies = {};  // the reference's replies: the chat trace's assistant messages
  const results = [];
  for (const arm of arms) {
    console.error(`replay: ${model.name} ${arm.name}`);
    const r = await replayArm(arm, model, traces, opts, replies);
    r.refCandidates = arm.ref;
    r.server = arm.server;
    if (r.error) console.error(`replay: ${arm.name} failed: ${r.error.split('\n')[0]}`);
    results.push(r);
  }
  attachFidelity(results);
  for (const r of results)
    if (!r.error) r.summary = Object.fromEntries(Object.entries(r.traces).map(([n, t]) => [n, summarize(t, r.reference === r.arm)]));
  return { name: model.name, path: model.path, ctx: model.ctx, traceNames: opts.traceNames,
           ...(model.images ? { mmproj: model.mmproj, images: model.images, side: model.side, sizes: model.sizes } : {}),
           ...(model.clips ? { mmproj: model.mmproj, clips: model.clips } : {}),
           turns: opts.turns, maxTokens: opts.maxTokens,
           traces: traces.map((t) => ({ name: t.name, bodies: t.turns.map((b) => sentBody(b, replies[t.name] ?? [])) })),
           results };
}


function writeReport(report, out) {
  fs.writeFileSync(path.join(out, 'replay.json'), JSON.stringify(report, null, 1));
  fs.writeFileSync(path.join(out, 'replay.md'), markdown(report));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  KAMERA_FLAGS = args['kamera-flags'].split(' ').filter((f) => f);
  const opts = { OpenAI: loadClient(args.npm), out: path.resolve(args.out), maxTokens: args['max-tokens'],
                 topLogprobs: args['top-logprobs'], seed: args.seed, turns: args.turns, threads: args.threads,
                 traceNames: args.traces.split(','), gapMs: args['gap-ms'] };
  fs.mkdirSync(opts.out, { recursive: true });
  const arms = selectArms(defaultArms(args), args.arms);
  // References first: the chat trace's bodies hold the reference's replies.
  arms.sort((a, b) => (a.ref ? 1 : 0) - (b.ref ? 1 : 0));
  const report = { command: `node ${process.argv.slice(1).join(' ')}`, host: hostInfo(args.kamera),
                   date: new Date().toISOString(), cpus: os.cpus().length, models: [] };
  for (const spec of args.model) {
    report.models.push(await replayModel(parseModel(spec), arms, opts));
    writeReport(report, opts.out);  // after every model: a long run keeps what it measured
  }
  console.log(`replay: wrote ${path.join(opts.out, 'replay.json')} and replay.md`);
}

main().catch((e) => {
  console.error(`replay: ${e.stack || e}`);
  process.exit(1);
});
