// `make demo`, step 2: runs the agent of examples/frame_agent.mjs (the official openai client,
// nothing of kamera) over the mini-VL's frame stream against `kamera serve`, and sends each of
// its requests again, unchanged but for "reuse": "reprefill", to a reference server (the same
// binary and model) that reuses nothing. Prints one JSON record per turn (scripts/demo_turns.jq
// turns them into the demo's lines):
//   {step, frames, look_back, question, gold, answer, usage, reference: {answer, usage}}
//
//   node scripts/demo_agent.mjs --url http://127.0.0.1:P --reference http://127.0.0.1:Q \
//        --frames DIR --npm build/npm
// DIR holds the stream's frames (frame-NNNN.png) and demo.json, what `kamera demo --json
// --save-frames DIR` wrote: its questions, their gold answers and, on a look-back turn, the
// evicted frame. Exits 77 when the openai client is not under --npm (the demo then uses curl).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { watchFrames } from '../examples/frame_agent.mjs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));
let OpenAI;
try {
  OpenAI = createRequire(path.join(path.resolve(args.npm || 'build/npm'), 'package.json'))('openai').OpenAI;
} catch {
  process.exit(77);
}

const demo = JSON.parse(fs.readFileSync(path.join(args.frames, 'demo.json'), 'utf8'));
const frames = [];
for (let i = 0; i < demo.config.frames; ++i) {
  const png = fs.readFileSync(path.join(args.frames, `frame-${String(i).padStart(4, '0')}.png`));
  frames.push(`data:image/png;base64,${png.toString('base64')}`);
}
const questions = new Map(), asked = new Map();
for (const st of demo.steps.filter((s) => s.question)) {
  questions.set(st.step, { text: st.question.text, lookBack: st.recall ? st.recall.frame : null });
  asked.set(st.step, st.question);
}

const client = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
const agent = client(args.url), reference = client(args.reference);
const words = (r) => r.choices[0].message.content.trim();
for await (const turn of watchFrames(agent, { frames, window: demo.config.window, questions })) {
  const q = asked.get(turn.step);
  if (JSON.stringify(turn.frames) !== JSON.stringify(q.frames))
    throw new Error(`turn ${turn.step}: the agent sent frames ${turn.frames}, the demo asked about ${q.frames}`);
  const again = await reference.chat.completions.create({ ...turn.request, reuse: 'reprefill' });
  console.log(JSON.stringify({
    step: turn.step, frames: turn.frames,
    look_back: questions.get(turn.step).lookBack, question: turn.question, gold: q.gold, answer: words(turn.response),
    usage: turn.response.usage, reference: { answer: words(again), usage: again.usage } }));
}
