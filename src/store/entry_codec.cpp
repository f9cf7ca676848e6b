#include "store/entry_codec.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "kv/kv_row.h"

namespace kamera {

namespace {

constexpr uint32_t kVersion = 1, kVersionKeyed = 2;
constexpr size_t kMacBytes = 32;
constexpr uint32_t kKindCanonical = 1, kKindPatch = 2, kKindImage = 3;
constexpr size_t kHeaderBytes = 4 + 4 + 4 + 16 + 8 + 8;

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    if (n) out_.append(static_cast<const char*>(p), n);
  }
  void str(const std::string& s) {
    put(uint32_t(s.size()));
    out_ += s;
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  template <class T>
  bool get(T& v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool bytes(void* p, size_t n) {
    if (n == 0) return true;  // p may be null (an empty vector's data())
    if (s_.size() - pos_ < n) return false;
    std::memcpy(p, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool str(std::string& out, size_t max = 1 << 16) {
    uint32_t n;
    if (!get(n) || n > max || s_.size() - pos_ < n) return false;
    out.assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t left() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

void put_matrix(Writer& w, const ChannelMatrix& m) {
  w.put(int32_t(m.rows()));
  w.put(int32_t(m.cols()));
  w.put(uint8_t(m.dtype()));
  w.bytes(m.raw(), m.bytes());
}

bool get_matrix(Reader& r, ChannelMatrix& m) {
  int32_t rows, cols;
  uint8_t dt;
  if (!r.get(rows) || !r.get(cols) || !r.get(dt)) return false;
  if (rows < 0 || cols < 0 || dt > uint8_t(DType::Q8_0) || !is_kv_dtype(DType(dt))) return false;
  const size_t elem = kv_elem_bytes(DType(dt));
  if (cols > 0 && size_t(rows) > r.left() / (size_t(cols) * elem))
    return false;  // before allocating
  m = ChannelMatrix(rows, cols, DType(dt));
  return r.bytes(m.raw(), size_t(rows) * cols * elem);
}

void put_content(Writer& w, const ChunkContent& c) {
  w.put(uint64_t(c.tokens.size()));
  w.bytes(c.tokens.data(), c.tokens.size() * sizeof(int32_t));
  w.put(int32_t(c.dim));
  w.put(uint64_t(c.embeddings.size()));
  w.bytes(c.embeddings.data(), c.embeddings.size() * sizeof(float));
  w.put(uint64_t(c.layout.size()));
  w.bytes(c.layout.data(), c.layout.size() * sizeof(Pos));
}

template <class T>
bool get_vector(Reader& r, std::vector<T>& v) {
  uint64_t n;
  if (!r.get(n) || n > r.left() / sizeof(T)) return false;
  v.resize(n);
  return r.bytes(v.data(), n * sizeof(T));
}

bool get_content(Reader& r, ChunkContent& c) {
  int32_t dim;
  if (!get_vector(r, c.tokens) || !r.get(dim) || !get_vector(r, c.embeddings) ||
      !get_vector(r, c.layout))
    return false;
  c.dim = dim;
  return dim >= 0 && (c.tokens.empty() ? (dim > 0 && c.embeddings.size() % dim == 0) : true) &&
         int64_t(c.layout.size()) == c.n();
}

void put_layout(Writer& w, const KvLayout& l) {
  w.put(int32_t(l.n_layers));
  w.put(uint32_t(l.channels.size()));
  for (const auto& ch : l.channels) {
    w.str(ch.name);
    w.put(int32_t(ch.width));
    w.put(uint8_t(ch.rotated));
  }
}

bool get_layout(Reader& r, KvLayout& l) {
  uint32_t n;
  if (!r.get(l.n_layers) || !r.get(n) || n > 64 || l.n_layers < 0 || l.n_layers > 4096)
    return false;
  l.channels.resize(n);
  for (auto& ch : l.channels) {
    uint8_t rot;
    if (!r.str(ch.name, 256) || !r.get(ch.width) || !r.get(rot)) return false;
    ch.rotated = rot != 0;
  }
  return true;
}

void put_key(Writer& w, const PatchKey& k) {
  w.put(k.chunk);
  w.put(k.antecedents);
  w.put(int32_t(k.rank));
  w.str(k.layers);
  w.put(uint8_t(k.per_head));
  w.put(uint8_t(k.dtype));
  w.put(uint8_t(k.orbit));
}

bool get_key(Reader& r, PatchKey& k) {
  int32_t rank;
  uint8_t ph, dt, orbit;
  if (!r.get(k.chunk) || !r.get(k.antecedents) || !r.get(rank) || !r.str(k.layers, 4096) ||
      !r.get(ph) || !r.get(dt) || !r.get(orbit))
    return false;
  if (dt > uint8_t(DType::Q8_0) || !is_kv_dtype(DType(dt))) return false;
  k.rank = rank;
  k.per_head = ph != 0;
  k.dtype = DType(dt);
  k.orbit = orbit != 0;
  return true;
}

std::string mac_of(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string seal(uint32_t kind, const Fingerprint& fp, std::string payload, std::string_view key) {
  Writer h;
  h.bytes("KMRA", 4);
  h.put(key.empty() ? kVersion : kVersionKeyed);
  h.put(kind);
  h.put(fp[0]);
  h.put(fp[1]);
  h.put(uint64_t(payload.size()));
  h.put(uint64_t(XXH3_64bits(payload.data(), payload.size())));
  std::string blob = h.out() + payload;
  if (!key.empty()) blob += mac_of(key, blob);
  return blob;
}

// The MAC of a keyed blob; strips it from `blob`.
Status check_mac(std::string_view& blob, uint32_t version, std::string_view key, bool* forged) {
  const bool keyed = version == kVersionKeyed;
  if (version != kVersion && !keyed)
    return make_error(ErrorCode::CorruptData, "entry version {} (this build reads {} and {})",
                      version, kVersion, kVersionKeyed);
  if (keyed != !key.empty() || (keyed && blob.size() < kHeaderBytes + kMacBytes)) {
    if (forged) *forged = !key.empty();
    return make_error(ErrorCode::CorruptData, "{}",
                      keyed ? "entry carries a MAC; this reader has no key"
                            : "entry carries no MAC (unauthenticated)");
  }
  if (!keyed) return Status::Ok();
  const std::string_view body = blob.substr(0, blob.size() - kMacBytes);
  const std::string want = mac_of(key, body);
  if (CRYPTO_memcmp(want.data(), blob.data() + body.size(), kMacBytes) != 0) {
    if (forged) *forged = true;
    return make_error(ErrorCode::CorruptData, "entry MAC mismatch (forged, or another key)");
  }
  blob = body;
  return Status::Ok();
}

// Checks the header (and the MAC); returns the payload.
Result<std::string_view> open_blob(std::string_view blob, uint32_t kind, const Fingerprint& fp,
                                   std::string_view key, bool* forged) {
  if (blob.size() < kHeaderBytes)
    return make_error(ErrorCode::CorruptData, "entry truncated ({} bytes)", blob.size());
  if (std::memcmp(blob.data(), "KMRA", 4) != 0)
    return make_error(ErrorCode::CorruptData, "not a kamera store entry (magic)");
  Reader r(blob.substr(4));
  uint32_t version, k;
  uint64_t hi, lo, size, sum;
  r.get(version);
  r.get(k);
  r.get(hi);
  r.get(lo);
  r.get(size);
  r.get(sum);
  KAMERA_TRY(check_mac(blob, version, key, forged));
  if (k != kind)
    return make_error(ErrorCode::CorruptData, "entry kind {} where {} was expected", k, kind);
  if (hi != fp[0] || lo != fp[1])
    return make_error(ErrorCode::CorruptData,
                      "entry belongs to another model (fingerprint {:016x}{:016x})", hi, lo);
  if (size != blob.size() - kHeaderBytes)
    return make_error(ErrorCode::CorruptData, "entry payload is {} bytes, the header says {}",
                      blob.size() - kHeaderBytes, size);
  const std::string_view payload = blob.substr(kHeaderBytes);
  if (XXH3_64bits(payload.data(), payload.size()) != sum)
    return make_error(ErrorCode::CorruptData, "entry checksum mismatch");
  return payload;
}

}  // namespace

std::string serialize_canonical(const CanonicalEntry& e, const Fingerprint& model,
                                std::string_view key) {
  Writer w;
  w.put(e.id);
  put_content(w, e.content);
  put_layout(w, e.kv.layout);
  w.put(int32_t(e.kv.n_tokens));
  for (const auto& m : e.kv.blocks) put_matrix(w, m);
  return seal(kKindCanonical, model, std::move(w.out()), key);
}

Result<std::shared_ptr<CanonicalEntry>> deserialize_canonical(std::string_view blob,
                                                              const Fingerprint& model,
                                                              std::string_view key, bool* forged) {
  auto payload = open_blob(blob, kKindCanonical, model, key, forged);
  if (!payload.ok()) return payload.error();
  Reader r(*payload);
  auto e = std::make_shared<CanonicalEntry>();
  KvLayout layout;
  int32_t n_tokens;
  if (!r.get(e->id) || !get_content(r, e->content) || !get_layout(r, layout) || !r.get(n_tokens) ||
      n_tokens != e->content.n())
    return make_error(ErrorCode::CorruptData, "malformed canonical entry");
  e->kv.layout = layout;
  e->kv.n_tokens = n_tokens;
  e->kv.blocks.resize(size_t(layout.n_layers) * layout.channels.size());
  for (size_t b = 0; b < e->kv.blocks.size(); ++b) {
    auto& m = e->kv.blocks[b];
    if (!get_matrix(r, m) || m.rows() != n_tokens ||
        m.cols() != layout.channels[b % layout.channels.size()].width)
      return make_error(ErrorCode::CorruptData, "malformed canonical entry (block {})", b);
  }
  if (r.left() != 0)
    return make_error(ErrorCode::CorruptData, "canonical entry has {} trailing bytes", r.left());
  return e;
}

std::string serialize_patch(const PatchEntry& e, const Fingerprint& model, std::string_view key) {
  Writer w;
  put_key(w, e.key);
  const Patch& p = e.patch;
  w.put(int32_t(p.n_tokens));
  w.put(int32_t(p.options.rank));
  w.str(p.options.layers.describe());
  w.put(uint8_t(p.options.per_head));
  w.put(uint8_t(p.options.dtype));
  w.put(int32_t(p.options.head_dim));
  w.put(uint32_t(p.factors.size()));
  for (const auto& f : p.factors) {
    w.put(int32_t(f.layer));
    w.put(int32_t(f.channel));
    w.put(int32_t(f.col_begin));
    w.put(int32_t(f.cols));
    w.put(int32_t(f.rows));
    w.put(int32_t(f.rank));
    put_matrix(w, f.us);
    put_matrix(w, f.vt);
  }
  return seal(kKindPatch, model, std::move(w.out()), key);
}

Result<std::shared_ptr<PatchEntry>> deserialize_patch(std::string_view blob,
                                                      const Fingerprint& model,
                                                      std::string_view key, bool* forged) {
  auto payload = open_blob(blob, kKindPatch, model, key, forged);
  if (!payload.ok()) return payload.error();
  Reader r(*payload);
  auto e = std::make_shared<PatchEntry>();
  Patch& p = e->patch;
  std::string layers;
  uint8_t ph, dt;
  uint32_t nf;
  if (!get_key(r, e->key) || !r.get(p.n_tokens) || !r.get(p.options.rank) || !r.str(layers, 4096) ||
      !r.get(ph) || !r.get(dt) || !r.get(p.options.head_dim) || !r.get(nf) || nf > (1u << 20))
    return make_error(ErrorCode::CorruptData, "malformed patch entry");
  auto ls = LayerSet::parse(layers);
  if (!ls.ok())
    return make_error(ErrorCode::CorruptData, "malformed patch entry (layers '{}')", layers);
  p.options.layers = *ls;
  p.options.per_head = ph != 0;
  if (dt > uint8_t(DType::Q8_0) || !is_kv_dtype(DType(dt)))
    return make_error(ErrorCode::CorruptData, "malformed patch entry (factor dtype {})", dt);
  p.options.dtype = DType(dt);
  for (uint32_t i = 0; i < nf; ++i) {
    PatchFactor f;
    if (!r.get(f.layer) || !r.get(f.channel) || !r.get(f.col_begin) || !r.get(f.cols) ||
        !r.get(f.rows) || !r.get(f.rank) || !get_matrix(r, f.us) || !get_matrix(r, f.vt))
      return make_error(ErrorCode::CorruptData, "malformed patch entry (factor {})", i);
    if (f.rows != p.n_tokens || f.us.rows() != f.rows || f.us.cols() != f.rank ||
        f.vt.rows() != f.rank || f.vt.cols() != f.cols || f.layer < 0 || f.channel < 0 ||
        f.col_begin < 0)
      return make_error(ErrorCode::CorruptData, "patch entry factor {} has inconsistent shapes", i);
    p.factors.push_back(std::move(f));
  }
  if (r.left() != 0)
    return make_error(ErrorCode::CorruptData, "patch entry has {} trailing bytes", r.left());
  return e;
}

std::string patch_key_name(const PatchKey& k) {
  Writer w;
  put_key(w, k);
  const XXH128_hash_t h = XXH3_128bits(w.out().data(), w.out().size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::string random_store_key(size_t bytes) {
  std::string k(bytes, '\0');
  KAMERA_ASSERT(RAND_bytes(reinterpret_cast<unsigned char*>(k.data()), int(bytes)) == 1);
  return k;
}

std::string serialize_image(const ImageEntry& e, const Fingerprint& model, std::string_view key) {
  Writer w;
  w.put(e.key);
  put_content(w, e.placed);
  return seal(kKindImage, model, std::move(w.out()), key);
}

Result<std::shared_ptr<ImageEntry>> deserialize_image(std::string_view blob,
                                                      const Fingerprint& model,
                                                      std::string_view key, bool* forged) {
  auto payload = open_blob(blob, kKindImage, model, key, forged);
  if (!payload.ok()) return payload.error();
  Reader r(*payload);
  auto e = std::make_shared<ImageEntry>();
  if (!r.get(e->key) || !get_content(r, e->placed) || !e->placed.tokens.empty() ||
      e->placed.n() < 1)
    return make_error(ErrorCode::CorruptData, "malformed image entry");
  if (r.left() != 0)
    return make_error(ErrorCode::CorruptData, "image entry has {} trailing bytes", r.left());
  return e;
}

Status check_canonical_fits(const CanonicalEntry& e, const KvLayout& layout) {
  const KvLayout& l = e.kv.layout;
  if (l.n_layers != layout.n_layers || l.channels.size() != layout.channels.size())
    return make_error(ErrorCode::CorruptData, "entry layout does not match the model");
  for (size_t i = 0; i < l.channels.size(); ++i)
    if (l.channels[i].width != layout.channels[i].width ||
        l.channels[i].rotated != layout.channels[i].rotated)
      return make_error(ErrorCode::CorruptData, "entry channel {} does not match the model", i);
  return Status::Ok();
}

Status check_patch_fits(const PatchEntry& e, const KvLayout& layout) {
  for (const PatchFactor& f : e.patch.factors) {
    if (f.layer >= layout.n_layers || f.channel >= int(layout.channels.size()))
      return make_error(ErrorCode::CorruptData, "patch factor outside the model's layers/channels");
    if (int64_t(f.col_begin) + f.cols > layout.channels[f.channel].width)
      return make_error(ErrorCode::CorruptData, "patch factor columns outside the channel");
  }
  return Status::Ok();
}

size_t entry_size_limit(const KvLayout& layout, int64_t max_tokens, int64_t embed_dim) {
  int64_t width = 0;  // values of one token over every layer and channel
  for (const auto& ch : layout.channels) width += ch.width;
  width *= layout.n_layers;
  const int64_t blocks = int64_t(layout.n_layers) * int64_t(layout.channels.size());
  // per token: a full-rank patch's two factors (<= 2 values per KV value) at f32, or the token's
  // id, position and embedding row; per block and per entry: headers, names, factor shapes
  const int64_t per_token = 2 * width * 4 + 4 + int64_t(sizeof(Pos)) + 4 * embed_dim;
  return size_t((int64_t(64) << 10) + blocks * (int64_t(16) << 10) +
                std::max<int64_t>(1, max_tokens) * per_token);
}

size_t default_entry_size_limit(const KvLayout& layout) {
  return entry_size_limit(layout, 32768, 8192);
}

TierCodec::TierCodec(const Fingerprint& fp, KvLayout layout, std::string key,
                     size_t max_entry_bytes)
    : fp_(fp),
      layout_(std::move(layout)),
      key_(std::move(key)),
      max_bytes_(max_entry_bytes ? max_entry_bytes : default_entry_size_limit(layout_)) {}

std::string TierCodec::seal(const CanonicalEntry& e) const {
  return serialize_canonical(e, fp_, key_);
}

std::string TierCodec::seal(const PatchEntry& e) const {
  return serialize_patch(e, fp_, key_);
}

std::string TierCodec::seal(const ImageEntry& e) const {
  return serialize_image(e, fp_, key_);
}

Result<std::shared_ptr<CanonicalEntry>> TierCodec::open_canonical(std::string_view blob,
                                                                  const ChunkId& id,
                                                                  bool* forged) const {
  auto e = deserialize_canonical(blob, fp_, key_, forged);
  if (!e.ok()) return e.error();
  KAMERA_TRY(check_canonical_fits(**e, layout_));
  if (!((*e)->id == id))
    return make_error(ErrorCode::CorruptData, "entry holds chunk {}", (*e)->id.hex());
  return e;
}

Result<std::shared_ptr<PatchEntry>> TierCodec::open_patch(std::string_view blob,
                                                          const PatchKey& key, bool* forged) const {
  auto e = deserialize_patch(blob, fp_, key_, forged);
  if (!e.ok()) return e.error();
  KAMERA_TRY(check_patch_fits(**e, layout_));
  if (!((*e)->key == key))
    return make_error(ErrorCode::CorruptData, "entry holds another patch key");
  return e;
}

Result<std::shared_ptr<ImageEntry>> TierCodec::open_image(std::string_view blob, const ChunkId& key,
                                                          bool* forged) const {
  auto e = deserialize_image(blob, fp_, key_, forged);
  if (e.ok() && !((*e)->key == key))
    return make_error(ErrorCode::CorruptData, "entry holds image {}", (*e)->key.hex());
  return e;
}

}  // namespace kamera
