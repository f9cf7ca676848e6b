// Paged KV pool: fixed-size pages of per-layer channels, a slot map per sequence, copy-on-write
// forks.
//
// Storage (docs/DESIGN.md §2): for every (layer, channel) one arena of n_pages * page_tokens
// rows of `width` values in the pool's dtype (f32, f16 or bf16; kv/kv_row.h converts). A token
// lives in one slot (slot = page * page_tokens + offset) and has one row in every (layer, channel)
// arena. A sequence is an ordered list of slots plus one position per token; causal order is the
// order of the list, never the position, so a token's position can change (relocation) without
// touching its bytes. Rope channels are stored pre-rotation (position-free): attention rotates them
// on the fly from the token's position.
//
// Pages are reference counted by sequences. fork() shares every page; a page shared by several
// sequences is copied before it is written (make_writable). New tokens go to the tail page of the
// sequence only when that page is exclusively owned and has free slots after its last used one;
// otherwise to fresh pages. Erasing tokens leaves holes that are reclaimed when the page is freed.
//
// Every mutating call either succeeds or leaves the pool exactly as it was (prepare, then apply);
// a full pool is a recoverable error, not an abort.
//
// Window layers (sliding-window attention, as llama.cpp's SWA cache with --swa-full off): layers
// flagged in Params::window_layers keep their rows in a page space of their own, sized by
// Params::window_tokens, not by n_pages. A token has a window row (a window slot) only while
// someone may read it there: drop_window_rows gives back the rows of tokens below a position
// (the engine drops what its window can no longer reach), insert may leave the new tokens without
// window rows (add_window_rows gives them rows just before they run). Pages of window rows are
// reference counted and copied on write exactly as the others. window_tokens == 0: window layers
// are stored as every other layer (every token's row kept, llama.cpp's --swa-full).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/pos.h"
#include "core/status.h"

namespace kamera {

// One cached channel of every layer, e.g. "k" (rope, n_kv_heads*head_dim) and "v" (content).
struct ChannelDesc {
  std::string name;
  int width = 0;         // floats per token per layer
  bool rotated = false;  // carries RoPE; stored pre-rotation (position-free)
};

struct KvLayout {
  int n_layers = 0;
  std::vector<ChannelDesc> channels;

  int channel_index(std::string_view name) const;  // -1 when absent
  size_t floats_per_token() const;                 // sum of widths * n_layers
  int rope_channel() const;                        // the first rotated channel, -1 when none
  int content_channel() const;  // the first channel that is not rotated, -1 when none
};

// Channel indices of the two attention families' layouts (Model::kv_layout(); docs/DESIGN.md
// section 2). The reuse layer never needs them: it reads `rotated` from the layout.
namespace channel {
inline constexpr int kGqaKey = 0;     // "k": n_kv_heads x head_dim, rope, stored pre-rotation
inline constexpr int kGqaValue = 1;   // "v": n_kv_heads x head_dim, content
inline constexpr int kMlaLatent = 0;  // "c_kv": kv_lora_rank, content (shared by K and V)
inline constexpr int kMlaRope = 1;    // "k_pe": qk_rope_dim, rope (shared by all heads)
}  // namespace channel

using SeqId = int32_t;

class KvPool {
 public:
  struct Params {
    KvLayout layout;
    int page_tokens = 16;      // tokens per page
    int n_pages = 0;           // capacity in pages
    DType dtype = DType::F32;  // storage of every row: f32, f16 or bf16
    // Window layers (see above): [n_layers] flags (empty: none), and the rows their page space
    // holds over all sequences (0: they keep every token's row, in the main pages).
    std::vector<bool> window_layers;
    int64_t window_tokens = 0;
  };

  struct Stats {
    int pages_total = 0;
    int pages_used = 0;
    int sequences = 0;
    int64_t tokens = 0;          // sum over sequences
    int64_t cow_copies = 0;      // pages copied because they were shared
    int window_pages_total = 0;  // the window layers' page space (0: not bounded)
    int window_pages_used = 0;
  };

  // Fails (no abort) on bad params or when the arenas cannot be allocated.
  static Result<std::unique_ptr<KvPool>> create(const Params& params);
  // The arena_bytes() a pool of these (valid) params has, without allocating it.
  static size_t planned_bytes(const Params& params);

  const KvLayout& layout() const;
  int page_tokens() const;
  int n_pages() const;
  int n_free_pages() const;
  DType dtype() const;
  size_t arena_bytes() const;  // bytes of all arenas (the KV memory)
  // Window layers have a page space of their own (Params::window_tokens > 0).
  bool bounded_window() const;
  bool is_window_layer(int layer) const;  // in that space (false when not bounded)
  int n_window_pages() const;             // 0 when not bounded
  int n_free_window_pages() const;

  // --- sequences -------------------------------------------------------------------------
  SeqId create_sequence();
  Result<SeqId> fork(SeqId src);  // shares all pages copy-on-write; copies slot map + positions
  void free_sequence(SeqId seq);
  bool has_sequence(SeqId seq) const;
  int n_tokens(SeqId seq) const;

  // Inserts positions.size() tokens before index `at` (at == n_tokens appends). Their rows are
  // uninitialised and writable. Returns `at`. Fails cleanly when the pool lacks pages.
  // fresh_pages: never share the tail page, so the new tokens start a page of their own (a chunk
  // that is page-aligned can later be copied-on-write without copying its neighbours).
  // window_rows (bounded pools): the new tokens get window rows too; false: they have none until
  // add_window_rows.
  Result<int> insert(SeqId seq, int at, std::span<const Pos> positions, bool fresh_pages = false,
                     bool window_rows = true);
  Result<int> append(SeqId seq, std::span<const Pos> positions, bool fresh_pages = false,
                     bool window_rows = true) {
    return insert(seq, n_tokens(seq), positions, fresh_pages, window_rows);
  }
  // Reorders tokens [begin, begin + order.size()): new token begin + i is old token
  // begin + order[i]. Metadata only (slot map and positions); no row moves. order must be a
  // permutation of 0..size-1.
  Status permute(SeqId seq, int begin, std::span<const int> order);
  Status erase(SeqId seq, int begin, int end);  // removes tokens [begin, end)
  Status truncate(SeqId seq, int n_tokens);     // keeps tokens [0, n_tokens)
  // truncate() that also gives the dropped tail's slots back to their pages where nothing else
  // holds them (their page is the sequence's alone and they were its last filled slots), so a
  // sequence that appends and rolls back again and again (speculative decoding's rejected
  // drafts) reuses its slots instead of taking a new page every page_tokens dropped tokens.
  Status rollback(SeqId seq, int n_tokens);

  // Copies every page shared with another sequence that holds a token of [begin, end).
  // After success rows of those tokens may be written. Fails cleanly when the pool is full.
  Status make_writable(SeqId seq, int begin, int end);

  // --- window rows (bounded pools; no-ops, and every token has its rows, otherwise) --------
  // Gives back the window rows of tokens [0, end) whose position (Pos::t, the window's axis) is
  // below `below`; returns how many were given back. Pages no sequence uses any more return to
  // the window free list.
  int drop_window_rows(SeqId seq, int32_t below, int end);
  // Gives window rows (uninitialised, writable) to the tokens of [begin, end) that have none.
  // Fails cleanly when the window pages are used up.
  Status add_window_rows(SeqId seq, int begin, int end);
  bool has_window_row(SeqId seq, int token) const;
  // The first token of [0, end) without a window row whose position (Pos::t) is at least `from`
  // (a row a query at position from + window - 1 would read), -1 when there is none.
  int missing_window_row(SeqId seq, int32_t from, int end) const;
  int n_window_rows(SeqId seq) const;  // tokens of seq with a window row
  // --- rows and metadata -------------------------------------------------------------------
  // One token's row (width floats) of one (layer, channel), for f32 pools only (asserted). The
  // mutable overload asserts that the token's page is exclusively owned (call make_writable /
  // insert first).
  float* row(SeqId seq, int layer, int channel, int token);
  const float* row(SeqId seq, int layer, int channel, int token) const;

  // Any dtype: the row converted to f32 (width floats), or written from f32 (rounded once).
  // A window layer's row must exist (has_window_row; asserted).
  void read_row(SeqId seq, int layer, int channel, int token, float* dst) const;
  void write_row(SeqId seq, int layer, int channel, int token, const float* src);

  // Kernel view (FlashInfer / vLLM style): arena base of (layer, channel) and the slots of a
  // sequence in token order; row of slot s is base + s * width (f32 pools only, asserted).
  const float* arena(int layer, int channel) const;
  float* arena(int layer, int channel);
  // The same in any dtype: row of slot s starts at byte s * width * element size.
  const void* arena_data(int layer, int channel) const;
  void* arena_data(int layer, int channel);
  std::span<const int32_t> slots(SeqId seq) const;
  // The slots of `layer`'s arena: slots(seq), or for a window layer of a bounded pool the window
  // slots, -1 for a token without a window row (nothing to read there).
  std::span<const int32_t> slots(SeqId seq, int layer) const;

  std::span<const Pos> positions(SeqId seq) const;
  void set_position(SeqId seq, int token, Pos pos);  // metadata only

  // --- checks and statistics -------------------------------------------------------------
  int page_refcount(int page) const;
  Status check_invariants() const;  // refcounts, free list, slot uniqueness, sizes
  Stats stats() const;

  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

 private:
  KvPool() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kamera
