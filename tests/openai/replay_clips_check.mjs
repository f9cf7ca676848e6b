// scripts/replay.mjs on the audio traces of the committed tiny Qwen2.5-Omni pair
// (tests/data/qwen25o: a qwen2vl decoder of 2,048 positions and the omni mmproj), the command of
// docs/BENCHMARKS.md's clip table with its kamera arms (llama-server is not needed): a window of
// 2 clips (each 750 rows and its two delimiters: 2 fill the context's 2,048), so every slide
// keeps one clip; the default policy serves that survivor's rows from the previous window's KV
// (usage.prompt_tokens_details.cached_tokens covers them although they are no longer a prefix)
// and recomputes below 0.6 of prefix-only reuse; on the look-back's last turn the evicted clip
// that comes back is served from the cache too.
//
//   node tests/openai/replay_clips_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client is absent
// (bash scripts/install-openai-client.sh DIR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayResults, root, windowFailures } from './replay_harness.mjs';

const args = cliArgs();
const data = path.join(root, 'tests', 'data', 'qwen25o');
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-clips-'));
const K = 2, rows = 750;  // a clip of 1 to 2 s: one 30-s window of 750 rows on both servers
const results = replayResults(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `omni=${data}/decoder.gguf,mmproj=${data}/mmproj.gguf,clips=${K},ctx=2048`,
  '--arms', 'kamera-default,kamera-prefix,kamera-reprefill'], out, 240000);
finish(windowFailures(results, ['clips', 'cliplookback'], { K, rows, ratio: 0.6 }), out, 'replay clips check');
