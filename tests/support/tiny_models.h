// Seeded synthetic models for unit tests, written once per process into the gtest temp dir.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "context/context.h"
#include "model/forward.h"
#include "reuse/chunk.h"
#include "synthetic/synthetic_model.h"

namespace tiny {

// Path of a tiny synthetic GGUF: "arch" (its tiny preset) or "arch:preset" (e.g.
// "deepseek2:tiny-moe"), dtype, optional --dims overrides.
inline std::string model_path(const std::string& arch, kamera::DType type = kamera::DType::F32,
                              const std::string& dims = "", uint64_t seed = 7) {
  static std::map<std::string, std::string> made;
  const std::string key =
      arch + "-" + std::string(kamera::dtype_name(type)) + "-" + dims + "-" + std::to_string(seed);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  kamera::SyntheticSpec spec;
  const size_t colon = arch.find(':');
  const std::string preset = colon == std::string::npos ? "tiny" : arch.substr(colon + 1);
  spec.cfg = *kamera::synthetic_preset(*kamera::arch_from_name(arch.substr(0, colon)), preset);
  if (!dims.empty()) {
    auto st = kamera::apply_dims(spec.cfg, dims);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  spec.seed = seed;
  spec.weight_type = type;
  std::string name = key;
  for (char& ch : name)
    if (ch == ',' || ch == '=' || ch == ':') ch = '_';
  const std::string path = testing::TempDir() + "kamera-tiny-" + name + ".gguf";
  auto st = kamera::write_synthetic_gguf(spec, path);
  EXPECT_TRUE(st.ok()) << st.message();
  made[key] = path;
  return path;
}

inline std::unique_ptr<kamera::Model> load(const std::string& path) {
  auto m = kamera::load_model(path);
  EXPECT_TRUE(m.ok()) << m.message();
  return m.ok() ? std::move(m.value()) : nullptr;
}

inline std::unique_ptr<kamera::KvPool> pool_for(const kamera::Model& m, int tokens,
                                                int page_tokens = 16) {
  kamera::KvPool::Params p;
  p.layout = m.kv_layout();
  p.page_tokens = page_tokens;
  p.n_pages = tokens / page_tokens + 4;
  auto pool = kamera::KvPool::create(p);
  EXPECT_TRUE(pool.ok()) << pool.message();
  return std::move(pool.value());
}

// A context on the model at `path`: anchor [1], room for kv_tokens tokens in pages of
// page_tokens, a store of store_bytes; sliding-window layers keep every row (--swa-full), as the
// reuse paths these rigs test need (docs/MODELS.md, "KV memory").
inline std::unique_ptr<kamera::Context> context(const std::string& path, int64_t kv_tokens,
                                                int page_tokens = 16,
                                                size_t store_bytes = size_t(1) << 30,
                                                int n_threads = 2) {
  kamera::ContextOptions o;
  o.kv_tokens = kv_tokens;
  o.page_tokens = page_tokens;
  o.store_bytes = store_bytes;
  o.n_threads = n_threads;
  o.anchor = {1};
  o.swa_full = true;
  auto c = kamera::Context::load(path, o);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? std::move(c.value()) : nullptr;
}

// A context and shortcuts to what it owns; test rigs derive from it.
struct ContextRig {
  std::unique_ptr<kamera::Context> ctx;
  const kamera::Model* model = nullptr;
  kamera::KvPool* pool = nullptr;
  kamera::Engine* engine = nullptr;
  kamera::ChunkStore* store = nullptr;
  kamera::ChunkCache* cache = nullptr;
  ContextRig(const std::string& arch, int64_t kv_tokens, int page_tokens,
             size_t store_bytes = size_t(1) << 30)
      : ctx(context(model_path(arch), kv_tokens, page_tokens, store_bytes)) {
    model = &ctx->model();
    pool = &ctx->pool();
    engine = &ctx->engine();
    store = &ctx->store();
    cache = &ctx->cache();
  }
};

inline std::vector<kamera::Pos> linear_positions(int n, int start = 0) {
  std::vector<kamera::Pos> p(n);
  for (int i = 0; i < n; ++i) p[i] = kamera::Pos::linear(start + i);
  return p;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// A float-rounding bound for two computations of the same logits that differ only in summation
// order (GEMM blocking, thread split, a re-formed patch): k ulps of the largest logit.
inline double rounding_bound(const std::vector<float>& logits, int k = 16) {
  double scale = 0;
  for (float v : logits) scale = std::max(scale, double(std::fabs(v)));
  return k * double(std::numeric_limits<float>::epsilon()) * scale;
}

// n random token ids in [3, vocab), seeded (no BOS/EOS).
inline kamera::ChunkContent random_chunk(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = int32_t(3 + rng() % uint32_t(vocab - 3));
  return kamera::ChunkContent::from_tokens(ids);
}

// A BOS (id 1) then n - 1 random ids in [3, vocab), seeded.
inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  t[0] = 1;
  for (int i = 1; i < n; ++i) t[i] = int32_t(3 + rng() % uint32_t(vocab - 3));
  return t;
}

}  // namespace tiny
