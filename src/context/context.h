// kamera::Context: one object that owns everything a session of chunk reuse needs (the model, the
// engine that runs it, the paged KV pool, the chunk store with its tiers, and the chunk cache that
// ties them together), built from one options struct. Whoever holds a Context holds everything
// beneath it; the window, the server, the harnesses and the CLI take a Context.
//
//   auto ctx = Context::load("model.gguf", {.n_threads = 2, .kv_tokens = 8192});
//   ctx->cache().assemble(seq, chunks, serve_options);   // zero-forward reuse
//   ctx->assembler().assemble(plan, assembly);           // a prompt from what the caches hold
//
// Not thread-safe: one Context per serving thread (the engine and the pool are single-threaded);
// the model inside it is immutable and may be shared by several contexts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/prompt_assembler.h"
#include "model/forward.h"
#include "model/model.h"
#include "store/store.h"

namespace kamera {

struct ContextOptions {
  int n_threads = 2;
  // KV pool: capacity in tokens over all live sequences (0: four times the model's context,
  // at most 1 << 20), in pages of page_tokens.
  int64_t kv_tokens = 0;
  int page_tokens = 16;
  // Storage of the KV pool's rows: f32, f16 or bf16 (kamera --kv-type). Narrower pools also store
  // their canonicals and patch factors at that width (docs/KV_DTYPE.md).
  DType kv_type = DType::F32;
  // Sliding-window layers (gemma3, gpt-oss): false (llama.cpp's default) keeps their rows only
  // while a query can read them, in a page space of swa_sequences x (window + swa_batch + two
  // pages) tokens (the live sequences' windows, not kv_tokens of every layer) plus, with the
  // prefix cache on, reuse.window_entries x (window + three pages) for the cached prompts' last
  // windows. Reuse then keeps what it can serve exactly: cached prompts resumed at their end, no
  // segment cache (docs/MODELS.md, "KV memory"). true (--swa-full): every token's row, as every
  // other layer, and every reuse path. Models without such layers ignore both.
  bool swa_full = false;
  int swa_sequences = 4;  // sequences decoding or prefilling at once
  int swa_batch = 512;    // tokens of the largest micro-batch (ForwardOptions::max_batch)
  // Chunk store: bytes of canonicals and patches kept in memory (LRU beyond it), and slower tiers
  // asked on a memory miss (disk, Redis).
  size_t store_bytes = size_t(1) << 30;
  std::vector<std::shared_ptr<StoreTier>> tiers;
  // The fixed prefix every canonical is formed behind (empty: the model's BOS, or token 1 when it
  // has no tokenizer).
  std::vector<int32_t> anchor;
  // The caches prompts are served from by the assembler (cache/prompt_assembler.h): the exact
  // prefix index (a quarter of the pool by default) and the segment index (64 MiB of pool pages,
  // at most a quarter of the pool): one budget of pool pages together.
  AssemblerOptions reuse{.segment_cache_bytes = int64_t(64) << 20};
  // llama2.c checkpoints: their tokenizer.bin (GGUF files carry their own).
  std::string tokenizer_path;
};

class Context {
 public:
  // Loads the model file (GGUF or llama2.c) and builds the rest.
  static Result<std::unique_ptr<Context>> load(const std::string& model_path,
                                               const ContextOptions& opts = {});
  // Builds around a model already in memory (shared with other contexts).
  static Result<std::unique_ptr<Context>> create(std::shared_ptr<const Model> model,
                                                 const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> shared_model() const { return model_; }
  const ContextOptions& options() const { return opts_; }
  Engine& engine() { return *engine_; }
  KvPool& pool() { return *pool_; }
  ChunkStore& store() { return *store_; }
  ChunkCache& cache() { return *cache_; }
  // The one assembler of prompts over this context's caches (the server's scheduler, the C API's
  // kamera_prompt_eval and the chat sessions all serve prompts through it).
  PromptAssembler& assembler() { return *assembler_; }

  // The BOS id (1 when the model has no tokenizer).
  int32_t bos() const;

  // Empties the store's memory tier (its slower tiers are kept); sequences already served are
  // unaffected (entries are immutable and shared).
  void clear_store();

 private:
  Context() = default;
  ContextOptions opts_;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<ChunkCache> cache_;
  std::unique_ptr<PromptAssembler> assembler_;  // destroyed first: its caches hold pool pages
};

// The pool parameters a Context builds: capacity for `kv_tokens` tokens of this model, every
// layer's rows for every token (the sliding-window layers' too).
KvPool::Params pool_params(const Model& model, int64_t kv_tokens, int page_tokens = 16,
                           DType kv_type = DType::F32);
// The same with the sliding-window layers bounded as ContextOptions says (swa_full,
// swa_sequences, swa_batch); unbounded when the model has none or the bound would not be smaller.
KvPool::Params pool_params(const Model& model, const ContextOptions& opts);

}  // namespace kamera
