// KvPool's state, shared by its implementation files (pool.cpp: creation, sequences, rows;
// pool_window.cpp: the window layers' rows; pool_check.cpp: invariants). Not part of the API.
//
// - Arenas: one 64-byte aligned block per (layer, channel), index layer * n_channels + channel,
//   rows of `width` values of the pool's dtype: n_pages * page_tokens rows in the main space,
//   window pages * page_tokens rows for a window layer of a bounded pool. Contents are not
//   initialised.
// - A page space: refcount (number of sequences with at least one token in the page), fill (next
//   unused offset, monotonic until the page returns to the free list) and a LIFO free list. The
//   main space holds every token's row; the window space (bounded pools) the window layers' rows.
// - Sequences: slots (token order) + positions + a per-sequence page -> token-count map per space,
//   so that erase/truncate learn in O(removed) whether the sequence still references a page.
//   wslots[i] is token i's window slot, -1 when it has none (bounded pools; empty otherwise).
// - Every mutating call validates and counts the pages it needs before it changes anything.
#pragma once

#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

#include "kv/pool.h"

namespace kamera {

namespace kv_detail {

constexpr size_t kArenaAlign = 64;  // bytes

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kArenaAlign}); }
};
using ArenaPtr = std::unique_ptr<uint8_t, AlignedFree>;
using PageUse = std::unordered_map<int32_t, int32_t>;  // page -> tokens of one sequence in it

struct PageSpace {
  int n_pages = 0;
  int page_tokens = 1;
  std::vector<int32_t> refcount;   // [n_pages]
  std::vector<int32_t> fill;       // [n_pages] next unused offset, 0..page_tokens
  std::vector<int32_t> free_list;  // pages with refcount 0; back() is taken first

  void init(int pages, int tokens);
  int32_t page_of(int32_t slot) const { return slot / page_tokens; }
  int32_t offset_of(int32_t slot) const { return slot % page_tokens; }
  int n_free() const { return int(free_list.size()); }
  int32_t take();
  void release(int32_t p);
  // Drops one token of a sequence living in `page`; releases the sequence's reference (and the
  // page, when it was the last) when it was its last token there.
  void drop_use(PageUse& use, int32_t page);
  // Tokens that fit the page holding `tail_slot` (-1: none) when the sequence owns it alone.
  int64_t tail_room(const PageUse& use, int32_t tail_slot) const;
  // Allocates count slots: first in the tail page (tail_room of it), then in fresh pages. The
  // caller checked that the free pages suffice (pages_for).
  void allocate(PageUse& use, int32_t tail_slot, int64_t in_tail, int64_t count, int32_t* out);
  int64_t pages_for(int64_t in_tail, int64_t count) const {
    return (count - in_tail + page_tokens - 1) / page_tokens;
  }
};

}  // namespace kv_detail

struct KvPool::Impl {
  struct Sequence {
    std::vector<int32_t> slots;    // [n_tokens], slot = page * page_tokens + off
    std::vector<Pos> positions;    // [n_tokens]
    kv_detail::PageUse page_use;   // main space
    std::vector<int32_t> wslots;   // [n_tokens] window slots, -1: none (bounded pools only)
    kv_detail::PageUse wpage_use;  // window space
    int32_t wtail = -1;            // the window slot allocated last (-1: none)
  };

  KvLayout layout;
  int page_tokens = 0;
  int n_pages = 0;
  int n_channels = 0;
  DType dtype = DType::F32;
  size_t elem = 4;                          // bytes per value
  size_t total_bytes = 0;                   // all arenas
  std::vector<int> widths;                  // [n_channels] values per row
  std::vector<kv_detail::ArenaPtr> arenas;  // [n_layers * n_channels]
  kv_detail::PageSpace main;
  kv_detail::PageSpace win;  // n_pages 0 when not bounded
  bool bounded = false;
  std::vector<bool> window_layer;  // [n_layers] in the window space (bounded pools)
  std::unordered_map<SeqId, Sequence> seqs;
  SeqId next_id = 0;
  int64_t total_tokens = 0;
  int64_t cow_copies = 0;

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
  bool in_window(int layer) const { return bounded && window_layer[size_t(layer)]; }

  uint8_t* arena_ptr(int layer, int channel) const {
    KAMERA_ASSERT(layer >= 0 && layer < layout.n_layers);
    KAMERA_ASSERT(channel >= 0 && channel < n_channels);
    return arenas[static_cast<size_t>(layer) * n_channels + channel].get();
  }
  // Token's slot in layer's arena, asserting it has one there.
  int32_t slot_of(const Sequence& s, int layer, int token) const {
    KAMERA_ASSERT(token >= 0 && token < static_cast<int>(s.slots.size()));
    if (!in_window(layer)) return s.slots[size_t(token)];
    const int32_t w = s.wslots[size_t(token)];
    KAMERA_ASSERT(w >= 0);  // a dropped window row: has_window_row first
    return w;
  }
  const kv_detail::PageSpace& space_of(int layer) const { return in_window(layer) ? win : main; }

  // Copies rows [0, fill) of page `src` to page `dst` of one space in every (layer, channel)
  // arena of that space.
  void copy_page(bool window_space, int32_t src, int32_t dst);
  // Copies each of a sequence's shared pages of one space (the free pages were counted), then
  // remaps its slots there (and *tail, when given) to the copies.
  void copy_shared(bool window_space, const std::vector<int32_t>& shared,
                   std::vector<int32_t>& slots, kv_detail::PageUse& use, int32_t* tail);
  Status check_space(bool window) const;  // kv/pool_check.cpp
};

}  // namespace kamera
