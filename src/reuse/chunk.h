// A chunk: the unit of reuse (a passage, a page, a frame's vision tokens). Its identity is a
// content hash: the same bytes under the same model are the same chunk wherever they sit and
// whatever precedes them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/pool.h"

namespace kamera {

struct ChunkId {
  uint64_t hi = 0, lo = 0;
  bool operator==(const ChunkId&) const = default;
  std::string hex() const;  // 32 lowercase hex digits
  static std::optional<ChunkId> from_hex(std::string_view s);
};

struct ChunkIdHash {
  size_t operator()(const ChunkId& id) const {
    return size_t(id.lo ^ (id.hi * 0x9e3779b97f4a7c15ull));
  }
};

// Token ids or embedding rows, plus the chunk's internal position layout: layout[i] is token
// i's position relative to the chunk's start (text: t = h = w = i; an image: a t per frame and an
// (h, w) grid). Placing the chunk at p shifts every component by p.
struct ChunkContent {
  std::vector<int32_t> tokens;    // token ids, or empty
  std::vector<float> embeddings;  // n x dim rows when tokens is empty
  int dim = 0;
  std::vector<Pos> layout;  // n relative positions

  int n() const {
    return tokens.empty() ? (dim ? int(embeddings.size() / dim) : 0) : int(tokens.size());
  }
  bool is_tokens() const { return !tokens.empty(); }
  static ChunkContent from_tokens(std::vector<int32_t> ids);  // linear layout 0..n-1
  // Positions the chunk occupies, i.e. max over tokens and components of the layout + 1: the
  // next chunk starts this far after this one.
  int32_t extent() const;
  // Absolute positions when the chunk starts at p.
  std::vector<Pos> positions_at(int32_t p) const;
  Status validate(int n_vocab, int model_dim) const;
};

// XXH3-128 of the model fingerprint, the content kind, the content bytes and the layout; never
// of a position or of what precedes the chunk.
ChunkId chunk_id(const std::array<uint64_t, 2>& model_fingerprint, const ChunkContent& c);

// Hash of an ordered list of chunk ids (the antecedent signature of a patch).
ChunkId sequence_signature(std::span<const ChunkId> ids);

}  // namespace kamera

template <>
struct std::hash<kamera::ChunkId> : kamera::ChunkIdHash {};
