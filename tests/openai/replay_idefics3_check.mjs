// scripts/replay.mjs's picture traces on the committed SmolVLM pair (tests/data/idefics3: the
// idefics3 tower, 48-pixel tiles of 16 rows, the processor's longest edge 144), the command of
// docs/BENCHMARKS.md's SmolVLM rows with its kamera arms (llama-server is not needed): a window of
// 3 pictures of 144 x 96, 144 x 48, 48 x 144 and 96 x 144 in turn (3 x 2, 3 x 1, 1 x 3 and 2 x 3
// tiles and a global view each). Each picture's rows follow from its size by the processor's
// layout, written here (not read from kamera): the tiles' rows, `<fake_token_around_image>
// <row_r_col_c>` before each tile, a newline after each row of tiles, and the global view's rows
// between `<fake_token_around_image><global-img>` and `<fake_token_around_image>`. Checked:
// every turn's prompt is those rows plus the same number of text tokens on every turn of a trace
// (the layout is the server's); on every slide the default policy recomputes at most what the
// prefix arm does less the survivors' rows (all of the survivors' tiles and tokens come from the
// cache); on the look-back's last turn all 3 pictures' rows are cached; re-prefill recomputes all.
//
//   node tests/openai/replay_idefics3_check.mjs --kamera build/bin/kamera --npm build/npm
// Exits 77 (ctest's skip) with the reason when the npm client is absent
// (bash scripts/install-openai-client.sh DIR).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliArgs, finish, replayModels, root } from './replay_harness.mjs';

const TILE = 48, LONGEST = 144, TILE_ROWS = 16, K = 3, TURNS = 6;
const SIZES = '144x96+144x48+48x144+96x144';

// The rows a picture of w x h takes (Idefics3Processor's prompt; sizes whose longer side is the
// longest edge and whose sides are multiples of the tile, so that the grid is the size / tile).
function layoutRows(w, h) {
  if (Math.max(w, h) !== LONGEST || w % TILE || h % TILE) throw new Error(`size ${w} x ${h} is resized`);
  const rows = h / TILE, cols = w / TILE;
  const global = 3 + TILE_ROWS;  // <fake><global-img> rows <fake>
  return rows * cols * (2 + TILE_ROWS) + rows + global;  // "\n" after each row, "\n\n" the last
}

// The sizes of a body's pictures, from the PNGs' IHDR (width, height at bytes 16 and 20).
function pictureSizes(body) {
  return body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((p) => p.type === 'image_url')
    .map((p) => {
      const png = Buffer.from(p.image_url.url.split(',')[1], 'base64');
      return [png.readUInt32BE(16), png.readUInt32BE(20)];
    });
}

const args = cliArgs();
const dir = path.join(root, 'tests', 'data', 'idefics3');
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'kamera-replay-idefics3-'));
const [model] = replayModels(['--kamera', args.kamera, '--npm', args.npm || 'build/npm',
  '--model', `smolvlm=${dir}/decoder.gguf,mmproj=${dir}/mmproj.gguf,images=${K},sizes=${SIZES}`,
  '--arms', 'kamera-default,kamera-prefix,kamera-reprefill'], out, 150000);

const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); };
const arm = (name) => model.results.find((r) => r.arm === name);
const def = arm('kamera-default'), prefix = arm('kamera-prefix'), reprefill = arm('kamera-reprefill');
for (const a of [def, prefix, reprefill]) expect(a && !a.error, `arm ran (${a?.arm}: ${a?.error})`);
for (const [ti, trace] of (failures.length ? [] : ['images', 'imagelookback']).entries()) {
  const bodies = model.traces.find((t) => t.name === trace).bodies;
  const ran = [def, prefix, reprefill].every((a) => a.traces[trace]?.length === TURNS && a.traces[trace].every((t) => !t.error));
  expect(ran, `${trace}: ${TURNS} turns answered by every arm`);
  if (!ran) continue;
  const rows = bodies.map((b) => pictureSizes(b).map(([w, h]) => layoutRows(w, h)));
  const sum = (xs) => xs.reduce((s, x) => s + x, 0);
  // the same text around the pictures on every turn: prompt = the pictures' rows + a constant
  const text = reprefill.traces[trace].map((t, i) => t.prompt_tokens - sum(rows[i]));
  expect(text.every((n) => n === text[0] && n > 0), `${trace}: prompt minus the layout's rows is one text count (${text.join(', ')})`);
  def.traces[trace].slice(1).forEach((t, j) => {
    const i = j + 1, p = prefix.traces[trace][i];
    // the pictures seen before: the first K - 1 of a slide (the survivors); on the look-back's
    // last turn all K (picture 1 returns in front of K - 1 survivors)
    const seen = ti === 1 && i === TURNS - 1 ? K : K - 1, kept = sum(rows[i].slice(0, seen));
    expect(t.prompt_tokens === p.prompt_tokens, `${trace} turn ${i}: the same prompt (${t.prompt_tokens} vs ${p.prompt_tokens})`);
    expect(t.cached_tokens >= kept, `${trace} turn ${i}: the ${seen} pictures' ${kept} layout rows cached (${t.cached_tokens})`);
    expect(t.recomputed <= p.recomputed - kept,
           `${trace} turn ${i}: recomputes at most the prefix arm's ${p.recomputed} less the ${seen} pictures' ${kept} rows (${t.recomputed})`);
  });
  expect(reprefill.traces[trace].every((t) => t.recomputed === t.prompt_tokens), `${trace}: the re-prefill arm recomputes every prompt token`);
  const total = (a) => a.traces[trace].reduce((s, t) => s + t.recomputed, 0);
  console.log(`smolvlm ${trace}: rows per picture ${rows.map((r) => r.join('+')).join(', ')}; `
    + `recomputed ${total(def)} (default) vs ${total(prefix)} (prefix) vs ${total(reprefill)} (reprefill)`);
}
finish(failures, out, 'replay idefics3 check');
