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
  };

  struct Stats {
    int pages_total = 0;
    int pages_used = 0;
    int sequences = 0;
    int64_t tokens = 0;      // sum over sequences
    int64_t cow_copies = 0;  // pages copied because they were shared
  };

  // Fails (no abort) on bad params or when the arenas cannot be allocated.
  static Result<std::unique_ptr<KvPool>> create(const Params& params);

  const KvLayout& layout() const;
  int page_tokens() const;
  int n_pages() const;
  int n_free_pages() const;
  DType dtype() const;
  size_t arena_bytes() const;  // bytes of all arenas (the KV memory)

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
  Result<int> insert(SeqId seq, int at, std::span<const Pos> positions, bool fresh_pages = false);
  Result<int> append(SeqId seq, std::span<const Pos> positions, bool fresh_pages = false) {
    return insert(seq, n_tokens(seq), positions, fresh_pages);
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

  // --- rows and metadata -------------------------------------------------------------------
  // One token's row (width floats) of one (layer, channel), for f32 pools only (asserted). The
  // mutable overload asserts that the token's page is exclusively owned (call make_writable /
  // insert first).
  float* row(SeqId seq, int layer, int channel, int token);
  const float* row(SeqId seq, int layer, int channel, int token) const;

  // Any dtype: the row converted to f32 (width floats), or written from f32 (rounded once).
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
