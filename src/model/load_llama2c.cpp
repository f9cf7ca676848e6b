// llama2.c checkpoints.
//   legacy v0: 7 x i32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//     seq_len; vocab_size < 0 means a separate classifier), then f32: token embedding,
//     rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis_real, freq_cis_imag
//     (seq_len x head_size/2 each, unused here), [wcls].
//   v1 ("ak42"): u32 magic 0x616b3432, i32 version 1, the same 7 ints, u8 shared_classifier,
//     zero padding to 256 bytes, then f32: rms_att (all layers), rms_ffn, rms_final, token
//     embedding, wq, wk, wv, wo, w1, w2, w3 (each all layers), [wcls].
#include <climits>
#include <cstdlib>
#include <cstring>

#include "model/model.h"

namespace kamera {

namespace {

constexpr uint32_t kMagicV1 = 0x616b3432;

struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

// Reads f32 arrays from a bounds-checked cursor.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, size_t pos) : data_(data), size_(size), pos_(pos) {}
  void read(std::vector<float>& dst, size_t n) {
    KAMERA_ASSERT(pos_ <= size_ && n <= (size_ - pos_) / sizeof(float));  // size checked at load
    dst.resize(n);
    if (n) std::memcpy(dst.data(), data_ + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
  }
  // rows x cols f32 values as an owned weight matrix.
  void read(Weight& dst, size_t rows, size_t cols) {
    std::vector<float> v;
    read(v, rows * cols);
    dst = Weight::from_f32(std::move(v), int64_t(rows), int64_t(cols));
  }
  void skip(size_t n_floats) { pos_ += n_floats * sizeof(float); }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_;
};

Result<ModelConfig> config_from(const Header& h, const std::string& name) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.dim = h.dim;
  c.ffn_dim = h.hidden_dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.n_vocab = h.vocab_size == INT32_MIN ? 0 : std::abs(h.vocab_size);
  c.ctx_len = h.seq_len;
  c.head_dim = h.n_heads > 0 && h.dim % h.n_heads == 0 ? h.dim / h.n_heads : 0;
  c.rms_eps = 1e-5f;
  c.rope.layout = RopeLayout::Normal;
  c.rope.head_dim = c.head_dim;
  c.rope.n_rot = c.head_dim;
  c.rope.theta = 10000.0;
  if (h.n_heads > 0 && h.dim % h.n_heads != 0)
    return make_error(ErrorCode::CorruptData,
                      "{}: invalid llama2.c header: dim {} not divisible by {} heads", name, h.dim,
                      h.n_heads);
  KAMERA_TRY(c.validate(name));
  if (c.ctx_len > (1 << 24))
    return make_error(ErrorCode::CorruptData, "{}: invalid llama2.c header: seq_len {}", name,
                      c.ctx_len);
  return c;
}

// Number of f32 values of the transformer weights (without freq_cis and classifier).
uint64_t body_floats(const ModelConfig& c) {
  const uint64_t L = c.n_layers, d = c.dim, h = c.ffn_dim;
  const uint64_t q = uint64_t(c.n_heads) * c.head_dim, kv = uint64_t(c.n_kv_heads) * c.head_dim;
  return uint64_t(c.n_vocab) * d + L * d * 2 + d + L * d * (q + 2 * kv) + L * q * d + L * h * d * 3;
}

}  // namespace

Result<std::unique_ptr<Model>> load_llama2c_bytes(const uint8_t* data, size_t size,
                                                  const std::string& name) {
  if (size < 28)
    return make_error(ErrorCode::CorruptData,
                      "{}: not a model file: {} bytes is too short for a llama2.c header and it "
                      "is not GGUF",
                      name, size);
  uint32_t magic;
  std::memcpy(&magic, data, 4);
  const bool v1 = magic == kMagicV1;
  Header h{};
  bool shared = true;
  size_t pos = 0;
  if (v1) {
    if (size < 256)
      return make_error(ErrorCode::CorruptData, "{}: llama2.c v1 header truncated ({} bytes < 256)",
                        name, size);
    int32_t version;
    std::memcpy(&version, data + 4, 4);
    if (version != 1)
      return make_error(ErrorCode::Unsupported,
                        "{}: llama2.c checkpoint version {} not supported (only 0 and 1)", name,
                        version);
    std::memcpy(&h, data + 8, sizeof(h));
    shared = data[36] != 0;
    pos = 256;
  } else {
    std::memcpy(&h, data, sizeof(h));
    shared = h.vocab_size > 0;
    pos = 28;
  }
  auto cfg = config_from(h, name);
  if (!cfg.ok()) {
    if (!v1)
      return make_error(ErrorCode::CorruptData,
                        "{}: not GGUF, not llama2.c v1 (no 'ak42' magic), and not a valid llama2.c "
                        "v0 header ({})",
                        name, cfg.message());
    return cfg.error();
  }
  const ModelConfig& c = *cfg;
  const uint64_t freq = v1 ? 0 : uint64_t(c.ctx_len) * (c.head_dim / 2) * 2;
  const uint64_t cls = shared ? 0 : uint64_t(c.n_vocab) * c.dim;
  const uint64_t need = pos + (body_floats(c) + freq + cls) * 4;
  if (size != need)
    return make_error(ErrorCode::CorruptData,
                      "{}: llama2.c {} checkpoint should be {} bytes for its header (dim {}, {} "
                      "layers, vocab {}, seq_len {}) but the file has {} bytes",
                      name, v1 ? "v1" : "v0", need, c.dim, c.n_layers, c.n_vocab, c.ctx_len, size);

  auto m = std::make_unique<Model>();
  m->cfg = c;
  m->cfg.tied_output = shared;
  m->source = name;
  m->format = v1 ? "llama2c-v1" : "llama2c-v0";
  m->layers.resize(c.n_layers);
  const size_t d = c.dim, q = c.q_width(), kv = c.kv_width(), hid = c.ffn_dim;
  Reader r(data, size, pos);
  auto per_layer = [&](std::vector<float> LayerWeights::*field, size_t n) {
    for (auto& l : m->layers) r.read(l.*field, n);
  };
  auto per_layer_w = [&](Weight LayerWeights::*field, size_t rows, size_t cols) {
    for (auto& l : m->layers) r.read(l.*field, rows, cols);
  };
  if (v1) {
    per_layer(&LayerWeights::attn_norm, d);
    per_layer(&LayerWeights::ffn_norm, d);
    r.read(m->out_norm, d);
    r.read(m->tok_embd, size_t(c.n_vocab), d);
    per_layer_w(&LayerWeights::wq, q, d);
    per_layer_w(&LayerWeights::wk, kv, d);
    per_layer_w(&LayerWeights::wv, kv, d);
    per_layer_w(&LayerWeights::wo, d, q);
    per_layer_w(&LayerWeights::w_gate, hid, d);
    per_layer_w(&LayerWeights::w_down, d, hid);
    per_layer_w(&LayerWeights::w_up, hid, d);
  } else {
    r.read(m->tok_embd, size_t(c.n_vocab), d);
    per_layer(&LayerWeights::attn_norm, d);
    per_layer_w(&LayerWeights::wq, q, d);
    per_layer_w(&LayerWeights::wk, kv, d);
    per_layer_w(&LayerWeights::wv, kv, d);
    per_layer_w(&LayerWeights::wo, d, q);
    per_layer(&LayerWeights::ffn_norm, d);
    per_layer_w(&LayerWeights::w_gate, hid, d);
    per_layer_w(&LayerWeights::w_down, d, hid);
    per_layer_w(&LayerWeights::w_up, hid, d);
    r.read(m->out_norm, d);
    r.skip(freq);
  }
  if (!shared) r.read(m->output, size_t(c.n_vocab), d);
  KAMERA_ASSERT(r.pos() == size);
  m->fingerprint = compute_fingerprint(*m);
  return m;
}

}  // namespace kamera
