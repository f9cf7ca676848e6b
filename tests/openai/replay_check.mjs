// scripts/replay.mjs on stories260K (real weights), two kamera arms and a tiny append-only chat:
// the replay tool must measure what a prefix cache does. The arm of exact prefix reuse (--reuse
// prefix) recomputes fewer tokens than the prompt on every turn after the first, the arm that
// reuses nothing (--reuse reprefill, the reference) recomputes the whole prompt, and the cached
// arm's greedy output is the reference's (argmax agreement 1, KL at the first position below 1e-3).
//
//   node tests/openai/replay_check.mjs --kamera build/bin/kamera --npm build/npm --models ../shared/models
// Exits 77 (ctest's skip) with the reason when the models or the npm client are absent.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayResults } from './replay_harness.mjs';

const args = cliArgs();
const model = path.join(path.resolve(args.models || '../shared/models'), 'stories260K', 'stories260K.gguf');
if (!fs.existsSync(model)) {
  console.log(`SKIP: ${model} is absent (the real models live in ../shared)`);
  process.exit(77);
}

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-'));
const results = replayResults(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `stories260K=${model}`, '--arms', 'kamera-prefix,kamera-reprefill', '--traces', 'chat',
  '--turns', '3', '--max-tokens', '4'], out);
const arm = (name) => results.find((r) => r.arm === name);
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };

const cached = arm('kamera-prefix'), cold = arm('kamera-reprefill');
expect(cached && !cached.error, `kamera-prefix ran (${cached?.error})`);
expect(cold && !cold.error, `kamera-reprefill ran (${cold?.error})`);
if (!failures.length) {
  expect(cached.reference === 'kamera-reprefill',
         `the default arm is measured against a reference (${cached.reference})`);
  const turns = cached.traces.chat, coldTurns = cold.traces.chat;
  expect(turns.length === 3 && turns.every((t) => !t.error), `three chat turns answered: ${JSON.stringify(turns.map((t) => t.error))}`);
  for (const t of coldTurns)
    expect(t.recomputed === t.prompt_tokens, `the cold arm recomputes turn ${t.turn}'s whole prompt (${t.recomputed} of ${t.prompt_tokens})`);
  for (const t of turns.slice(1)) {
    expect(t.recomputed < t.prompt_tokens / 2,
           `turn ${t.turn} reuses the previous turn's prompt: ${t.recomputed} of ${t.prompt_tokens} recomputed`);
    expect(t.fidelity && t.fidelity.agreement === 1, `turn ${t.turn} says what the reference says (${JSON.stringify(t.fidelity)})`);
    expect(t.fidelity && t.fidelity.kl_first < 1e-3, `turn ${t.turn}'s first distribution is the reference's (KL ${t.fidelity?.kl_first})`);
  }
  expect(fs.readFileSync(path.join(out, 'replay.md'), 'utf8').includes('| kamera-prefix |'), 'the markdown table has the arm');
}
finish(failures, out, 'replay check');
