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
export const replayResults = (argv, out, timeout = 120000) => replayModels(argv, out, timeout)[0].results;

// The same, every model of the report (name, results, ...).
export function replayModels(argv, out, timeout = 120000) {
  const run = spawnSync(process.execPath, [path.join(root, 'scripts', 'replay.mjs'), ...argv, '--out', out],
                        { encoding: 'utf8', timeout });
  process.stdout.write(run.stdout ?? '');
  if (run.status === 77) process.exit(77);
  if (run.status !== 0) {
    console.log(`FAIL: replay.mjs exited ${run.status ?? run.signal}\n${run.stderr}`);
    process.exit(1);
  }
  return JSON.parse(fs.readFileSync(path.join(out, 'replay.json'), 'utf8')).models;
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

// The checks of a media window trace and its look-back (pictures, clips: scripts/replay.mjs's
// images / imagelookback, clips / cliplookback) on the kamera arms default, prefix and reprefill:
// every arm answers every turn; after the first turn the default arm has at least the K - 1
// survivors' `rows` each served from the cache beyond what the prefix arm kept and recomputes below
// `ratio` of what the prefix arm does; on the look-back's last turn (traces[1]) all K items' rows
// come from the cache (the returning one too); the re-prefill arm recomputes every prompt token. Returns the failures; prints each trace's sums.
export function windowFailures(results, traces, { K, rows, ratio, turns = 6, label = '' }) {
  const arm = (name) => results.find((r) => r.arm === name);
  const failures = [];
  const expect = (ok, what) => { if (!ok) failures.push(what); };
  const def = arm('kamera-default'), prefix = arm('kamera-prefix'), reprefill = arm('kamera-reprefill');
  for (const a of [def, prefix, reprefill]) expect(a && !a.error, `arm ran (${a?.arm}: ${a?.error})`);
  if (failures.length) return failures;
  for (const trace of traces) {
    const ran = [def, prefix, reprefill].every((a) => a.traces[trace]?.length === turns && a.traces[trace].every((t) => !t.error));
    expect(ran, `${trace}: ${turns} turns answered by every arm`);
    if (!ran) continue;
    def.traces[trace].slice(1).forEach((t, i) => {
      const p = prefix.traces[trace][i + 1], want = (K - 1) * rows;
      expect(t.prompt_tokens === p.prompt_tokens, `${trace} turn ${i + 1}: the same prompt (${t.prompt_tokens} vs ${p.prompt_tokens})`);
      expect(t.cached_tokens - p.cached_tokens >= want, `${trace} turn ${i + 1}: at least ${K - 1} items' ${want} rows `
             + `cached beyond the prefix arm's (${t.cached_tokens} vs ${p.cached_tokens} of ${t.prompt_tokens})`);
      expect(t.recomputed < ratio * p.recomputed, `${trace} turn ${i + 1}: recomputes less than ${ratio} of the prefix `
             + `arm (${t.recomputed} vs ${p.recomputed})`);
    });
    const last = def.traces[trace][turns - 1];
    if (trace === traces[1])  // the look-back's last turn: the returning item and the survivors
      expect(last.cached_tokens >= K * rows, `${trace} turn ${turns - 1}: all ${K} items' ${K * rows} rows cached `
             + `(${last.cached_tokens} of ${last.prompt_tokens})`);
    expect(reprefill.traces[trace].every((t) => t.recomputed === t.prompt_tokens),
           `${trace}: the re-prefill arm recomputes every prompt token`);
    const sum = (a) => a.traces[trace].reduce((s, t) => s + t.recomputed, 0);
    console.log(`${label}${trace}: recomputed ${sum(def)} (default) vs ${sum(prefix)} (prefix) vs ${sum(reprefill)} (reprefill)`);
  }
  return failures;
}
