// The web page of `kamera serve`: a chat over the public HTTP API only (/v1/chat/completions
// streamed, /v1/stats), and for every answer the strip of its prompt's segments coloured by where
// their KV came from (usage.kamera.segments); a thinking model's reasoning streams into a collapsed
// block above its answer (delta.reasoning_content). Same origin, no external resources; every text
// from the model or the server goes into the page as text (textContent), never as markup.
'use strict';

const $ = (id) => document.getElementById(id);

// Builds an element: el('div', {class: 'x', 'data-k': 'v'}, child, 'text', ...).
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const state = {
  key: sessionStorage.getItem('kamera-api-key') || '',
  stats: null,
  messages: [],     // the conversation sent with every request (OpenAI messages)
  attachments: [],  // data: URLs of the images of the message being written
  abort: null,      // the AbortController of the answer being streamed
  turn: 0,
};

// ---------------------------------------------------------------------------------------------
// HTTP

class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error ? body.error : {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || null;
    this.param = e.param || null;
  }
}

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (state.key) h.Authorization = `Bearer ${state.key}`;
  return h;
}

async function api(path, { method = 'GET', body, signal } = {}) {
  const res = await fetch(path, {
    method, signal, headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) askForKey('the server refused the key (401)');
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
  return res;
}

// ---------------------------------------------------------------------------------------------
// The API key

function askForKey(why) {
  $('key-form').hidden = false;
  $('key-button').hidden = false;
  $('key-error').textContent = state.key ? why : '';
  $('key-input').focus();
}

$('key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  state.key = $('key-input').value.trim();
  sessionStorage.setItem('kamera-api-key', state.key);
  $('key-input').value = '';
  $('key-form').hidden = true;
  start();
});
$('key-button').addEventListener('click', () => askForKey(''));

// ---------------------------------------------------------------------------------------------
// Where each segment's KV came from

const CLASSES = [
  ['prefix', 'prefix: the exact KV of an earlier request of this conversation'],
  ['relocated', 'relocated + patched: seen before in another context (here or on another server, through the shared store), moved to its new position'],
  ['blind', 'blind: a canonical without its patch'],
  ['repaired', 'repaired: seen before in another context, recomputed in this one (the reuse budget)'],
  ['recomputed', 'recomputed: prefilled by this request'],
  ['image-hit', 'image embedding hit: no vision encode, its rows prefilled'],
  ['other', 'the anchor (BOS): not in a segment'],
];

function segmentClass(s) {
  if (s.repair && s.repair.kind === 'recomputed') return 'repaired';
  switch (s.source) {
    case 'prefix': case 'canonical':
      return 'prefix';
    case 'context-exact': case 'context-nearest': case 'keep': case 'patch-exact':
    case 'patch-nearest': case 'patch-hit': case 'patch-orbit': case 'store-patch':
    case 'store-patch-nearest':
      return 'relocated';
    case 'blind':
      return 'blind';
    default:  // recomputed, reprefilled, patch-formed (this request ran the forward)
      return s.media && s.embedding === 'cached' ? 'image-hit' : 'recomputed';
  }
}

function renderLegend() {
  const ul = $('legend');
  ul.replaceChildren(...CLASSES.map(([c, what]) =>
    el('li', {}, el('span', { class: `swatch src-${c}` }), what)));
}

const fmtMs = (v) => (v === null || v === undefined ? '–' : `${Number(v).toFixed(1)} ms`);

function bytes(n) {
  if (n === null || n === undefined) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; ++i; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

// A number of the usage, shown and tagged with its key (data-k) for scripts that read the page.
const num = (k, v, text) => el('b', { 'data-k': k }, text === undefined ? String(v) : text);

// The strip and the numbers of one answer, from its usage (null: the answer has none).
function renderReuse(box, usage, clientTtftMs) {
  box.replaceChildren();
  if (!usage) {
    box.append(el('div', { class: 'stats' }, 'no usage (stopped before the end)'));
    return;
  }
  const k = usage.kamera || {};
  const segments = [...(k.segments || [])];
  const listed = segments.reduce((n, s) => n + s.tokens, 0);
  const strip = el('div', { class: 'strip', 'data-prompt-tokens': usage.prompt_tokens });
  for (const s of segments) {
    const cls = segmentClass(s);
    const what = `${s.tokens} tokens at ${s.position}: ${s.source}` +
      (s.media ? ` (image, embedding ${s.embedding || '?'})` : '') +
      (s.shared_antecedents >= 0 ? `, ${s.shared_antecedents} antecedents shared` : '') +
      (s.repair ? `; repair: ${s.repair.kind}` +
        (s.repair.estimate !== undefined ? ` (deficit estimate ${s.repair.estimate})` : '') : '');
    const seg = el('span', {
      class: `seg src-${cls}`, title: what, 'data-source': s.source, 'data-class': cls,
      'data-tokens': s.tokens, 'data-media': s.media ? '1' : null,
      'data-repair': s.repair ? s.repair.kind : null,
    });
    seg.style.flexGrow = String(s.tokens);
    strip.append(seg);
  }
  // What the segments leave out: the prompt's end (the question's last tokens and the
  // generation prompt, recomputed_tokens counts them) and the anchor in front.
  const recomputedListed = segments.filter((s) => ['recomputed', 'repaired', 'image-hit'].includes(segmentClass(s)))
    .reduce((n, s) => n + s.tokens, 0);
  const rest = Math.max(0, usage.prompt_tokens - listed);
  const tail = Math.min(rest, Math.max(0, (k.recomputed_tokens || 0) - recomputedListed));
  for (const [cls, n, what] of [['recomputed', tail, 'the end of the prompt, recomputed'],
                                ['other', rest - tail, 'the anchor, not in a segment']]) {
    if (n <= 0) continue;
    const seg = el('span', { class: `seg src-${cls}`, title: `${n} tokens: ${what}`,
                             'data-class': cls, 'data-tokens': n });
    seg.style.flexGrow = String(n);
    strip.append(seg);
  }
  const t = k.timings || {};
  const cached = usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0;
  const stats = el('div', { class: 'stats' },
    'prompt ', num('prompt_tokens', usage.prompt_tokens), ' tokens · cached ',
    num('cached_tokens', cached), ' · reused ', num('reused_tokens', k.reused_tokens),
    ' · recomputed ', num('recomputed_tokens', k.recomputed_tokens), ' · policy ',
    num('policy', k.policy), el('br'),
    'TTFT ', num('ttft_ms', t.ttft_ms, fmtMs(t.ttft_ms)), ' (server; ',
    num('client_ttft_ms', clientTtftMs, fmtMs(clientTtftMs)), ' in the browser) · prefill ',
    num('prefill_ms', t.prefill_ms, fmtMs(t.prefill_ms)), ' · re-prefill ≈ ',
    num('reprefill_estimate_ms', t.reprefill_estimate_ms, fmtMs(t.reprefill_estimate_ms)),
    ' · saved ≈ ', num('saved_estimate_ms', t.saved_estimate_ms, fmtMs(t.saved_estimate_ms)));
  if (usage.images) {
    const im = usage.images;
    stats.append(el('br'), 'images ', num('images.count', im.count), ' · encoded ',
                 num('images.encoded', im.encoded), ' · embeddings cached ',
                 num('images.cached_embeddings', im.cached_embeddings), ' · served from KV ',
                 num('images.reused_chunks', im.reused_chunks));
  }
  box.append(strip, stats,
             el('details', {}, el('summary', {}, 'usage (JSON)'),
                el('pre', { class: 'usage-json', text: JSON.stringify(usage, null, 1) })));
}

// ---------------------------------------------------------------------------------------------
// The transcript

function contentText(content) {
  if (typeof content === 'string') return content;
  return content.filter((p) => p.type === 'text').map((p) => p.text).join('\n');
}

function addMessage(role, content) {
  const text = el('div', { class: 'text', text: contentText(content) });
  const m = el('div', { class: `msg ${role}` }, el('div', { class: 'who', text: role }));
  if (Array.isArray(content))
    for (const p of content)
      if (p.type === 'image_url') m.append(el('img', { class: 'thumb', src: p.image_url.url, alt: 'image' }));
  m.append(text);
  $('transcript').append(m);
  m.scrollIntoView({ block: 'end' });
  return m;
}

// Reads an SSE stream of chat completion chunks; calls onChunk with each parsed chunk.
async function readStream(res, onChunk) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        onChunk(JSON.parse(data));
      }
    }
  }
}

function requestBody() {
  const body = {
    messages: state.messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($('temperature').value) || 0,
  };
  const max = parseInt($('max-tokens').value, 10);
  if (max > 0) body.max_tokens = max;
  if ($('reuse').value) body.reuse = $('reuse').value;
  if ($('reuse-budget').value !== '') body.reuse_budget = Number($('reuse-budget').value);
  return body;
}

async function ask() {
  const turn = ++state.turn;
  const msg = addMessage('assistant', '');
  msg.dataset.turn = String(turn);
  const text = msg.querySelector('.text');
  // A thinking model's reasoning (delta.reasoning_content): collapsed above the answer.
  const thinking = el('details', { class: 'reasoning', hidden: true },
                      el('summary', {}, 'reasoning'), el('div', { class: 'reasoning-text' }));
  msg.insertBefore(thinking, text);
  const reuse = el('div', { class: 'reuse' });
  const finish = el('div', { class: 'finish' });
  msg.append(finish, reuse);
  state.abort = new AbortController();
  setBusy(true);
  const t0 = performance.now();
  let firstMs = null, usage = null, reason = null, answer = '', reasoning = '';
  try {
    const res = await api('/v1/chat/completions', { method: 'POST', body: requestBody(), signal: state.abort.signal });
    await readStream(res, (chunk) => {
      if (chunk.error) throw new ApiError(500, chunk);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices || []) {
        const r = c.delta && (c.delta.reasoning_content || c.delta.reasoning);
        if (r) {
          if (firstMs === null) firstMs = performance.now() - t0;
          reasoning += r;
          thinking.hidden = false;
          thinking.lastChild.textContent = reasoning;
        }
        const d = c.delta && c.delta.content;
        if (d) {
          if (firstMs === null) firstMs = performance.now() - t0;
          answer += d;
          text.textContent = answer;
        }
        if (c.finish_reason) reason = c.finish_reason;
      }
    });
    finish.textContent = reason ? `finish: ${reason}` : '';
  } catch (e) {
    finish.textContent = e.name === 'AbortError' ? 'stopped' : '';
    if (e.name !== 'AbortError') $('send-error').textContent = describe(e);
  } finally {
    state.abort = null;
    setBusy(false);
  }
  if (answer && state.stats && state.stats.template.turns)
    state.messages.push({ role: 'assistant', content: answer });
  renderReuse(reuse, usage, firstMs);
  msg.dataset.done = '1';
  refreshStats();
}

function describe(e) {
  return e instanceof ApiError ? `${e.status} ${e.code || ''}${e.param ? ` (${e.param})` : ''}: ${e.message}` : String(e);
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
  document.body.dataset.busy = busy ? '1' : '';
}

$('composer').addEventListener('submit', (ev) => {
  ev.preventDefault();
  if (state.abort) return;
  $('send-error').textContent = '';
  const role = $('role').value;
  const words = $('prompt').value;
  if (!words.trim() && !state.attachments.length) return;
  const content = state.attachments.length
    ? [...state.attachments.map((url) => ({ type: 'image_url', image_url: { url } })),
       ...(words ? [{ type: 'text', text: words }] : [])]
    : words;
  // A model without turns (the mini-VL) answers one question: each question starts afresh.
  if (state.stats && !state.stats.template.turns && role === 'user')
    state.messages = state.messages.filter((m) => m.role === 'system');
  state.messages.push({ role, content });
  addMessage(role, content);
  $('prompt').value = '';
  state.attachments = [];
  renderAttachments();
  if (role === 'user') ask();
});

$('prompt').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => state.abort && state.abort.abort());
$('clear').addEventListener('click', () => {
  if (state.abort) state.abort.abort();
  state.messages = [];
  $('transcript').replaceChildren();
});
$('role').addEventListener('change', () => {
  $('send').textContent = $('role').value === 'user' ? 'Send' : 'Add';
});

// ---------------------------------------------------------------------------------------------
// Images: attached from a file, or pasted

function addImageFile(file) {
  if (!/^image\/(png|jpeg)$/.test(file.type)) {
    $('send-error').textContent = `${file.name || 'pasted file'}: only PNG and JPEG images`;
    return;
  }
  const r = new FileReader();
  r.onload = () => { state.attachments.push(r.result); renderAttachments(); };
  r.readAsDataURL(file);
}

function renderAttachments() {
  $('attachments').replaceChildren(...state.attachments.map((url, i) => {
    const drop = el('button', { type: 'button', title: 'remove' }, '×');
    drop.addEventListener('click', () => { state.attachments.splice(i, 1); renderAttachments(); });
    return el('figure', {}, el('img', { src: url, alt: 'attached image' }), drop);
  }));
  $('attachments').dataset.count = String(state.attachments.length);
}

$('image-input').addEventListener('change', (ev) => {
  for (const f of ev.target.files) addImageFile(f);
  ev.target.value = '';
});
document.addEventListener('paste', (ev) => {
  const files = [...(ev.clipboardData ? ev.clipboardData.files : [])].filter((f) => f.type.startsWith('image/'));
  if (!files.length) return;
  ev.preventDefault();
  files.forEach(addImageFile);
});

// ---------------------------------------------------------------------------------------------
// The server and its store (GET /v1/stats)

function renderServer(s) {
  const m = s.model, meta = m.meta || {}, l = s.limits, t = s.template;
  $('model-line').textContent =
    `${m.id} · ${meta.arch} · context ${meta.ctx_len}${meta.vision ? ' · vision' : ''}`;
  const rows = [
    ['model', m.id], ['architecture', meta.arch], ['layers', meta.n_layers],
    ['width', meta.n_embd], ['vocabulary', meta.n_vocab], ['context', meta.ctx_len],
    ['vision', meta.vision ? 'yes (image parts)' : 'no'],
    ['template', t.name ? `${t.name} (${t.kind})` : t.kind],
    ['roles', t.roles.join(', ')], ['turns', t.turns ? 'yes' : 'no: one question per prompt'],
    ['default reuse', l.reuse], ['max tokens', l.max_tokens_default ?? 'to the end of the context'],
    ['decoding at once', l.max_active], ['queue', l.max_queue], ['body', bytes(l.max_body_bytes)],
    ['images per request', l.max_images], ['image size', bytes(l.max_image_bytes)],
  ];
  $('server-info').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
  const role = $('role');
  if (role.options.length === 0) {
    for (const r of t.roles.filter((x) => x !== 'tool')) role.append(el('option', { value: r }, r));
    role.value = 'user';
  }
  $('image-input').disabled = !meta.vision;
}

function table(caption, head, rows) {
  return el('table', {}, el('caption', {}, caption),
            el('tr', {}, ...head.map((h) => el('th', {}, h))),
            ...rows.map((r) => el('tr', {}, ...r.map((c) => el('td', {}, String(c))))));
}

function renderStore(s) {
  const st = s.store, mem = st.memory, c = s.counters, pc = s.prefix_cache, sc = s.segment_cache;
  const kv = s.kv_pool;
  const tiers = [['memory', bytes(mem.bytes), mem.canonical_hits + mem.patch_hits,
                  mem.canonical_misses + mem.patch_misses, mem.evictions],
                 ...st.tiers.map((t) => [t.name, bytes(t.bytes), t.hits, t.misses, t.evictions])];
  const served = Object.entries(c.segments_served).filter(([, v]) => v > 0);
  $('store').replaceChildren(
    table('tiers', ['tier', 'bytes', 'hits', 'misses', 'evictions'], tiers),
    table('caches', ['', 'held', 'budget', 'evictions'], [
      ['exact prefixes', `${pc.entries} / ${pc.tokens} tok`, `${pc.budget_tokens} tok`, pc.evictions],
      ['segments', `${sc.occurrences} / ${bytes(sc.bytes)}`, bytes(sc.budget_bytes), sc.evictions],
      ['chunks (memory)', `${mem.canonical_entries} + ${mem.patch_entries} patches`, bytes(mem.budget_bytes), mem.evictions],
      ['KV pool', `${kv.pages_used} pages`, `${kv.pages} × ${bytes(kv.page_bytes)}`, ''],
    ]),
    table('prompt tokens since start', ['', 'tokens'], [
      ['prompt', c.prompt_tokens], ['reused', c.reused_tokens], ['recomputed', c.recomputed_tokens],
      ['generated', c.generated_tokens],
      ['images encoded / embedding hits / KV hits',
       `${c.images_encoded} / ${c.image_embedding_hits} / ${c.image_chunk_hits}`],
    ]),
    table('segments served', ['source', 'count'], served.length ? served : [['none yet', '']]),
    el('p', { class: 'small muted' }, 'prefill speed (measured): ',
       s.prefill_tokens_per_s ? `${s.prefill_tokens_per_s.toFixed(0)} tokens/s` : 'not measured yet',
       ` · KV saved from the store: ${bytes(st.bytes_saved)}`));
}

async function refreshStats() {
  try {
    const s = await (await api('/v1/stats')).json();
    state.stats = s;
    renderServer(s);
    renderStore(s);
    return true;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) $('model-line').textContent = describe(e);
    return false;
  }
}
$('refresh').addEventListener('click', refreshStats);
setInterval(() => { if (!document.hidden && !state.abort && state.stats) refreshStats(); }, 5000);

async function start() {
  renderLegend();
  if (await refreshStats()) {
    $('key-form').hidden = true;
    document.body.dataset.ready = '1';
  }
}
start();
