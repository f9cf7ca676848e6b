#include "model/model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>

namespace kamera {

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
  const LayerKinds& lk = c.layer_kinds;  // model/layer_kinds.h; absent from older fingerprints
  if (!lk.kinds.empty() || c.attn_scale != 0 || c.final_softcap != 0) {
    XXH3_128bits_update(st, lk.kinds.data(), lk.kinds.size() * sizeof(LayerKind));
    const double kind_reals[] = {double(lk.window), lk.local_theta, c.attn_scale, c.final_softcap};
    XXH3_128bits_update(st, kind_reals, sizeof(kind_reals));
  }
  auto add = [&](const std::vector<float>& v) {
    const uint64_t n = v.size();
    XXH3_128bits_update(st, &n, sizeof(n));
    XXH3_128bits_update(st, v.data(), v.size() * sizeof(float));
  };
  // An f32 weight hashes as its values did when every weight was held in f32, so fingerprints
  // (and the store entries keyed by them) of f32 files stay what they were; another type adds
  // its type id and hashes its raw bytes.
  auto add_w = [&](const Weight& w) {
    const uint64_t n = uint64_t(w.rows() * w.cols());
    XXH3_128bits_update(st, &n, sizeof(n));
    if (!w.is_f32()) {
      const uint32_t type = uint32_t(w.type());
      XXH3_128bits_update(st, &type, sizeof(type));
    }
    XXH3_128bits_update(st, w.raw(), w.bytes());
  };
  add_w(m.tok_embd);
  add(m.out_norm);
  add_w(m.output);
  for (const LayerWeights& l : m.layers) {
    add(l.attn_norm);
    for (const Weight* w : {&l.wq, &l.wk, &l.wv}) add_w(*w);
    for (const auto* v : {&l.bq, &l.bk, &l.bv}) add(*v);
    add_w(l.wo);
    add(l.ffn_norm);
    for (const Weight* w : {&l.w_gate, &l.w_down, &l.w_up, &l.wq_a}) add_w(*w);
    add(l.q_a_norm);
    for (const Weight* w : {&l.wq_b, &l.wkv_a}) add_w(*w);
    add(l.kv_a_norm);
    add_w(l.wkv_b);
  }
  // MoE config, YaRN parameters and the experts, when present (nothing for a model without
  // either, so older fingerprints stay valid)
  if (c.moe.enabled() || c.rope.yarn.ext_factor != 0.0) {
    const MoeConfig& e = c.moe;
    const int ints[] = {e.n_experts,         e.n_used,       e.n_shared,
                        e.expert_ffn,        e.n_dense_lead, int(e.norm_weights),
                        c.rope.yarn.orig_ctx};
    const double reals[] = {e.weights_scale,       c.rope.yarn.ext_factor, c.rope.yarn.beta_fast,
                            c.rope.yarn.beta_slow, c.yarn_log_mul,         c.yarn_attn_factor};
    XXH3_128bits_update(st, ints, sizeof(ints));
    XXH3_128bits_update(st, reals, sizeof(reals));
    for (const LayerWeights& l : m.layers)
      for (const Weight* w : {&l.moe.router, &l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps,
                              &l.moe.gate_shexp, &l.moe.up_shexp, &l.moe.down_shexp})
        add_w(*w);
  }
  if (c.moe.v3_routing()) {  // DeepSeek-V3 routing (nothing otherwise: older fingerprints stay)
    const MoeConfig& e = c.moe;
    const int ints[] = {int(e.gating), e.n_groups, e.n_groups_used, int(e.selection_bias)};
    XXH3_128bits_update(st, ints, sizeof(ints));
    for (const LayerWeights& l : m.layers) add(l.moe.exp_probs_b);
  }
  if (c.qk_norm)  // qwen3's per-head q/k norms (nothing otherwise: older fingerprints stay)
    for (const LayerWeights& l : m.layers) {
      add(l.q_norm);
      add(l.k_norm);
    }
  if (is_gemma3(c.arch))  // gemma3's post norms (model/layer_kinds.h)
    for (const LayerWeights& l : m.layers) {
      add(l.attn_post_norm);
      add(l.ffn_post_norm);
    }
  if (is_gpt_oss(c.arch)) {  // model/gpt_oss.h (nothing otherwise: older fingerprints stay)
    const int ints[] = {int(c.moe.gating), int(c.moe.oai_experts), int(c.layer_kinds.local_scaled)};
    XXH3_128bits_update(st, ints, sizeof(ints));
    for (const LayerWeights& l : m.layers)
      for (const auto* v :
           {&l.bo, &l.attn_sinks, &l.moe.router_b, &l.moe.gate_b, &l.moe.up_b, &l.moe.down_b})
        add(*v);
  }
  // phi3's rotated-dims magnitude and the LongRoPE factors in use (the short and the long set
  // give other keys); nothing otherwise: older fingerprints stay
  if (c.arch == Arch::Phi3 || c.rope.attn_factor != 1.0 || !c.rope.freq_factors.empty()) {
    XXH3_128bits_update(st, &c.rope.attn_factor, sizeof(double));
    add(c.rope.freq_factors);
  }
  // ggml's roundings (ops/numerics.h) compute other KV rows: nothing for the default, so older
  // fingerprints stay
  if (m.numerics != Numerics::Kamera) {
    const std::string_view n = numerics_name(m.numerics);
    XXH3_128bits_update(st, n.data(), n.size());
  }
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
  auto model = is_gguf ? load_gguf_model(path, opts.n_ctx, opts.numerics)
                       : load_llama2c_bytes(bytes, size, path);
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
