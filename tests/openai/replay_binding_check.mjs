// scripts/replay.mjs on the mini-VL's binding traces (docs/RESULTS.md, "Binding traces"): the
// commands of that section, run as written (scripts/minivl_frames.py --binding reorder and
// --binding recall on Test stream 0, 48 frames; the replay's kamera arms), and what the section
// says of them:
//   - frames-reorder: keep serves the re-sorted frames from the cache (recomputes less than half of
//     prefix-only reuse) and answers fewer questions rightly than re-prefill; prefix answers as
//     re-prefill does;
//   - frames-recall: keep's greedy answers differ from re-prefill's on at least one question;
//   - the repair budget on frames-reorder: 5% and 15% answer as keep (a frame is 4 tokens: nothing
//     fits), 30% answers more questions rightly than keep with fewer tokens recomputed than
//     prefix, 100% answers every question as re-prefill.
//
//   node tests/openai/replay_binding_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client or python3 is absent.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayResults, root } from './replay_harness.mjs';

const args = cliArgs();
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-binding-'));
const arms = 'kamera-prefix,kamera-keep,kamera-patch,kamera-repair-5,kamera-repair-15,kamera-repair-30,'
  + 'kamera-repair-50,kamera-repair-100,kamera-reprefill';

function makeTrace(mode) {
  const dir = path.join(out, `frames-${mode}`);
  const made = spawnSync('python3', [path.join(root, 'scripts', 'minivl_frames.py'), '--kamera', args.kamera,
    '--binding', mode, '--frames', '48', '--clip', '0', '--out', dir, '--bodies'], { encoding: 'utf8', timeout: 120000 });
  if (made.error) {
    console.log(`SKIP: python3 is not available (${made.error.message})`);
    process.exit(77);
  }
  if (made.status !== 0) {
    console.log(`FAIL: minivl_frames.py --binding ${mode} exited ${made.status}\n${made.stderr}`);
    process.exit(1);
  }
  return dir;
}

const model = path.join(root, 'models', 'minivl');
const frames = ['reorder', 'recall'].map(makeTrace).join('+');
const results = replayResults(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `minivl=${model}/minivl.gguf,mmproj=${model}/minivl-mmproj.gguf,frames=${frames},template=none,max_tokens=1`,
  '--arms', arms], out, 300000);
const arm = (name) => results.find((r) => r.arm === name);
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };
for (const name of arms.split(',')) expect(arm(name) && !arm(name).error, `${name} ran (${arm(name)?.error})`);
if (!failures.length) {
  const turns = (a, trace) => arm(a).traces[trace];
  const right = (a, trace) => turns(a, trace).filter((t) => t.correct).length;
  const recomputed = (a, trace) => turns(a, trace).reduce((s, t) => s + t.recomputed, 0);
  const same = (a, trace) => turns(a, trace).filter((t, i) => t.content === turns('kamera-reprefill', trace)[i].content).length;
  const n = turns('kamera-reprefill', 'frames-reorder').length;
  expect(n === 24 && ['frames-reorder', 'frames-recall'].every((tr) => turns('kamera-keep', tr).every((t) => !t.error)),
         `every question answered (${n} reorder questions)`);
  expect(recomputed('kamera-keep', 'frames-reorder') * 2 < recomputed('kamera-prefix', 'frames-reorder'),
         `keep recomputes less than half of prefix on the reorder (${recomputed('kamera-keep', 'frames-reorder')} vs ${recomputed('kamera-prefix', 'frames-reorder')})`);
  expect(right('kamera-keep', 'frames-reorder') < right('kamera-reprefill', 'frames-reorder'),
         `keep answers fewer reorder questions rightly than re-prefill (${right('kamera-keep', 'frames-reorder')} vs ${right('kamera-reprefill', 'frames-reorder')} of ${n})`);
  expect(same('kamera-prefix', 'frames-reorder') === n, `prefix answers as re-prefill on the reorder (${same('kamera-prefix', 'frames-reorder')} of ${n})`);
  const m = turns('kamera-reprefill', 'frames-recall').length;
  expect(same('kamera-keep', 'frames-recall') < m, `keep differs from re-prefill on a recall question (${same('kamera-keep', 'frames-recall')} of ${m} the same)`);
  const asKeep = (a) => turns(a, 'frames-reorder').every((t, i) => t.content === turns('kamera-keep', 'frames-reorder')[i].content);
  expect(asKeep('kamera-repair-5') && asKeep('kamera-repair-15'), 'repair-5 and repair-15 answer the reorder as keep');
  expect(right('kamera-repair-30', 'frames-reorder') > right('kamera-keep', 'frames-reorder')
         && recomputed('kamera-repair-30', 'frames-reorder') < recomputed('kamera-prefix', 'frames-reorder'),
         `repair-30 answers more reorder questions rightly than keep (${right('kamera-repair-30', 'frames-reorder')}) recomputing less than prefix (${recomputed('kamera-repair-30', 'frames-reorder')})`);
  expect(same('kamera-repair-100', 'frames-reorder') === n, `repair-100 answers as re-prefill on the reorder (${same('kamera-repair-100', 'frames-reorder')} of ${n})`);
  console.log(`reorder: right ${arms.split(',').map((a) => `${a} ${right(a, 'frames-reorder')}`).join(', ')} of ${n}`);
}
finish(failures, out, 'replay binding check');
