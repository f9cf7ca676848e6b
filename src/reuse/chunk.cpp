#include "reuse/chunk.h"

#include <xxhash.h>

#include <algorithm>

namespace kamera {

std::string ChunkId::hex() const {
  return fmt::format("{:016x}{:016x}", hi, lo);
}

std::optional<ChunkId> ChunkId::from_hex(std::string_view s) {
  if (s.size() != 32) return std::nullopt;
  auto parse = [](std::string_view h, uint64_t& out) {
    out = 0;
    for (char c : h) {
      int v;
      if (c >= '0' && c <= '9')
        v = c - '0';
      else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v = c - 'A' + 10;
      else
        return false;
      out = out << 4 | uint64_t(v);
    }
    return true;
  };
  ChunkId id;
  if (!parse(s.substr(0, 16), id.hi) || !parse(s.substr(16), id.lo)) return std::nullopt;
  return id;
}

ChunkContent ChunkContent::from_tokens(std::vector<int32_t> ids) {
  ChunkContent c;
  c.tokens = std::move(ids);
  c.layout.resize(c.tokens.size());
  for (size_t i = 0; i < c.tokens.size(); ++i) c.layout[i] = Pos::linear(int32_t(i));
  return c;
}

int32_t ChunkContent::extent() const {
  int32_t m = -1;
  for (const Pos& p : layout) m = std::max({m, p.t, p.h, p.w});
  return m + 1;
}

std::vector<Pos> ChunkContent::positions_at(int32_t p) const {
  std::vector<Pos> out(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) out[i] = layout[i].shifted(p);
  return out;
}

Status ChunkContent::validate(int n_vocab, int model_dim) const {
  const int count = n();
  if (count <= 0) return make_error(ErrorCode::InvalidArgument, "chunk is empty");
  if (!tokens.empty() && !embeddings.empty())
    return make_error(ErrorCode::InvalidArgument, "chunk has both token ids and embedding rows");
  if (tokens.empty()) {
    if (dim != model_dim)
      return make_error(ErrorCode::InvalidArgument,
                        "chunk embedding rows have width {} but the model's is {}", dim, model_dim);
    if (embeddings.size() % size_t(dim) != 0)
      return make_error(ErrorCode::InvalidArgument,
                        "chunk embedding data ({} floats) is not a whole number of rows of {}",
                        embeddings.size(), dim);
  }
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      return make_error(ErrorCode::InvalidArgument,
                        "chunk token {} at index {} is outside the vocabulary [0, {})", tokens[i],
                        i, n_vocab);
  if (int(layout.size()) != count)
    return make_error(ErrorCode::InvalidArgument, "chunk has {} tokens but {} layout positions",
                      count, layout.size());
  for (const Pos& p : layout)
    if (p.t < 0 || p.h < 0 || p.w < 0)
      return make_error(ErrorCode::InvalidArgument, "chunk layout positions must be >= 0");
  return Status::Ok();
}

ChunkId chunk_id(const std::array<uint64_t, 2>& fp, const ChunkContent& c) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, fp.data(), sizeof(uint64_t) * 2);
  const uint32_t kind = c.is_tokens() ? 1u : 2u;
  const uint64_t n = uint64_t(c.n()), dim = uint64_t(c.dim);
  XXH3_128bits_update(st, &kind, sizeof(kind));
  XXH3_128bits_update(st, &n, sizeof(n));
  if (c.is_tokens()) {
    XXH3_128bits_update(st, c.tokens.data(), c.tokens.size() * sizeof(int32_t));
  } else {
    XXH3_128bits_update(st, &dim, sizeof(dim));
    XXH3_128bits_update(st, c.embeddings.data(), c.embeddings.size() * sizeof(float));
  }
  XXH3_128bits_update(st, c.layout.data(), c.layout.size() * sizeof(Pos));
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

ChunkId sequence_signature(std::span<const ChunkId> ids) {
  const XXH128_hash_t h = XXH3_128bits(ids.data(), ids.size() * sizeof(ChunkId));
  return {h.high64, h.low64};
}

}  // namespace kamera
