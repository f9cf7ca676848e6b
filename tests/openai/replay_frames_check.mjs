// scripts/replay.mjs on the embedded mini-VL's frame window (scripts/minivl_frames.py --bodies:
// the agent demo's 19 questions, each over its window of 6 frames), the commands of
// docs/BENCHMARKS.md's minivl table with two arms: the default policy serves each slide's
// survivors from the previous window's KV, so it recomputes less than half of what prefix-only
// reuse does, and its answer accuracy is within a point of the re-prefill's (the prefix arm).
//
//   node tests/openai/replay_frames_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client or python3 is absent.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayResults, root } from './replay_harness.mjs';

const args = cliArgs();
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-frames-'));
const frames = path.join(out, 'frames');
const made = spawnSync('python3', [path.join(root, 'scripts', 'minivl_frames.py'), '--kamera', args.kamera,
  '--out', frames, '--bodies'], { encoding: 'utf8', timeout: 120000 });
if (made.error) {
  console.log(`SKIP: python3 is not available (${made.error.message})`);
  process.exit(77);
}
if (made.status !== 0) {
  console.log(`FAIL: minivl_frames.py exited ${made.status}\n${made.stderr}`);
  process.exit(1);
}
const model = path.join(root, 'models', 'minivl');
const results = replayResults(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `minivl=${model}/minivl.gguf,mmproj=${model}/minivl-mmproj.gguf,frames=${frames},template=none,max_tokens=1`,
  '--arms', 'kamera-patch,kamera-prefix'], out);
const arm = (name) => results.find((r) => r.arm === name);
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };
const patch = arm('kamera-patch'), prefix = arm('kamera-prefix');
expect(patch && !patch.error && prefix && !prefix.error, `both arms ran (${patch?.error}, ${prefix?.error})`);
if (!failures.length) {
  const sum = (a, k) => a.traces.frames.reduce((s, t) => s + t[k], 0);
  const right = (a) => a.traces.frames.filter((t) => t.correct).length;
  const n = patch.traces.frames.length;
  expect(n === 19 && patch.traces.frames.every((t) => !t.error), `19 questions answered (${n})`);
  expect(sum(patch, 'recomputed') * 2 < sum(prefix, 'recomputed'),
         `the default recomputes less than half of prefix-only reuse (${sum(patch, 'recomputed')} vs ${sum(prefix, 'recomputed')})`);
  expect(right(patch) >= right(prefix), `accuracy within a point of the re-prefill (${right(patch)} vs ${right(prefix)} of ${n})`);
  console.log(`recomputed ${sum(patch, 'recomputed')} vs ${sum(prefix, 'recomputed')}; correct ${right(patch)} vs ${right(prefix)} of ${n}`);
}
finish(failures, out, 'replay frames check');
