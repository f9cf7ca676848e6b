// Paged KV pool, see pool.h for the model. Implementation notes:
//
// - Arenas: one 64-byte aligned block per (layer, channel), index layer * n_channels + channel,
//   n_pages * page_tokens rows of `width` values of the pool's dtype each. Contents are not
//   initialised.
// - Pages: refcount (number of sequences with at least one token in the page), fill (next unused
//   offset, monotonic until the page returns to the free list) and a LIFO free list.
// - Sequences: slots (token order) + positions + a per-sequence page -> token-count map, so that
//   erase/truncate learn in O(removed) whether the sequence still references a page.
// - Every mutating call validates and counts the pages it needs before it changes anything.
#include "kv/pool.h"

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

constexpr size_t kArenaAlign = 64;                     // bytes
constexpr uint64_t kMaxPoolBytes = uint64_t{1} << 40;  // 1 TiB over all arenas: "absurd" above
constexpr int kMaxWidth = 1 << 20;                     // floats per token per layer per channel

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kArenaAlign}); }
};
using ArenaPtr = std::unique_ptr<uint8_t, AlignedFree>;

}  // namespace

struct KvPool::Impl {
  struct Sequence {
    std::vector<int32_t> slots;                     // [n_tokens], slot = page * page_tokens + off
    std::vector<Pos> positions;                     // [n_tokens]
    std::unordered_map<int32_t, int32_t> page_use;  // page -> number of this sequence's tokens
  };

  KvLayout layout;
  int page_tokens = 0;
  int n_pages = 0;
  int n_channels = 0;
  DType dtype = DType::F32;
  size_t elem = 4;                 // bytes per value
  size_t total_bytes = 0;          // all arenas
  std::vector<int> widths;         // [n_channels] values per row
  std::vector<ArenaPtr> arenas;    // [n_layers * n_channels]
  std::vector<int32_t> refcount;   // [n_pages]
  std::vector<int32_t> fill;       // [n_pages] next unused offset, 0..page_tokens
  std::vector<int32_t> free_list;  // pages with refcount 0; back() is taken first
  std::unordered_map<SeqId, Sequence> seqs;
  SeqId next_id = 0;
  int64_t total_tokens = 0;
  int64_t cow_copies = 0;

  int32_t page_of(int32_t slot) const { return slot / page_tokens; }
  int32_t offset_of(int32_t slot) const { return slot % page_tokens; }

  Sequence* find(SeqId id) {
    auto it = seqs.find(id);
    return it == seqs.end() ? nullptr : &it->second;
  }
  const Sequence* find(SeqId id) const {
    auto it = seqs.find(id);
    return it == seqs.end() ? nullptr : &it->second;
  }
  Sequence& get(SeqId id) {
    Sequence* s = find(id);
    KAMERA_ASSERT(s != nullptr);
    return *s;
  }
  const Sequence& get(SeqId id) const {
    const Sequence* s = find(id);
    KAMERA_ASSERT(s != nullptr);
    return *s;
  }

  uint8_t* arena_ptr(int layer, int channel) const {
    KAMERA_ASSERT(layer >= 0 && layer < layout.n_layers);
    KAMERA_ASSERT(channel >= 0 && channel < n_channels);
    return arenas[static_cast<size_t>(layer) * n_channels + channel].get();
  }

  int32_t take_page() {
    KAMERA_ASSERT(!free_list.empty());
    int32_t p = free_list.back();
    free_list.pop_back();
    KAMERA_ASSERT(refcount[p] == 0 && fill[p] == 0);
    refcount[p] = 1;
    return p;
  }

  void release_page(int32_t p) {
    KAMERA_ASSERT(refcount[p] == 0);
    fill[p] = 0;
    free_list.push_back(p);
  }

  // Drops one token of `s` living in `page`; releases the sequence's reference when it was the
  // last.
  void drop_use(Sequence& s, int32_t page) {
    auto it = s.page_use.find(page);
    KAMERA_ASSERT(it != s.page_use.end() && it->second > 0);
    if (--it->second > 0) return;
    s.page_use.erase(it);
    KAMERA_ASSERT(refcount[page] > 0);
    if (--refcount[page] == 0) release_page(page);
  }

  // Keeps tokens [0, n_keep) of `seq` (truncate, rollback). give_back: a dropped slot goes back to
  // its page when it was the page's last filled one and the page is now the sequence's alone
  // (nothing else can hold it).
  Status cut_tail(SeqId seq, int n_keep, bool give_back) {
    Sequence* q = find(seq);
    if (q == nullptr)
      return make_error(ErrorCode::NotFound, "kv pool: truncate of unknown sequence {}", seq);
    const int n = static_cast<int>(q->slots.size());
    if (n_keep < 0 || n_keep > n) {
      return make_error(ErrorCode::InvalidArgument,
                        "kv pool: truncate sequence {} to {} tokens, it has {}", seq, n_keep, n);
    }
    for (int i = n - 1; i >= n_keep; --i) {
      const int32_t slot = q->slots[size_t(i)], page = page_of(slot);
      drop_use(*q, page);
      q->slots.pop_back();
      q->positions.pop_back();
      --total_tokens;
      if (give_back && refcount[page] == 1 && q->page_use.count(page) &&
          offset_of(slot) == fill[page] - 1)
        --fill[page];
    }
    return Status::Ok();
  }

  // Copies rows [0, fill) of page `src` to page `dst` in every (layer, channel) arena.
  void copy_page(int32_t src, int32_t dst) {
    const size_t rows = static_cast<size_t>(fill[src]);
    for (int l = 0; l < layout.n_layers; ++l) {
      for (int c = 0; c < n_channels; ++c) {
        uint8_t* base = arena_ptr(l, c);
        const size_t w = static_cast<size_t>(widths[c]) * elem;  // bytes per row
        std::memcpy(base + static_cast<size_t>(dst) * page_tokens * w,
                    base + static_cast<size_t>(src) * page_tokens * w, rows * w);
      }
    }
  }
};

// ----------------------------------------------------------------------------------------------
// Creation

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

  // Sizes: slots must fit int32; total bytes must not overflow and stay below kMaxPoolBytes.
  const uint64_t slots = static_cast<uint64_t>(params.n_pages) * params.page_tokens;
  if (slots > static_cast<uint64_t>(INT32_MAX)) {
    return make_error(ErrorCode::InvalidArgument,
                      "kv pool: {} pages x {} tokens = {} slots exceeds the int32 slot range",
                      params.n_pages, params.page_tokens, slots);
  }
  uint64_t total_bytes = 0;
  for (const ChannelDesc& c : lay.channels) {
    uint64_t arena_bytes = 0, all_layers = 0;
    if (__builtin_mul_overflow(slots, static_cast<uint64_t>(c.width) * elem, &arena_bytes) ||
        __builtin_mul_overflow(arena_bytes, static_cast<uint64_t>(lay.n_layers), &all_layers) ||
        __builtin_add_overflow(total_bytes, all_layers, &total_bytes)) {
      return make_error(ErrorCode::InvalidArgument, "kv pool: size overflows ({} slots, {} layers)",
                        slots, lay.n_layers);
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
  for (const ChannelDesc& c : lay.channels) impl->widths.push_back(c.width);
  impl->arenas.reserve(static_cast<size_t>(lay.n_layers) * impl->n_channels);
  for (int l = 0; l < lay.n_layers; ++l) {
    for (int c = 0; c < impl->n_channels; ++c) {
      size_t bytes = static_cast<size_t>(slots) * impl->widths[c] * elem;
      bytes = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
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
  impl->refcount.assign(params.n_pages, 0);
  impl->fill.assign(params.n_pages, 0);
  impl->free_list.reserve(params.n_pages);
  for (int p = params.n_pages - 1; p >= 0; --p) impl->free_list.push_back(p);  // page 0 first

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
  return static_cast<int>(impl_->free_list.size());
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
  for (const auto& [page, uses] : copy.page_use) ++m.refcount[page];
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
    KAMERA_ASSERT(m.refcount[page] > 0);
    if (--m.refcount[page] == 0) m.release_page(page);
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

Result<int> KvPool::insert(SeqId seq, int at, std::span<const Pos> positions,
                           bool fresh_pages_only) {
  Impl& m = *impl_;
  Impl::Sequence* s = m.find(seq);
  if (s == nullptr)
    return make_error(ErrorCode::NotFound, "kv pool: insert into unknown sequence {}", seq);
  const int n = static_cast<int>(s->slots.size());
  if (at < 0 || at > n)
    return make_error(ErrorCode::InvalidArgument, "kv pool: insert at {} outside [0, {}]", at, n);
  const int64_t count = static_cast<int64_t>(positions.size());
  if (count == 0) return at;

  // Prepare: room in the tail page (append only, exclusively owned), then fresh pages.
  int32_t tail_page = -1;
  int64_t tail_room = 0;
  if (at == n && n > 0 && !fresh_pages_only) {
    const int32_t p = m.page_of(s->slots.back());
    if (m.refcount[p] == 1 && m.fill[p] < m.page_tokens) {
      tail_page = p;
      tail_room = m.page_tokens - m.fill[p];
    }
  }
  const int64_t in_tail = std::min(tail_room, count);
  const int64_t fresh_pages = (count - in_tail + m.page_tokens - 1) / m.page_tokens;
  if (fresh_pages > static_cast<int64_t>(m.free_list.size())) {
    return make_error(ErrorCode::OutOfMemory,
                      "kv pool full: inserting {} tokens into sequence {} needs {} free pages, {} "
                      "left",
                      count, seq, fresh_pages, m.free_list.size());
  }

  // Apply.
  std::vector<int32_t> new_slots(static_cast<size_t>(count));
  s->slots.reserve(s->slots.size() + new_slots.size());
  s->positions.reserve(s->positions.size() + new_slots.size());
  s->page_use.reserve(s->page_use.size() + static_cast<size_t>(fresh_pages));
  int64_t k = 0;
  for (; k < in_tail; ++k) {
    new_slots[k] = tail_page * m.page_tokens + m.fill[tail_page]++;
  }
  if (in_tail > 0) s->page_use[tail_page] += static_cast<int32_t>(in_tail);
  while (k < count) {
    const int32_t p = m.take_page();
    const int32_t take = static_cast<int32_t>(std::min<int64_t>(m.page_tokens, count - k));
    for (int32_t j = 0; j < take; ++j) new_slots[k + j] = p * m.page_tokens + j;
    m.fill[p] = take;
    s->page_use[p] = take;
    k += take;
  }
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
  std::vector<int32_t> slots(static_cast<size_t>(count));
  std::vector<Pos> pos(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    slots[i] = s->slots[begin + order[i]];
    pos[i] = s->positions[begin + order[i]];
  }
  std::copy(slots.begin(), slots.end(), s->slots.begin() + begin);
  std::copy(pos.begin(), pos.end(), s->positions.begin() + begin);
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
  for (int i = begin; i < end; ++i) m.drop_use(*s, m.page_of(s->slots[i]));
  s->slots.erase(s->slots.begin() + begin, s->slots.begin() + end);
  s->positions.erase(s->positions.begin() + begin, s->positions.begin() + end);
  m.total_tokens -= end - begin;
  return Status::Ok();
}

Status KvPool::truncate(SeqId seq, int n_keep) {
  return impl_->cut_tail(seq, n_keep, false);
}

Status KvPool::rollback(SeqId seq, int n_keep) {
  return impl_->cut_tail(seq, n_keep, true);
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

  // Prepare: distinct shared pages holding a token of [begin, end), in first-seen order.
  std::vector<int32_t> shared;
  std::unordered_set<int32_t> seen;
  for (int i = begin; i < end; ++i) {
    const int32_t p = m.page_of(s->slots[i]);
    if (m.refcount[p] > 1 && seen.insert(p).second) shared.push_back(p);
  }
  if (shared.empty()) return Status::Ok();
  if (shared.size() > m.free_list.size()) {
    return make_error(ErrorCode::OutOfMemory,
                      "kv pool full: make_writable [{}, {}) of sequence {} needs {} free pages, {} "
                      "left",
                      begin, end, seq, shared.size(), m.free_list.size());
  }

  // Apply: copy each page, then remap every slot of this sequence in the old pages.
  std::unordered_map<int32_t, int32_t> remap;  // old page -> new page
  remap.reserve(shared.size());
  s->page_use.reserve(s->page_use.size() + shared.size());
  for (int32_t old_page : shared) {
    const int32_t new_page = m.take_page();
    m.fill[new_page] = m.fill[old_page];
    m.copy_page(old_page, new_page);
    remap.emplace(old_page, new_page);
  }
  for (int32_t& slot : s->slots) {
    auto it = remap.find(m.page_of(slot));
    if (it != remap.end()) slot = it->second * m.page_tokens + m.offset_of(slot);
  }
  for (const auto& [old_page, new_page] : remap) {
    auto use = s->page_use.find(old_page);
    KAMERA_ASSERT(use != s->page_use.end());
    const int32_t uses = use->second;
    s->page_use.erase(use);
    s->page_use.emplace(new_page, uses);
    KAMERA_ASSERT(m.refcount[old_page] > 1);
    --m.refcount[old_page];
    ++m.cow_copies;
  }
  return Status::Ok();
}

// ----------------------------------------------------------------------------------------------
// Rows and metadata

float* KvPool::row(SeqId seq, int layer, int channel, int token) {
  KAMERA_ASSERT(impl_->dtype == DType::F32);  // other dtypes: read_row / write_row
  Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
  auto* base = reinterpret_cast<float*>(m.arena_ptr(layer, channel));
  const int32_t slot = s.slots[token];
  KAMERA_ASSERT(m.refcount[m.page_of(slot)] == 1);  // shared page: call make_writable first
  return base + static_cast<size_t>(slot) * m.widths[channel];
}

const float* KvPool::row(SeqId seq, int layer, int channel, int token) const {
  KAMERA_ASSERT(impl_->dtype == DType::F32);  // other dtypes: read_row
  const Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
  const auto* base = reinterpret_cast<const float*>(m.arena_ptr(layer, channel));
  return base + static_cast<size_t>(s.slots[token]) * m.widths[channel];
}

void KvPool::read_row(SeqId seq, int layer, int channel, int token, float* dst) const {
  const Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
  const size_t w = static_cast<size_t>(m.widths[channel]);
  kv_load_row(m.dtype,
              m.arena_ptr(layer, channel) + static_cast<size_t>(s.slots[token]) * w * m.elem, dst,
              int64_t(w));
}

void KvPool::write_row(SeqId seq, int layer, int channel, int token, const float* src) {
  Impl& m = *impl_;
  const Impl::Sequence& s = m.get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
  const int32_t slot = s.slots[token];
  KAMERA_ASSERT(m.refcount[m.page_of(slot)] == 1);  // shared page: call make_writable first
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

std::span<const Pos> KvPool::positions(SeqId seq) const {
  return impl_->get(seq).positions;
}

void KvPool::set_position(SeqId seq, int token, Pos pos) {
  Impl::Sequence& s = impl_->get(seq);
  KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.positions.size()));
  s.positions[token] = pos;
}

// ----------------------------------------------------------------------------------------------
// Checks and statistics

int KvPool::page_refcount(int page) const {
  KAMERA_ASSERT(page >= 0 && page < impl_->n_pages);
  return impl_->refcount[page];
}

Status KvPool::check_invariants() const {
  const Impl& m = *impl_;
  const int pt = m.page_tokens;
  const size_t n_slots = static_cast<size_t>(m.n_pages) * pt;

  // Free list: in range, no duplicates, refcount 0, fill 0.
  std::vector<char> is_free(m.n_pages, 0);
  for (int32_t p : m.free_list) {
    if (p < 0 || p >= m.n_pages)
      return make_error(ErrorCode::Internal, "free list holds page {} out of range", p);
    if (is_free[p]) return make_error(ErrorCode::Internal, "page {} is twice in the free list", p);
    is_free[p] = 1;
    if (m.refcount[p] != 0)
      return make_error(ErrorCode::Internal, "free page {} has refcount {}", p, m.refcount[p]);
    if (m.fill[p] != 0)
      return make_error(ErrorCode::Internal, "free page {} has fill {}", p, m.fill[p]);
  }

  // Sequences: sizes, slot ranges, per-sequence uniqueness, fill bounds, page_use, refcounts.
  std::vector<int32_t> refs(m.n_pages, 0);
  std::vector<int32_t> slot_users(n_slots, 0);
  std::vector<int32_t> seq_mark(n_slots, -1);  // last sequence (dense index) that used a slot
  std::unordered_map<int32_t, int32_t> use;
  int64_t tokens = 0;
  int32_t dense = 0;
  for (const auto& [id, s] : m.seqs) {
    if (s.positions.size() != s.slots.size()) {
      return make_error(ErrorCode::Internal, "sequence {}: {} positions for {} slots", id,
                        s.positions.size(), s.slots.size());
    }
    tokens += static_cast<int64_t>(s.slots.size());
    use.clear();
    for (size_t i = 0; i < s.slots.size(); ++i) {
      const int32_t slot = s.slots[i];
      if (slot < 0 || static_cast<size_t>(slot) >= n_slots) {
        return make_error(ErrorCode::Internal, "sequence {} token {}: slot {} out of range", id, i,
                          slot);
      }
      if (seq_mark[slot] == dense) {
        return make_error(ErrorCode::Internal, "sequence {}: slot {} appears twice (token {})", id,
                          slot, i);
      }
      seq_mark[slot] = dense;
      ++slot_users[slot];
      const int32_t p = m.page_of(slot);
      if (is_free[p])
        return make_error(ErrorCode::Internal, "sequence {} token {}: page {} is free", id, i, p);
      if (m.offset_of(slot) >= m.fill[p]) {
        return make_error(ErrorCode::Internal,
                          "sequence {} token {}: offset {} >= fill {} of page {}", id, i,
                          m.offset_of(slot), m.fill[p], p);
      }
      ++use[p];
    }
    if (use != s.page_use)
      return make_error(ErrorCode::Internal, "sequence {}: page use map is stale", id);
    for (const auto& [p, count] : use) ++refs[p];
    ++dense;
  }
  if (tokens != m.total_tokens) {
    return make_error(ErrorCode::Internal, "token count {} but sequences hold {}", m.total_tokens,
                      tokens);
  }

  for (int p = 0; p < m.n_pages; ++p) {
    if (refs[p] != m.refcount[p]) {
      return make_error(ErrorCode::Internal, "page {}: refcount {} but {} sequences reference it",
                        p, m.refcount[p], refs[p]);
    }
    if (m.fill[p] < 0 || m.fill[p] > pt)
      return make_error(ErrorCode::Internal, "page {}: fill {}", p, m.fill[p]);
    if (m.refcount[p] == 0 && !is_free[p])
      return make_error(ErrorCode::Internal, "page {} leaked (refcount 0)", p);
  }
  for (size_t slot = 0; slot < n_slots; ++slot) {
    if (slot_users[slot] >= 2 && m.refcount[m.page_of(static_cast<int32_t>(slot))] < 2) {
      return make_error(ErrorCode::Internal,
                        "slot {} shared by {} sequences in a page with refcount {}", slot,
                        slot_users[slot], m.refcount[m.page_of(static_cast<int32_t>(slot))]);
    }
  }
  for (const auto& [id, s] : m.seqs) {
    if (id < 0 || id >= m.next_id)
      return make_error(ErrorCode::Internal, "sequence id {} never handed out", id);
  }
  return Status::Ok();
}

KvPool::Stats KvPool::stats() const {
  const Impl& m = *impl_;
  Stats st;
  st.pages_total = m.n_pages;
  st.pages_used = m.n_pages - static_cast<int>(m.free_list.size());
  st.sequences = static_cast<int>(m.seqs.size());
  st.tokens = m.total_tokens;
  st.cow_copies = m.cow_copies;
  return st;
}

}  // namespace kamera
