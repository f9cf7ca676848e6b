// Image embeddings in a chunk store (store/store.h: ImageEntry, kept by image key in its memory and
// written through to its tiers), as the Qwen and Kimi-VL picture caches use them
// (vision/image_chunks.h, vision/kimi_chunks.h).
#pragma once

#include <memory>

#include "reuse/chunk.h"

namespace kamera {

class ChunkStore;

// The placed rows stored under key (the store's memory, then its tiers), or null when absent or
// not of width dim (an entry is sealed with the store key; its shape is checked all the same).
std::shared_ptr<const ChunkContent> find_stored_image(ChunkStore* store, const ChunkId& key,
                                                      int dim);

// The rows as a store entry under key, written through to the store when there is one.
std::shared_ptr<const ChunkContent> put_stored_image(ChunkStore* store, const ChunkId& key,
                                                     ChunkContent placed);

}  // namespace kamera
