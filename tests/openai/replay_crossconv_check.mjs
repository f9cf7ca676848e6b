// scripts/replay.mjs's crossconv trace on stories260K (issue 52, item 4): conversation 2 opens
// with a message of its own, then conversation 1's note (served from conversation 1's context);
// from its second turn on, the default policy serves the whole earlier turn, reply included, as
// its prefix (prefix-approximate) and recomputes no more than prefix-only reuse does once that
// has recomputed the note (before: the note and questions again from the segment index and the
// reply recomputed: as many more tokens a turn as the reply holds); prefix-only reuse never
// reports an approximate prefix and says what the re-prefill says.
//
//   node tests/openai/replay_crossconv_check.mjs --kamera build/bin/kamera --npm build/npm --models ../shared/models
// Exits 77 (ctest's skip) with the reason when the model or the npm client is absent.
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

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-crossconv-'));
const results = replayResults(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `stories260K=${model}`, '--arms', 'kamera-patch,kamera-prefix,kamera-reprefill',
  '--traces', 'crossconv', '--turns', '4', '--max-tokens', '8'], out);
const arm = (name) => results.find((r) => r.arm === name);
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };
const served = (t, source) => (t.kamera_usage?.segments ?? [])
  .filter((s) => s.source === source).reduce((n, s) => n + s.tokens, 0);

const patch = arm('kamera-patch'), prefix = arm('kamera-prefix');
for (const a of [patch, prefix]) expect(a && !a.error, `${a?.arm} ran (${a?.error})`);
if (!failures.length) {
  const p = patch.traces.crossconv, x = prefix.traces.crossconv;
  expect(p.length === 4 && p.every((t) => !t.error), `four turns answered: ${JSON.stringify(p.map((t) => t.error))}`);
  expect(served(p[1], 'context-nearest') > 0, `conversation 2's first turn is served the note from conversation 1 (${JSON.stringify(p[1].kamera_usage?.segments)})`);
  for (const k of [2, 3]) {
    expect(served(p[k], 'prefix-approximate') > served(p[1], 'context-nearest'),
           `turn ${k + 1} is served its first turn's rows as an approximate prefix (${JSON.stringify(p[k].kamera_usage?.segments)})`);
    expect(p[k].recomputed <= x[k].recomputed + 2,
           `turn ${k + 1} recomputes its new tokens only: ${p[k].recomputed} against prefix-only reuse's ${x[k].recomputed}`);
    expect(served(x[k], 'prefix-approximate') === 0, `prefix-only reuse never takes an approximate prefix (turn ${k + 1})`);
    expect(x[k].fidelity && x[k].fidelity.agreement === 1 && x[k].fidelity.kl_first < 1e-6,
           `prefix-only reuse says what the re-prefill says (turn ${k + 1}: ${JSON.stringify(x[k].fidelity)})`);
    expect(p[k].fidelity && p[k].fidelity.kl_first < 1e-2,
           `turn ${k + 1}'s first distribution stays near the re-prefill's (${JSON.stringify(p[k].fidelity)})`);
  }
}
finish(failures, out, 'crossconv replay check');
