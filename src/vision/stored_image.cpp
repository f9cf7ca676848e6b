#include "vision/stored_image.h"

#include "store/store.h"

namespace kamera {

std::shared_ptr<const ChunkContent> find_stored_image(ChunkStore* store, const ChunkId& key,
                                                      int dim) {
  if (!store) return nullptr;
  auto e = store->find_image(key);
  if (!e || e->placed.dim != dim || e->placed.n() != int(e->placed.layout.size())) return nullptr;
  return std::shared_ptr<const ChunkContent>(e, &e->placed);
}

std::shared_ptr<const ChunkContent> put_stored_image(ChunkStore* store, const ChunkId& key,
                                                     ChunkContent placed) {
  auto entry = std::make_shared<const ImageEntry>(ImageEntry{key, std::move(placed)});
  if (store) store->put_image(entry);
  return std::shared_ptr<const ChunkContent>(entry, &entry->placed);
}

}  // namespace kamera
