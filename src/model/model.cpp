#include "model/model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>

namespace kamera {

Status ModelConfig::validate(const std::string& src) const {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "{}: invalid model config: {}", src, what);
  };
  constexpr int kMax = 1 << 20;
  if (n_vocab <= 0 || n_vocab > 4 * kMax) return bad(fmt::format("vocab size {}", n_vocab));
  if (dim <= 0 || dim > kMax) return bad(fmt::format("dim {}", dim));
  if (n_layers <= 0 || n_layers > 4096) return bad(fmt::format("{} layers", n_layers));
  if (n_heads <= 0 || n_heads > 4096) return bad(fmt::format("{} heads", n_heads));
  if (n_kv_heads <= 0 || n_kv_heads > n_heads || n_heads % n_kv_heads != 0)
    return bad(fmt::format("{} kv heads for {} heads (must divide)", n_kv_heads, n_heads));
  if (head_dim <= 0 || head_dim > 4096) return bad(fmt::format("head dim {}", head_dim));
  if (ffn_dim <= 0 || ffn_dim > 4 * kMax) return bad(fmt::format("ffn dim {}", ffn_dim));
  if (ctx_len <= 0) return bad(fmt::format("context length {}", ctx_len));
  if (rope.n_rot <= 0 || rope.n_rot > head_dim || rope.n_rot % 2 != 0)
    return bad(fmt::format("rope dims {} for head dim {}", rope.n_rot, head_dim));
  if (!(rope.theta > 0) || !(rope.freq_scale > 0)) return bad("rope theta / scale must be > 0");
  if (!(rms_eps > 0) || !(rms_eps < 1)) return bad(fmt::format("rms eps {}", rms_eps));
  if (attention == AttentionKind::Mla) {
    const MlaConfig& m = mla;
    if (m.kv_lora_rank <= 0 || m.qk_nope_dim < 0 || m.qk_rope_dim <= 0 || m.v_head_dim <= 0 ||
        m.q_lora_rank < 0 || m.kv_lora_rank > kMax || m.qk_rope_dim % 2 != 0)
      return bad(fmt::format("MLA dims q_lora {} kv_lora {} nope {} rope {} v {}", m.q_lora_rank,
                             m.kv_lora_rank, m.qk_nope_dim, m.qk_rope_dim, m.v_head_dim));
    if (head_dim != m.qk_nope_dim + m.qk_rope_dim || rope.n_rot != m.qk_rope_dim ||
        rope.head_dim != m.qk_rope_dim)
      return bad("MLA head dim must be qk_nope + qk_rope, and the rope acts on the qk_rope dims");
    if (n_kv_heads != n_heads) return bad("MLA has one KV head per query head");
  }
  if (rope.mrope != MropeMode::None) {
    int total = 0;
    for (int s : rope.sections) {
      if (s < 0) return bad("negative rope section");
      total += s;
    }
    if (total != rope.n_pairs())
      return bad(
          fmt::format("rope sections sum to {} pairs, the rope has {}", total, rope.n_pairs()));
  }
  return Status::Ok();
}

KvLayout Model::kv_layout() const {
  KvLayout l;
  l.n_layers = cfg.n_layers;
  if (cfg.attention == AttentionKind::Mla) {
    l.channels.resize(2);
    l.channels[channel::kMlaLatent] = {"c_kv", cfg.mla.kv_lora_rank, false};
    l.channels[channel::kMlaRope] = {"k_pe", cfg.mla.qk_rope_dim, true};
  } else {
    l.channels.resize(2);
    l.channels[channel::kGqaKey] = {"k", cfg.kv_width(), true};
    l.channels[channel::kGqaValue] = {"v", cfg.kv_width(), false};
  }
  return l;
}

std::array<uint64_t, 2> compute_fingerprint(const Model& m) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const ModelConfig& c = m.cfg;
  const int ints[] = {c.n_vocab,          c.dim,           c.n_layers,        c.n_heads,
                      c.n_kv_heads,       c.head_dim,      c.ffn_dim,         c.rope.n_rot,
                      int(c.rope.layout), int(c.qkv_bias), int(c.tied_output)};
  const double reals[] = {c.rms_eps, c.rope.theta, c.rope.freq_scale};
  const std::string_view arch = arch_name(c.arch);
  XXH3_128bits_update(st, arch.data(), arch.size());
  XXH3_128bits_update(st, ints, sizeof(ints));
  XXH3_128bits_update(st, reals, sizeof(reals));
  const int more[] = {int(c.attention),   c.mla.q_lora_rank,  c.mla.kv_lora_rank,
                      c.mla.qk_nope_dim,  c.mla.qk_rope_dim,  c.mla.v_head_dim,
                      int(c.rope.mrope),  c.rope.sections[0], c.rope.sections[1],
                      c.rope.sections[2], c.rope.sections[3]};
  if (c.attention != AttentionKind::Gqa || c.rope.mrope != MropeMode::None)
    XXH3_128bits_update(st, more, sizeof(more));
  auto add = [&](const std::vector<float>& v) {
    const uint64_t n = v.size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, v.data(), v.size() * sizeof(float));
  };
  add(m.tok_embd);
  add(m.out_norm);
  add(m.output);
  for (const LayerWeights& l : m.layers)
    for (const auto* v :
         {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.wo, &l.ffn_norm, &l.w_gate,
          &l.w_down, &l.w_up, &l.wq_a, &l.q_a_norm, &l.wq_b, &l.wkv_a, &l.kv_a_norm, &l.wkv_b})
      add(*v);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

namespace {

// Read-only mapping of a whole file.
struct MappedFile {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (base != MAP_FAILED && size) munmap(base, size);
  }
};

Result<std::unique_ptr<MappedFile>> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return make_error(ErrorCode::Io, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::InvalidArgument, "{}: not a regular file", path);
  }
  auto mf = std::make_unique<MappedFile>();
  mf->size = size_t(st.st_size);
  if (mf->size > 0) {
    mf->base = mmap(nullptr, mf->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mf->base == MAP_FAILED) {
      ::close(fd);
      return make_error(ErrorCode::Io, "{}: cannot map: {}", path, std::strerror(errno));
    }
  }
  ::close(fd);
  return mf;
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::unique_ptr<Model>> load_model(const std::string& path, const LoadOptions& opts) {
  auto mapped = map_file(path);
  if (!mapped.ok()) return mapped.error();
  const auto* bytes = static_cast<const uint8_t*>((*mapped)->base);
  const size_t size = (*mapped)->size;
  const bool is_gguf = size >= 4 && std::memcmp(bytes, "GGUF", 4) == 0;
  auto model = is_gguf ? load_gguf_model(path) : load_llama2c_bytes(bytes, size, path);
  if (!model.ok()) return model.error();
  if (is_gguf && opts.tokenizer_path.empty()) return model;
  // llama2.c checkpoints carry no vocabulary: use -z, else tokenizer.bin / tok<N>.bin beside it.
  std::string tok = opts.tokenizer_path;
  if (tok.empty()) {
    for (const std::string& cand :
         {dir_of(path) + "/tokenizer.bin",
          dir_of(path) + fmt::format("/tok{}.bin", (*model)->cfg.n_vocab)})
      if (file_exists(cand)) {
        tok = cand;
        break;
      }
  }
  if (!tok.empty()) {
    auto t = Tokenizer::from_llama2c_file(tok, (*model)->cfg.n_vocab);
    if (!t.ok()) return t.error();
    (*model)->tokenizer = std::move(t.value());
  }
  return model;
}

}  // namespace kamera

namespace kamera {

namespace {
constexpr std::pair<Arch, const char*> kArchNames[] = {
    {Arch::Llama, "llama"},
    {Arch::Qwen2, "qwen2"},
    {Arch::Qwen2Vl, "qwen2vl"},
    {Arch::Deepseek2, "deepseek2"},
};
}  // namespace

const char* arch_name(Arch a) {
  for (const auto& [arch, name] : kArchNames)
    if (arch == a) return name;
  return "unknown";
}

std::optional<Arch> arch_from_name(std::string_view name) {
  for (const auto& [arch, n] : kArchNames)
    if (name == n) return arch;
  return std::nullopt;
}

std::string arch_names() {
  std::string s;
  for (const auto& [arch, name] : kArchNames) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

}  // namespace kamera
