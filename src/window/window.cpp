#include "window/window.h"

#include <algorithm>

#include "model/sampler.h"

namespace kamera {

namespace {

bool same_set(std::vector<ChunkId> a, std::vector<ChunkId> b) {
  auto less = [](const ChunkId& x, const ChunkId& y) {
    return x.hi != y.hi ? x.hi < y.hi : x.lo < y.lo;
  };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  return a == b;
}

}  // namespace

Window::Window(Context& ctx, const WindowPolicy& policy, SeqId seq)
    : ctx_(ctx), cache_(ctx.cache()), pool_(ctx.pool()), policy_(policy), seq_(seq) {}

Window::~Window() {
  pool_.free_sequence(seq_);
}

Result<std::unique_ptr<Window>> Window::create(Context& ctx, const WindowPolicy& policy) {
  const SeqId seq = ctx.pool().create_sequence();
  std::unique_ptr<Window> w(new Window(ctx, policy, seq));
  KAMERA_TRY(ctx.cache().append_anchor(seq));
  w->set_policy(policy);
  return w;
}

void Window::set_policy(const WindowPolicy& p) {
  policy_ = p;
  cache_.store().set_patch_budget(p.patch_byte_budget);
}

PatchOptions Window::patch_options() const {
  PatchOptions o;
  o.rank = policy_.rank;
  o.cap_rank = true;  // a chunk shorter than the rank gets a patch of its own size (as completions)
  if (policy_.deep_half) o.layers.kind = LayerSet::Kind::DeepHalf;
  o.dtype = policy_.patch_dtype;
  return o;
}

int Window::token_index(int slot) const {
  int t = int(cache_.anchor().size());
  for (int i = 0; i < slot; ++i) t += slots_[i].n_tokens();
  return t;
}

int32_t Window::next_position() const {
  int32_t p = cache_.anchor_extent();
  for (const auto& s : slots_) p += s.extent();
  return p;
}

std::vector<ChunkContent> Window::contents(int begin, int end) const {
  std::vector<ChunkContent> out;
  for (int i = begin; i < end; ++i) out.push_back(slots_[i].canonical->content);
  return out;
}

std::vector<ChunkId> Window::ids(int begin, int end) const {
  std::vector<ChunkId> out;
  for (int i = begin; i < end; ++i) out.push_back(slots_[i].id);
  return out;
}

Status Window::write_rows(int slot) {
  const WindowSlot& s = slots_[slot];
  const int idx = token_index(slot);
  KAMERA_TRY(pool_.make_writable(seq_, idx, idx + s.n_tokens()));  // copy-on-write, never in place
  const Patch* p = s.patch && !s.clean ? &s.patch->patch : nullptr;
  write_patched_rows(s.canonical->kv, p, pool_, seq_, idx, scratch_);
  return Status::Ok();
}

void Window::reposition_from(int slot) {
  int32_t pos =
      slot == 0 ? cache_.anchor_extent() : slots_[slot - 1].position + slots_[slot - 1].extent();
  int t = token_index(slot);
  for (int i = slot; i < int(slots_.size()); ++i) {
    WindowSlot& s = slots_[i];
    s.position = pos;
    const auto& layout = s.canonical->content.layout;
    for (int k = 0; k < s.n_tokens(); ++k) pool_.set_position(seq_, t + k, layout[k].shifted(pos));
    t += s.n_tokens();
    pos += s.extent();
  }
}

Status Window::insert_slot(int at, WindowSlot slot) {
  const ChunkContent& c = slot.canonical->content;
  const int32_t start =
      at == 0 ? cache_.anchor_extent() : slots_[at - 1].position + slots_[at - 1].extent();
  const int32_t end = next_position() + c.extent();
  if (end > cache_.context_length())
    return make_error(ErrorCode::InvalidArgument,
                      "window: admitting a chunk of extent {} would end at position {}, past the "
                      "model's context length {}",
                      c.extent(), end, cache_.context_length());
  slot.position = start;
  const int idx = token_index(at);
  auto r = pool_.insert(seq_, idx, c.positions_at(start), /*fresh_pages=*/true);
  if (!r.ok()) return r.error();
  slots_.insert(slots_.begin() + at, std::move(slot));
  if (auto st = write_rows(at); !st.ok()) {  // cannot fail for fresh pages, but stay consistent
    (void)pool_.erase(seq_, idx, idx + c.n());
    slots_.erase(slots_.begin() + at);
    return st;
  }
  cache_.store().note_bytes_saved(slots_[at].canonical->kv.bytes());
  reposition_from(at + 1);
  return Status::Ok();
}

Result<std::shared_ptr<const PatchEntry>> Window::patch_for(int slot_index, const ChunkContent& c) {
  if (slot_index == 0) return std::shared_ptr<const PatchEntry>();
  const auto ante = contents(0, slot_index);
  return cache_.patch(ante, c, patch_options(), policy_.form_on_miss);
}

Status Window::admit_back(const ChunkContent& c) {
  auto canon = cache_.canonical(c);
  if (!canon.ok()) return canon.error();
  const int at = int(slots_.size());
  auto patch = patch_for(at, c);
  if (!patch.ok()) return patch.error();
  WindowSlot s;
  s.id = (*canon)->id;
  s.canonical = *canon;
  s.patch = *patch;
  s.conditioned = at == 0 || s.patch != nullptr;
  if (s.conditioned) s.conditioned_on = ids(0, at);
  return insert_slot(at, std::move(s));
}

Status Window::admit_front(const ChunkContent& c) {
  auto canon = cache_.canonical(c);
  if (!canon.ok()) return canon.error();
  WindowSlot s;
  s.id = (*canon)->id;
  s.canonical = *canon;
  s.conditioned = true;  // nothing before it: its canonical is its exact KV
  return insert_slot(0, std::move(s));
}

Status Window::evict(int slot) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: evict slot {} of a window of {}", slot,
                      slots_.size());
  const WindowSlot& s = slots_[slot];
  evicted_[{s.id.hi, s.id.lo}] = Evicted{s.conditioned_on, s.patch};
  const int idx = token_index(slot);
  KAMERA_TRY(pool_.erase(seq_, idx, idx + s.n_tokens()));
  slots_.erase(slots_.begin() + slot);
  reposition_from(slot);  // survivors only move: rotation, no bytes touched
  return Status::Ok();
}

Status Window::recall(const ChunkId& id, int at, RecallMode mode) {
  if (at < 0 || at > int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: recall at slot {} of a window of {}", at,
                      slots_.size());
  for (const auto& s : slots_)
    if (s.id == id)
      return make_error(ErrorCode::InvalidArgument, "window: chunk {} is already in the window",
                        id.hex());
  auto canon = cache_.store().find_canonical(id);
  if (!canon)
    return make_error(ErrorCode::NotFound, "window: unknown chunk id {} (not in the store)",
                      id.hex());
  WindowSlot s;
  s.id = id;
  s.canonical = canon;
  if (mode == RecallMode::Fresh && at > 0) {
    const auto ante = contents(0, at);
    auto p = cache_.patch(ante, canon->content, patch_options(), true);
    if (!p.ok()) return p.error();
    s.patch = *p;
    s.conditioned = true;
    s.conditioned_on = ids(0, at);
  } else if (mode == RecallMode::Stale) {
    auto it = evicted_.find({id.hi, id.lo});
    if (it != evicted_.end() && it->second.patch) {
      s.patch = it->second.patch;
      s.conditioned = true;
      s.conditioned_on = it->second.conditioned_on;
    }
  }
  if (at == 0 && mode != RecallMode::Stale) {
    s.conditioned = true;  // leading: exact
    s.conditioned_on.clear();
  }
  return insert_slot(at, std::move(s));
}

Status Window::reorder(std::span<const int> order, ReorderMode mode) {
  const int k = int(slots_.size());
  if (int(order.size()) != k)
    return make_error(ErrorCode::InvalidArgument, "window: reorder needs {} indices, got {}", k,
                      order.size());
  std::vector<char> seen(k, 0);
  for (int o : order) {
    if (o < 0 || o >= k || seen[o])
      return make_error(ErrorCode::InvalidArgument, "window: reorder order is not a permutation");
    seen[o] = 1;
  }
  // Token permutation of the chunk region: metadata only.
  const int base = int(cache_.anchor().size());
  std::vector<int> starts(k);
  for (int i = 0; i < k; ++i) starts[i] = token_index(i) - base;
  std::vector<int> tok;
  for (int i = 0; i < k; ++i)
    for (int t = 0; t < slots_[order[i]].n_tokens(); ++t) tok.push_back(starts[order[i]] + t);
  KAMERA_TRY(pool_.permute(seq_, base, tok));
  std::vector<WindowSlot> moved;
  for (int i = 0; i < k; ++i) moved.push_back(slots_[order[i]]);
  slots_ = std::move(moved);
  reposition_from(0);
  if (mode == ReorderMode::Transfer) return Status::Ok();  // rows and stored patches as they were
  for (int i = 0; i < k; ++i) {
    WindowSlot& s = slots_[i];
    s.clean = false;
    s.orbit = false;
    s.patch = nullptr;
    s.conditioned = i == 0;
    s.conditioned_on.clear();
    if (i > 0 && mode != ReorderMode::Blind) {
      const auto ante = contents(0, i);
      auto p = mode == ReorderMode::Exact
                   ? cache_.patch(ante, s.canonical->content, patch_options(), policy_.form_on_miss)
                   : cache_.orbit_patch(ante, s.canonical->content, patch_options(),
                                        policy_.orbit_orderings);
      if (!p.ok()) return p.error();
      s.patch = *p;
      s.conditioned = s.patch != nullptr;
      s.orbit = mode == ReorderMode::Orbit;
      if (s.conditioned) s.conditioned_on = ids(0, i);
    }
    KAMERA_TRY(write_rows(i));
  }
  return Status::Ok();
}

Status Window::clean_view(int slot) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: no slot {}", slot);
  slots_[slot].clean = true;
  return write_rows(slot);
}

Status Window::recondition(int slot) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: no slot {}", slot);
  slots_[slot].clean = false;
  return write_rows(slot);
}

std::vector<int> Window::stale_slots() const {
  std::vector<int> out;
  for (int i = 0; i < int(slots_.size()); ++i) {
    const WindowSlot& s = slots_[i];
    if (!s.conditioned || s.clean) continue;
    const auto now = ids(0, i);
    const bool ok = s.orbit ? same_set(now, s.conditioned_on) : now == s.conditioned_on;
    if (!ok) out.push_back(i);
  }
  return out;
}

Status Window::refresh(int slot) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: no slot {}", slot);
  WindowSlot& s = slots_[slot];
  auto p = patch_for(slot, s.canonical->content);
  if (!p.ok()) return p.error();
  s.patch = *p;
  s.orbit = false;
  s.clean = false;
  s.conditioned = slot == 0 || s.patch != nullptr;
  s.conditioned_on = s.conditioned ? ids(0, slot) : std::vector<ChunkId>{};
  return write_rows(slot);
}

Status Window::refresh_in_place(int slot) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: no slot {}", slot);
  WindowSlot& s = slots_[slot];
  const int begin = token_index(slot), n = s.n_tokens();
  // The slot's tokens re-forwarded behind the rows in front of it, on a scratch fork.
  auto f = pool_.fork(seq_);
  if (!f.ok()) return f.error();
  ScopedSequence scratch(pool_, *f);
  KAMERA_TRY(pool_.truncate(scratch.id(), begin));
  if (auto r = cache_.forward_chunk(scratch.id(), s.canonical->content, s.position); !r.ok())
    return r.error();
  const ChunkKV fresh = read_chunk_kv(pool_, scratch.id(), begin, n);  // position-free rows
  auto p = form_patch(fresh, s.canonical->kv, patch_options());
  if (!p.ok()) return p.error();
  auto e = std::make_shared<PatchEntry>();
  e->key = PatchKey::make(s.id, ids(0, slot), patch_options());
  e->patch = std::move(*p);
  s.patch = std::move(e);  // the slot's own: not stored, it was formed on the rows held in front
  s.orbit = false;
  s.clean = false;
  s.conditioned = true;
  s.conditioned_on = ids(0, slot);
  return write_rows(slot);
}

Result<std::unique_ptr<Window>> Window::fork() const {
  auto f = pool_.fork(seq_);
  if (!f.ok()) return f.error();
  std::unique_ptr<Window> w(new Window(ctx_, policy_, *f));
  w->slots_ = slots_;
  w->evicted_ = evicted_;
  return w;
}

Result<std::vector<float>> Window::query(const ChunkContent& q, LogitsMode mode) {
  auto f = pool_.fork(seq_);
  if (!f.ok()) return f.error();
  auto r = cache_.forward_chunk(*f, q, next_position(), mode);
  pool_.free_sequence(*f);
  return r;
}

namespace {

Result<std::vector<int32_t>> greedy(ChunkCache& cache, SeqId seq, const ChunkContent& q,
                                    int32_t pos, int n) {
  std::vector<int32_t> out;
  auto l = cache.forward_chunk(seq, q, pos, LogitsMode::Last);
  if (!l.ok()) return l.error();
  pos += q.extent();
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(*l);
    out.push_back(t);
    if (i + 1 == n) break;
    l = cache.forward_chunk(seq, ChunkContent::from_tokens({t}), pos++, LogitsMode::Last);
    if (!l.ok()) return l.error();
  }
  return out;
}

}  // namespace

Result<DisposableReport> Window::disposable(int slot, const ChunkContent& q, int n_tokens) {
  if (slot < 0 || slot >= int(slots_.size()))
    return make_error(ErrorCode::InvalidArgument, "window: no slot {}", slot);
  auto with = fork();
  if (!with.ok()) return with.error();
  auto without = fork();
  if (!without.ok()) return without.error();
  KAMERA_TRY((*without)->clean_view(slot));
  DisposableReport rep;
  auto a = greedy(cache_, (*with)->sequence(), q, next_position(), n_tokens);
  if (!a.ok()) return a.error();
  auto b = greedy(cache_, (*without)->sequence(), q, next_position(), n_tokens);
  if (!b.ok()) return b.error();
  rep.with_conditioning = *a;
  rep.clean_view = *b;
  for (size_t i = 0; i < a->size(); ++i)
    if ((*a)[i] != (*b)[i]) {
      rep.first_difference = int(i);
      break;
    }
  rep.answer_changes = rep.first_difference >= 0;
  return rep;
}

Status Window::check_invariants() const {
  KAMERA_TRY(pool_.check_invariants());
  if (pool_.n_tokens(seq_) != token_index(int(slots_.size())))
    return make_error(ErrorCode::Internal, "window: pool has {} tokens, slots account for {}",
                      pool_.n_tokens(seq_), token_index(int(slots_.size())));
  const auto pos = pool_.positions(seq_);
  int32_t expect = cache_.anchor_extent();
  int t = int(cache_.anchor().size());
  for (const auto& s : slots_) {
    if (s.position != expect)
      return make_error(ErrorCode::Internal, "window: slot {} at position {}, expected {}",
                        s.id.hex(), s.position, expect);
    const auto& layout = s.canonical->content.layout;
    for (int k = 0; k < s.n_tokens(); ++k)
      if (!(pos[t + k] == layout[k].shifted(s.position)))
        return make_error(ErrorCode::Internal, "window: token {} of slot {} has a wrong position",
                          k, s.id.hex());
    t += s.n_tokens();
    expect += s.extent();
  }
  return Status::Ok();
}

}  // namespace kamera
