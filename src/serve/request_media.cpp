#include "serve/request_media.h"

#include <algorithm>

#include "store/store.h"

namespace kamera {

const MediaPart* RequestMedia::part(size_t message, size_t content) const {
  for (const MediaPart& p : parts)
    if (p.message == message && p.content == content) return &p;
  return nullptr;
}

const MediaPart* RequestMedia::part_of(const ChunkId& id) const {
  for (const MediaPart& p : parts)
    if (p.id == id) return &p;
  return nullptr;
}

const ChunkContent* RequestMedia::find(const ChunkId& id) const {
  for (const auto& [k, c] : chunks)
    if (k == id) return c.get();
  return nullptr;
}

bool RequestMedia::embedding_hit(const ChunkId& id) const {
  return std::find(embedding_hits.begin(), embedding_hits.end(), id) != embedding_hits.end();
}

int RequestMedia::already_stored(const ChunkStore& store) const {
  int n = 0;
  for (const auto& [k, c] : chunks) n += store.contains_canonical(k);
  return n;
}

}  // namespace kamera
