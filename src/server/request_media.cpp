#include "server/request_media.h"

#include "store/store.h"
#include "vision/vl_prompt.h"

namespace kamera {

const ChunkContent* RequestMedia::find(const ChunkId& id) const {
  for (const auto& [k, c] : chunks)
    if (k == id) return c.get();
  return nullptr;
}

int RequestMedia::already_stored(const ChunkStore& store) const {
  int n = 0;
  for (const auto& [k, c] : chunks) n += store.contains_canonical(k);
  return n;
}

nlohmann::json RequestMedia::usage() const {
  return {{"count", images},
          {"frames", frames},
          {"image_tokens", image_tokens},
          {"encoded", encoded},
          {"cached_embeddings", cached_embeddings},
          {"reused_chunks", reused_chunks}};
}

std::vector<int32_t> vision_text_ids(const Tokenizer& tok, std::string_view text, bool first,
                                     size_t limit) {
  const int32_t vs = find_piece(tok, kVisionStart), ve = find_piece(tok, kVisionEnd);
  std::vector<int32_t> ids;
  auto run = [&](std::string_view s) {
    if (s.empty() || ids.size() > limit) return;
    const size_t left = limit - ids.size();
    const auto part = first && ids.empty() ? tok.encode(s, false, left) : tok.encode_raw(s, left);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  size_t at = 0;
  while (vs >= 0 && ve >= 0) {
    const size_t s = text.find(kVisionStart, at), e = text.find(kVisionEnd, at);
    const size_t next = std::min(s, e);
    if (next == std::string_view::npos) break;
    run(text.substr(at, next - at));
    ids.push_back(next == s ? vs : ve);
    at = next + (next == s ? kVisionStart.size() : kVisionEnd.size());
  }
  run(text.substr(at));
  return ids;
}

}  // namespace kamera
