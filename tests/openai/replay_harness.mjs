// What the replay checks (tests/openai/replay_*check.mjs) share: their command line, a run of
// scripts/replay.mjs whose report they read, and the verdict (the failures, or the report kept).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

// --key value pairs of the command line.
export const cliArgs = () => Object.fromEntries(
  process.argv.slice(2).reduce((a, x, i, all) => (x.startsWith('--') ? [...a, [x.slice(2), all[i + 1]]] : a), []));

// Runs scripts/replay.mjs with argv (--out out added) and returns its report's first model's
// results; exits 77 when the tool skipped, 1 when it failed.
export function replayResults(argv, out, timeout = 120000) {
  const run = spawnSync(process.execPath, [path.join(root, 'scripts', 'replay.mjs'), ...argv, '--out', out],
                        { encoding: 'utf8', timeout });
  process.stdout.write(run.stdout ?? '');
  if (run.status === 77) process.exit(77);
  if (run.status !== 0) {
    console.log(`FAIL: replay.mjs exited ${run.status ?? run.signal}\n${run.stderr}`);
    process.exit(1);
  }
  return JSON.parse(fs.readFileSync(path.join(out, 'replay.json'), 'utf8')).models[0].results;
}

// Prints the failures (or `name passed`, removing out) and exits 1 or 0.
export function finish(failures, out, name) {
  for (const f of failures) console.log(`FAIL: ${f}`);
  if (!failures.length) {
    console.log(`${name} passed`);
    fs.rmSync(out, { recursive: true, force: true });
  } else {
    console.log(`(report in ${out})`);
  }
  process.exit(failures.length ? 1 : 0);
}

// The openai npm client's OpenAI class from npm/node_modules; exits 77 (skipped) without it.
export function loadClient(npm) {
  const require = createRequire(path.join(path.resolve(npm), 'package.json'));
  try {
    return require('openai').OpenAI;
  } catch {
    console.log(`SKIP: the openai npm client is not under ${npm} (bash scripts/install-openai-client.sh ${npm})`);
    process.exit(77);
  }
}
