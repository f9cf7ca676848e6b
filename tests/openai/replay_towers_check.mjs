// scripts/replay.mjs's picture traces on three committed pairs of towers with one fixed picture
// size (tests/data/internvl: InternVL, tiles of 32, 16 rows a tile; tests/data/llava: LLaVA-1.5,
// 32 pixels, 64 rows; tests/data/gemma3: Gemma 3, 64 pixels pooled to 16 rows, its own template),
// the command of docs/BENCHMARKS.md's table for them with its kamera arms (llama-server is not
// needed): pictures of the tower's size, which neither server resizes or tiles, in a window of 4;
// on every slide the default policy serves the 3 survivors' rows from the cache and
// recomputes below half of prefix-only reuse; the look-back's returning picture is served from
// the cache too.
//
//   node tests/openai/replay_towers_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client is absent
// (bash scripts/install-openai-client.sh DIR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayModels, root, windowFailures } from './replay_harness.mjs';

const args = cliArgs();
const pair = (name, tail) => `${name}=${path.join(root, 'tests', 'data', name)}/decoder.gguf,`
  + `mmproj=${path.join(root, 'tests', 'data', name)}/mmproj.gguf,images=4,${tail}`;
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-towers-'));
const models = replayModels(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', pair('internvl', 'tower=32'), '--model', pair('llava', 'tower=32'),
  '--model', pair('gemma3', 'tower=64,template=gemma'),
  '--arms', 'kamera-default,kamera-prefix,kamera-reprefill'], out, 150000);
const rows = { internvl: 16, llava: 64, gemma3: 16 };
const failures = models.flatMap((m) => windowFailures(m.results, ['images', 'imagelookback'], { K: 4, rows: rows[m.name], ratio: 0.5, label: `${m.name} ` })
  .map((f) => `${m.name}: ${f}`));
finish(failures, out, 'replay towers check');
