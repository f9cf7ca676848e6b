// scripts/replay.mjs's picture traces on two committed pairs of towers with one fixed picture
// size (tests/data/internvl: InternVL, tiles of 32, 16 rows a tile; tests/data/llava: LLaVA-1.5,
// 32 pixels, 64 rows), the command of docs/BENCHMARKS.md's table for them with its kamera arms
// (llama-server is not needed): pictures of 32 x 32, which neither server resizes or tiles, in a
// window of 4; on every slide the default policy serves the 3 survivors' rows from the cache and
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
const pair = (name) => `${name}=${path.join(root, 'tests', 'data', name)}/decoder.gguf,`
  + `mmproj=${path.join(root, 'tests', 'data', name)}/mmproj.gguf,images=4,tower=32`;
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-towers-'));
const models = replayModels(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', pair('internvl'), '--model', pair('llava'),
  '--arms', 'kamera-default,kamera-prefix,kamera-reprefill'], out, 150000);
const rows = { internvl: 16, llava: 64 };
const failures = models.flatMap((m) => windowFailures(m.results, ['images', 'imagelookback'], { K: 4, rows: rows[m.name], ratio: 0.5 })
  .map((f) => `${m.name}: ${f}`));
finish(failures, out, 'replay towers check');
