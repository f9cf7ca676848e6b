// Paged KV pool, see pool.h for the model and kv/pool_impl.h for the state.
#include "kv/pool.h"

#include "kv/pool_impl.h"

#include "kv/kv_row.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <unordered_map>
#include <unordered_set>

namespace kamera {

// ----------------------------------------------------------------------------------------------
// KvLayout

int KvLayout::channel_index(std::string_view name) const {
  for (size_t i = 0; i < channels.size(); ++i) {
    if (channels[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int KvLayout::rope_channel() const {
  for (size_t i = 0; i < channels.size(); ++i)
    if (channels[i].rotated) return static_cast<int>(i);
  return -1;
}

int KvLayout::content_channel() const {
  for (size_t i = 0; i < channels.size(); ++i)
    if (!channels[i].rotated) return static_cast<int>(i);
  return -1;
}

size_t KvLayout::floats_per_token() const {
  size_t per_layer = 0;
  for (const ChannelDesc& c : channels) per_layer += static_cast<size_t>(std::max(c.width, 0));
  return per_layer * static_cast<size_t>(std::max(n_layers, 0));
}

// ----------------------------------------------------------------------------------------------
// Impl

namespace {

constexpr uint64_t kMaxPoolBytes = uint64_t{1} << 40;  // 1 TiB over all arenas: "absurd" above
constexpr int kMaxWidth = 1 << 20;                     // floats per token per layer per channel
using kv_detail::kArenaAlign;

}  // namespace

namespace kv_detail {

void PageSpace::init(int pages, int tokens) {
  n_pages = pages;
  page_tokens = tokens;
  refcount.assign(size_t(pages), 0);
  fill.assign(size_t(pages), 0);
  free_list.clear();
  free_list.reserve(size_t(pages));
  for (int p = pages - 1; p >= 0; --p) free_list.push_back(p);  // page 0 first
}

int32_t PageSpace::take() {
  KAMERA_ASSERT(!free_list.empty());
  int32_t p = free_list.back();
  free_list.pop_back();
  KAMERA_ASSERT(refcount[p] == 0 && fill[p] == 0);
  refcount[p] = 1;
  return p;
}

void PageSpace::release(int32_t p) {
  KAMERA_ASSERT(refcount[p] == 0);
  fill[p] = 0;
  free_list.push_back(p);
}

void PageSpace::drop_use(PageUse& use, int32_t page) {
  auto it = use.find(page);
  KAMERA_ASSERT(it != use.end() && it->second > 0);
  if (--it->second > 0) return;
  use.erase(it);
  KAMERA_ASSERT(refcount[page] > 0);
  if (--refcount[page] == 0) release(page);
}

int64_t PageSpace::tail_room(const PageUse& use, int32_t tail_slot) const {
  if (tail_slot < 0) return 0;
  const int32_t p = page_of(tail_slot);
  if (refcount[p] != 1 || !use.count(p) || fill[p] >= page_tokens) return 0;
  return page_tokens - fill[p];
}

void PageSpace::allocate(PageUse& use, int32_t tail_slot, int64_t in_tail, int64_t count,
                         int32_t* out) {
  int64_t k = 0;
  if (in_tail > 0) {
    const int32_t tail = page_of(tail_slot);
    for (; k < in_tail; ++k) out[k] = tail * page_tokens + fill[tail]++;
    use[tail] += static_cast<int32_t>(in_tail);
  }
  while (k < count) {
    const int32_t p = take();
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(page_tokens, count - k));
    for (int32_t j = 0; j < n; ++j) out[k + j] = p * page_tokens + j;
    fill[p] = n;
    use[p] = n;
    k += n;
  }
}

}  // namespace kv_detail

using kv_detail::ArenaPtr;

void KvPool::Impl::copy_page(bool window_space, int32_t src, int32_t dst) {
  const kv_detail::PageSpace& sp = window_space ? win : main;
  const size_t rows = static_cast<size_t>(sp.fill[src]);
  for (int l = 0; l < layout.n_layers; ++l) {
    if (in_window(l) != window_space) continue;
    for (int c = 0; c < n_channels; ++c) {
      uint8_t* base = arena_ptr(l, c);
      const size_t w = static_cast<size_t>(widths[c]) * elem;  // bytes per row
      std::memcpy(base + static_cast<size_t>(dst) * page_tokens * w,
                  base + static_cast<size_t>(src) * page_tokens * w, rows * w);
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Creation

namespace {

bool bounds_window(const KvPool::Params& p) {
  if (p.window_tokens <= 0) return false;
  for (bool w : p.window_layers)
    if (w) return true;
  return false;
}

// Rows of layer l's arenas: the window space's for a window layer of a bounded pool.
uint64_t layer_rows(const KvPool::Params& p, int l) {
  const uint64_t pt = uint64_t(p.page_tokens);
  if (bounds_window(p) && p.window_layers[size_t(l)])
    return (uint64_t(p.window_tokens) + pt - 1) / pt * pt;
  return uint64_t(p.n_pages) * pt;
}

size_t aligned(size_t bytes) {
  return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

}  // namespace

size_t KvPool::planned_bytes(const Params& p) {
  const size_t elem = kv_elem_bytes(p.dtype);
  size_t total = 0;
  for (int l = 0; l < p.layout.n_layers; ++l)
    for (const ChannelDesc& c : p.layout.channels)
      total += aligned(size_t(layer_rows(p, l)) * size_t(c.width) * elem);
  return total;
}

Result<std::unique_ptr<KvPool>> KvPool::create(const Params& params) {
  const KvLayout& lay = params.layout;
  if (lay.n_layers <= 0)
    return make_error(ErrorCode::InvalidArgument, "kv pool: n_layers must be > 0 (got {})",
                      lay.n_layers);
  if (lay.channels.empty())
    return make_error(ErrorCode::InvalidArgument, "kv pool: layout has no channels");
  if (params.page_tokens <= 0) {
    return make_error(ErrorCode::InvalidArgument, "kv pool: page_tokens must be > 0 (got {})",
                      params.page_tokens);
  }
  if (params.n_pages <= 0)
    return make_error(ErrorCode::InvalidArgument, "kv pool: n_pages must be > 0 (got {})",
                      params.n_pages);
  if (!is_kv_dtype(params.dtype))
    return make_error(ErrorCode::InvalidArgument, "kv pool: dtype {} is not f32, f16 or bf16",
                      dtype_name(params.dtype));
  const size_t elem = kv_elem_bytes(params.dtype);
  for (size_t i = 0; i < lay.channels.size(); ++i) {
    const ChannelDesc& c = lay.channels[i];
    if (c.name.empty())
      return make_error(ErrorCode::InvalidArgument, "kv pool: channel {} has an empty name", i);
    if (c.width <= 0 || c.width > kMaxWidth) {
      return make_error(ErrorCode::InvalidArgument,
                        "kv pool: channel '{}' width {} out of range (1..{})", c.name, c.width,
                        kMaxWidth);
    }
    for (size_t j = 0; j < i; ++j) {
      if (lay.channels[j].name == c.name) {
        return make_error(ErrorCode::InvalidArgument, "kv pool: duplicate channel name '{}'",
                          c.name);
      }
    }
  }

  if (!params.window_layers.empty() && int(params.window_layers.size()) != lay.n_layers)
    return make_error(ErrorCode::InvalidArgument, "kv pool: {} window-layer flags for {} layers",
                      params.window_layers.size(), lay.n_layers);
  if (params.window_tokens < 0)
    return make_error(ErrorCode::InvalidArgument, "kv pool: window_tokens {} < 0",
                      params.window_tokens);
  const bool bounded = bounds_window(params);
  const int64_t window_pages =
      bounded ? (params.window_tokens + params.page_tokens - 1) / params.page_tokens : 0;

  // Sizes: slots must fit int32; total bytes must not overflow and stay below kMaxPoolBytes.
  const uint64_t slots = static_cast<uint64_t>(params.n_pages) * params.page_tokens;
  const uint64_t wslots = static_cast<uint64_t>(window_pages) * params.page_tokens;
  if (slots > static_cast<uint64_t>(INT32_MAX) || wslots > static_cast<uint64_t>(INT32_MAX)) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: {} pages x {} tokens = {} slots exceeds the int32 slot range",
                      std::max<int64_t>(params.n_pages, window_pages), params.page_tokens,
                      std::max(slots, wslots));
  }
  auto layer_slots = [&](int l) { return layer_rows(params, l); };
  uint64_t total_bytes = 0;
  for (int l = 0; l < lay.n_layers; ++l)
    for (const ChannelDesc& c : lay.channels) {
      uint64_t arena_bytes = 0;
      if (__builtin_mul_overflow(layer_slots(l), static_cast<uint64_t>(c.width) * elem,
                                 &arena_bytes) ||
          __builtin_add_overflow(total_bytes, arena_bytes, &total_bytes)) {
        return make_error(ErrorCode::InvalidArgument,
                          "kv pool: size overflows ({} slots, {} layers)", slots, lay.n_layers);
      }
    }
  if (total_bytes > kMaxPoolBytes) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: {} bytes requested ({} pages x {} tokens x {} floats/token), over "
                      "the {} byte limit",
                      total_bytes, params.n_pages, params.page_tokens, lay.floats_per_token(),
                      kMaxPoolBytes);
  }

  auto impl = std::make_unique<Impl>();
  impl->layout = lay;
  impl->page_tokens = params.page_tokens;
  impl->n_pages = params.n_pages;
  impl->n_channels = static_cast<int>(lay.channels.size());
  impl->dtype = params.dtype;
  impl->elem = elem;
  impl->bounded = bounded;
  impl->window_layer.assign(size_t(lay.n_layers), false);
  for (int l = 0; bounded && l < lay.n_layers; ++l)
    impl->window_layer[size_t(l)] = params.window_layers[size_t(l)];
  for (const ChannelDesc& c : lay.channels) impl->widths.push_back(c.width);
  impl->arenas.reserve(static_cast<size_t>(lay.n_layers) * impl->n_channels);
  for (int l = 0; l < lay.n_layers; ++l) {
    for (int c = 0; c < impl->n_channels; ++c) {
      const size_t bytes = aligned(static_cast<size_t>(layer_slots(l)) * impl->widths[c] * elem);
      impl->total_bytes += bytes;
      void* p = ::operator new (bytes, std::align_val_t{kArenaAlign}, std::nothrow);
      if (p == nullptr) {
        return make_error(ErrorCode::OutOfMemory,
                          "kv pool: cannot allocate {} bytes for layer {} channel '{}'", bytes, l,
                          lay.channels[c].name);
      }
      impl->arenas.emplace_back(static_cast<uint8_t*>(p));
    }
  }
  impl->main.init(params.n_pages, params.page_tokens);
  impl->win.init(int(window_pages), params.page_tokens);

  std::unique_ptr<KvPool> pool(new KvPool());
  pool->impl_ = std::move(impl);
  return pool;
}

KvPool::~KvPool() = default;

const KvLayout& KvPool::layout() const {
  return impl_->layout;
}
int KvPool::page_tokens() const {
  return impl_->page_tokens;
}
int KvPool::n_pages() const {
  return impl_->n_pages;
}
int KvPool::n_free_pages() const {
  return impl_->main.n_free();
}
bool KvPool::bounded_window() const {
  return impl_->bounded;
}
bool KvPool::is_window_layer(int layer) const {
  KAMERA_ASSERT(layer >= 0 && layer < impl_->layout.n_layers);
  return impl_->in_window(layer);
}
int KvPool::n_window_pages() const {
  return impl_->win.n_pages;
}
int KvPool::n_free_window_pages() const {
  return impl_->win.n_free();
}
DType KvPool::dtype() const {
  return impl_->dtype;
}
size_t KvPool::arena_bytes() const {
  return impl_->total_bytes;
}

// ----------------------------------------------------------------------------------------------
// Sequences

SeqId KvPool::create_sequence() {
  KAMERA_ASSERT(impl_->next_id < INT32_MAX);
  SeqId id = impl_->next_id++;
  impl_->seqs.emplace(id, Impl::Sequence{});
  return id;
}

Result<SeqId> KvPool::fork(SeqId src) {
  Impl& m = *impl_;
  const Impl::Sequence* s = m.find(src);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: fork of unknown sequence {}", src);
  if (m.next_id == INT32_MAX)
    return make_error(ErrorCode::OutOfMemory, "kv pool: sequence ids exhausted");
  Impl::Sequence copy = *s;  // before touching refcounts: a bad_alloc here changes nothing
  for (const auto& [page, uses] : copy.page_use) ++m.main.refcount[page];
  for (const auto& [page, uses] : copy.wpage_use) ++m.win.refcount[page];
  m.total_tokens += static_cast<int64_t>(copy.slots.size());
  SeqId id = m.next_id++;
  m.seqs.emplace(id, std::move(copy));
  return id;
}

void KvPool::free_sequence(SeqId seq) {
  Impl& m = *impl_;
  auto it = m.seqs.find(seq);
  KAMERA_ASSERT(it != m.seqs.end());
  for (const auto& [page, uses] : it->second.page_use) {
    KAMERA_ASSERT(m.main.refcount[page] > 0);
    if (--m.main.refcount[page] == 0) m.main.release(page);
  }
  for (const auto& [page, uses] : it->second.wpage_use) {
    KAMERA_ASSERT(m.win.refcount[page] > 0);
    if (--m.win.refcount[page] == 0) m.win.release(page);
  }
  m.total_tokens -= static_cast<int64_t>(it->second.slots.size());
  m.seqs.erase(it);
}

bool KvPool::has_sequence(SeqId seq) const {
  return impl_->find(seq) != nullptr;
}

int KvPool::n_tokens(SeqId seq) const {
  return static_cast<int>(impl_->get(seq).slots.size());
}

Result<int> KvPool::insert(SeqId seq, int at, std::span<const Pos> positions, bool fresh_pages_only,
                           bool window_rows) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: insert into unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (at < 0 || at > n)
    return make_error(ErrorCode::InvalidArgument, "kv pool: insert at {} outside [0, {}]", at, n);
  const int64_t count = static_cast<int64_t>(positions.size());
  if (count == 0) return at;

  // Prepare: room in the tail page (append only, exclusively owned), then fresh pages; the
  // window rows likewise in their own space.
  const int32_t tail = at == n && n > 0 && !fresh_pages_only ? s->slots.back() : -1;
  const int64_t in_tail = std::min(m.main.tail_room(s->page_use, tail), count);
  const int64_t fresh_pages = m.main.pages_for(in_tail, count);
  const int64_t wcount = m.bounded && window_rows ? count : 0;
  const int32_t wtail = fresh_pages_only ? -1 : s->wtail;
  const int64_t win_tail = std::min(m.win.tail_room(s->wpage_use, wtail), wcount);
  const int64_t wfresh = m.win.pages_for(win_tail, wcount);
  if (fresh_pages > m.main.n_free() || wfresh > m.win.n_free()) {
    const bool main_short = fresh_pages > m.main.n_free();
    return make_error(
        ErrorCode::OutOfMemory,
        "kv pool full: inserting {} tokens into sequence {} needs {} free {}pages, {} "
        "left",
        count, seq, main_short ? fresh_pages : wfresh, main_short ? "" : "window ",
        main_short ? m.main.n_free() : m.win.n_free());
  }

  // Apply.
  std::vector<int32_t> new_slots(static_cast<size_t>(count));
  s->slots.reserve(s->slots.size() + new_slots.size());
  s->positions.reserve(s->positions.size() + new_slots.size());
  s->page_use.reserve(s->page_use.size() + static_cast<size_t>(fresh_pages));
  if (m.bounded) {
    std::vector<int32_t> new_w(static_cast<size_t>(count), -1);
    s->wslots.reserve(s->wslots.size() + new_w.size());
    s->wpage_use.reserve(s->wpage_use.size() + static_cast<size_t>(wfresh));
    if (wcount > 0) {
      m.win.allocate(s->wpage_use, wtail, win_tail, wcount, new_w.data());
      s->wtail = new_w.back();
    }
    s->wslots.insert(s->wslots.begin() + at, new_w.begin(), new_w.end());
  }
  m.main.allocate(s->page_use, tail, in_tail, count, new_slots.data());
  s->slots.insert(s->slots.begin() + at, new_slots.begin(), new_slots.end());
  s->positions.insert(s->positions.begin() + at, positions.begin(), positions.end());
  m.total_tokens += count;
  return at;
}

Status KvPool::permute(SeqId seq, int begin, std::span<const int> order) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: permute of unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  const int count = static_cast<int>(order.size());
  if (begin < 0 || begin + count > n)
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: permute [{}, {}) outside [0, {}] of sequence {}", begin,
                      begin + count, n, seq);
  std::vector<char> seen(static_cast<size_t>(count), 0);
  for (int o : order) {
    if (o < 0 || o >= count || seen[o])
      return make_error(ErrorCode::InvalidArgument, "kv pool: permute order is not a permutation");
    seen[o] = 1;
  }
  std::vector<int32_t> slots(static_cast<size_t>(count)), wslots;
  std::vector<Pos> pos(static_cast<size_t>(count));
  if (m.bounded) wslots.resize(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    slots[i] = s->slots[begin + order[i]];
    pos[i] = s->positions[begin + order[i]];
    if (m.bounded) wslots[i] = s->wslots[begin + order[i]];
  }
  std::copy(slots.begin(), slots.end(), s->slots.begin() + begin);
  std::copy(pos.begin(), pos.end(), s->positions.begin() + begin);
  if (m.bounded) std::copy(wslots.begin(), wslots.end(), s->wslots.begin() + begin);
  return Status::Ok();
}

Status KvPool::erase(SeqId seq, int begin, int end) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: erase from unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (begin < 0 || begin > end || end > n) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: erase [{}, {}) outside [0, {}] of sequence {}", begin, end, n, seq);
  }
  for (int i = begin; i < end; ++i) m.main.drop_use(s->page_use, m.main.page_of(s->slots[i]));
  if (m.bounded) {
    for (int i = begin; i < end; ++i)
      if (s->wslots[i] >= 0) m.win.drop_use(s->wpage_use, m.win.page_of(s->wslots[i]));
    s->wslots.erase(s->wslots.begin() + begin, s->wslots.begin() + end);
  }
  s->slots.erase(s->slots.begin() + begin, s->slots.begin() + end);
  s->positions.erase(s->positions.begin() + begin, s->positions.begin() + end);
  m.total_tokens -= end - begin;
  return Status::Ok();
}

Status KvPool::truncate(SeqId seq, int n_keep) {
  const Impl::Sequence* s = impl_->find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: truncate of unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (n_keep < 0 || n_keep > n) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: truncate sequence {} to {} tokens, it has {}", seq, n_keep, n);
  }
  return erase(seq, n_keep, n);
}

namespace {

// Drops one token's slot from a page space; the slot goes back to its page when it was the
// page's last filled one and the page is still the sequence's alone (nothing else can hold it).
void give_back(kv_detail::PageSpace& sp, kv_detail::PageUse& use, int32_t slot) {
  const int32_t page = sp.page_of(slot);
  sp.drop_use(use, page);
  if (sp.refcount[page] == 1 && use.count(page) && sp.offset_of(slot) == sp.fill[page] - 1)
    --sp.fill[page];
}

}  // namespace

Status KvPool::rollback(SeqId seq, int n_keep) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: rollback of unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (n_keep < 0 || n_keep > n) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: rollback sequence {} to {} tokens, it has {}", seq, n_keep, n);
  }
  for (int i = n - 1; i >= n_keep; --i) {  // last first, so each slot is its page's last
    give_back(m.main, s->page_use, s->slots[size_t(i)]);
    if (m.bounded && s->wslots[size_t(i)] >= 0)
      give_back(m.win, s->wpage_use, s->wslots[size_t(i)]);
  }
  s->slots.resize(size_t(n_keep));
  s->positions.resize(size_t(n_keep));
  if (m.bounded) {
    s->wslots.resize(size_t(n_keep));
    s->wtail = -1;  // the kept window slot allocated last, if its page is still the sequence's
    for (int i = n_keep - 1; i >= 0 && s->wtail < 0; --i)
      if (s->wslots[size_t(i)] >= 0 && s->wpage_use.count(m.win.page_of(s->wslots[size_t(i)])))
        s->wtail = s->wslots[size_t(i)];
  }
  m.total_tokens -= n - n_keep;
  return Status::Ok();
}

namespace {

// Distinct pages shared with another sequence that hold one of slots[begin, end), first seen
// first (slot -1: none).
std::vector<int32_t> shared_pages(const kv_detail::PageSpace& sp, const std::vector<int32_t>& slots,
                                  int begin, int end) {
  std::vector<int32_t> shared;
  std::unordered_set<int32_t> seen;
  for (int i = begin; i < end; ++i) {
    if (slots[size_t(i)] < 0) continue;
    const int32_t p = sp.page_of(slots[size_t(i)]);
    if (sp.refcount[p] > 1 && seen.insert(p).second) shared.push_back(p);
  }
  return shared;
}

}  // namespace

// Copies each shared page of one space, then remaps every slot of the sequence in the old pages.
void KvPool::Impl::copy_shared(bool window_space, const std::vector<int32_t>& shared,
                               std::vector<int32_t>& slots, kv_detail::PageUse& use,
                               int32_t* tail) {
  Impl& m = *this;
  kv_detail::PageSpace& sp = window_space ? m.win : m.main;
  std::unordered_map<int32_t, int32_t> remap;  // old page -> new page
  remap.reserve(shared.size());
  use.reserve(use.size() + shared.size());
  for (int32_t old_page : shared) {
    const int32_t new_page = sp.take();
    sp.fill[new_page] = sp.fill[old_page];
    m.copy_page(window_space, old_page, new_page);
    remap.emplace(old_page, new_page);
  }
  auto move = [&](int32_t& slot) {
    if (slot < 0) return;
    auto it = remap.find(sp.page_of(slot));
    if (it != remap.end()) slot = it->second * sp.page_tokens + sp.offset_of(slot);
  };
  for (int32_t& slot : slots) move(slot);
  if (tail) move(*tail);
  for (const auto& [old_page, new_page] : remap) {
    auto u = use.find(old_page);
    KAMERA_ASSERT(u != use.end());
    const int32_t uses = u->second;
    use.erase(u);
    use.emplace(new_page, uses);
    KAMERA_ASSERT(sp.refcount[old_page] > 1);
    --sp.refcount[old_page];
    ++m.cow_copies;
  }
}

Status KvPool::make_writable(SeqId seq, int begin, int end) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: make_writable of unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (begin < 0 || begin > end || end > n) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: make_writable [{}, {}) outside [0, {}] of sequence {}", begin, end,
                      n, seq);
  }

  // Prepare: distinct shared pages holding a token of [begin, end), per space.
  const std::vector<int32_t> shared = shared_pages(m.main, s->slots, begin, end);
  const std::vector<int32_t> wshared =
      m.bounded ? shared_pages(m.win, s->wslots, begin, end) : std::vector<int32_t>{};
  if (shared.empty() && wshared.empty()) return Status::Ok();
  if (int(shared.size()) > m.main.n_free() || int(wshared.size()) > m.win.n_free()) {
    return make_error(ErrorCode::OutOfMemory,
                      "kv pool full: make_writable [{}, {}) of sequence {} needs {} free pages and "
                      "{} window pages, {} and {} left",
                      begin, end, seq, shared.size(), wshared.size(), m.main.n_free(),
                      m.win.n_free());
  }
  m.copy_shared(false, shared, s->slots, s->page_use, nullptr);
  if (!wshared.empty()) m.copy_shared(true, wshared, s->wslots, s->wpage_use, &s->wtail);
  return Status::Ok();
}

// ----------------------------------------------------------------------------------------------
// Rows and metadata

float* KvPool::row(SeqId seq, int layer, int channel, int token) {
  KAMERA_ASSERT(impl_->dtype == DType::F32);  // other dtypes: read_row / write_row
  Impl& m = *impl_;
  const int32_t slot = m.slot_of(m.get(seq), layer, token);
  const kv_detail::PageSpace& sp = m.space_of(layer);
  KAMERA_ASSERT(sp.refcount[sp.page_of(slot)] == 1);  // shared page: call make_writable first
  auto* base = reinterpret_cast<float*>(m.arena_ptr(layer, channel));
  return base + static_cast<size_t>(slot) * m.widths[channel];
}

const float* KvPool::row(SeqId seq, int layer, int channel, int token) const {
  KAMERA_ASSERT(impl_->dtype == DType::F32);  // other dtypes: read_row
  const Impl& m = *impl_;
  const int32_t slot = m.slot_of(m.get(seq), layer, token);
  const auto* base = reinterpret_cast<const float*>(m.arena_ptr(layer, channel));
  return base + static_cast<size_t>(slot) * m.widths[channel];
}

void KvPool::read_row(SeqId seq, int layer, int channel, int token, float* dst) const {
  const Impl& m = *impl_;
  const int32_t slot = m.slot_of(m.get(seq), layer, token);
  const size_t w = static_cast<size_t>(m.widths[channel]);
  kv_load_row(m.dtype, m.arena_ptr(layer, channel) + static_cast<size_t>(slot) * w * m.elem, dst,
              int64_t(w));
}

void KvPool::write_row(SeqId seq, int layer, int channel, int token, const float* src) {
  Impl& m = *impl_;
  const int32_t slot = m.slot_of(m.get(seq), layer, token);
  const kv_detail::PageSpace& sp = m.space_of(layer);
  KAMERA_ASSERT(sp.refcount[sp.page_of(slot)] == 1);  // shared page: call make_writable first
  const size_t w = static_cast<size_t>(m.widths[channel]);
  kv_store_row(m.dtype, src, m.arena_ptr(layer, channel) + static_cast<size_t>(slot) * w * m.elem,
               int64_t(w));
}

const float* KvPool::arena(int layer, int channel) const {
  KAMERA_ASSERT(impl_->dtype == DType::F32);
  return reinterpret_cast<const float*>(impl_->arena_ptr(layer, channel));
}
float* KvPool::arena(int layer, int channel) {
  KAMERA_ASSERT(impl_->dtype == DType::F32);
  return reinterpret_cast<float*>(impl_->arena_ptr(layer, channel));
}
const void* KvPool::arena_data(int layer, int channel) const {
  return impl_->arena_ptr(layer, channel);
}
void* KvPool::arena_data(int layer, int channel) {
  return impl_->arena_ptr(layer, channel);
}

std::span<const int32_t> KvPool::slots(SeqId seq) const {
  return impl_->get(seq).slots;
}

std::span<const int32_t> KvPool::slots(SeqId seq, int layer) const {
  const Impl& m = *impl_;
  KAMERA_ASSERT(layer >= 0 && layer < m.layout.n_layers);
  const Impl::Sequence& s = m.get(seq);
  return m.in_window(layer) ? s.wslots : s.slots;
}

std::span<const Pos> KvPool::positions(SeqId seq) const {
  return impl_->get(seq).positions;
}

void KvPool::set_position(SeqId seq, int token, Pos pos) {
  Impl::Sequence& s = impl_->get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.positions.size()));
  s.positions[token] = pos;
}

}  // namespace kamera
