#include "context/context.h"

#include <algorithm>

namespace kamera {

KvPool::Params pool_params(const Model& model, int64_t kv_tokens, int page_tokens, DType kv_type) {
  KvPool::Params p;
  p.dtype = kv_type;
  p.layout = model.kv_layout();
  p.page_tokens = std::max(1, page_tokens);
  if (kv_tokens <= 0) kv_tokens = std::min<int64_t>(4 * int64_t(model.cfg.ctx_len), 1 << 20);
  // Every sequence may leave one page partly used: two pages of slack.
  p.n_pages = int(std::min<int64_t>(kv_tokens / p.page_tokens + 2, INT32_MAX));
  return p;
}

KvPool::Params pool_params(const Model& model, const ContextOptions& opts) {
  KvPool::Params p = pool_params(model, opts.kv_tokens, opts.page_tokens, opts.kv_type);
  const ModelConfig& c = model.cfg;
  if (opts.swa_full || c.layer_kinds.window <= 0) return p;
  std::vector<bool> local(size_t(c.n_layers), false);
  bool any = false;
  for (int l = 0; l < c.n_layers; ++l) {
    local[size_t(l)] = c.layer_kinds.at(l) == LayerKind::Local;
    any = any || local[size_t(l)];
  }
  // One sequence at its peak: W - 1 rows behind a micro-batch of swa_batch, a partial page at
  // each end; swa_sequences of them.
  const int64_t per_seq =
      int64_t(c.layer_kinds.window) + std::max(1, opts.swa_batch) + 2 * int64_t(p.page_tokens);
  // The prefix entries' checkpoints (cache/prefix_index.h): the local rows of W - 1 + a page's
  // tokens each, over at most two more partial pages.
  const bool prefix = opts.reuse.prefix_cache_tokens != 0;
  const int64_t per_checkpoint = int64_t(c.layer_kinds.window) + 3 * int64_t(p.page_tokens);
  const int64_t tokens = per_seq * std::max(1, opts.swa_sequences) +
                         (prefix ? per_checkpoint * std::max(0, opts.reuse.window_entries) : 0);
  if (!any || tokens >= int64_t(p.n_pages) * p.page_tokens) return p;
  p.window_layers = std::move(local);
  p.window_tokens = tokens;
  return p;
}

Result<std::unique_ptr<Context>> Context::load(const std::string& model_path,
                                               const ContextOptions& opts) {
  LoadOptions lo;
  lo.tokenizer_path = opts.tokenizer_path;
  KAMERA_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load_model(model_path, lo));
  return create(std::shared_ptr<const Model>(std::move(model)), opts);
}

Result<std::unique_ptr<Context>> Context::create(std::shared_ptr<const Model> model,
                                                 const ContextOptions& opts) {
  if (!model) return make_error(ErrorCode::InvalidArgument, "context: no model");
  if (opts.n_threads < 1)
    return make_error(ErrorCode::InvalidArgument, "context: n_threads {} must be >= 1",
                      opts.n_threads);
  std::unique_ptr<Context> c(new Context());
  c->opts_ = opts;
  c->model_ = std::move(model);
  KAMERA_ASSIGN_OR_RETURN(c->pool_, KvPool::create(pool_params(*c->model_, opts)));
  if (c->pool_->bounded_window()) {
    // A segment served at a new place would need its local layers' rows of its whole extent,
    // which a bounded pool gives back as the window passes: no segment cache. Cached prompts keep
    // their last window of local rows and resume at their end (cache/prefix_index.h; --swa-full
    // keeps every row and all reuse; docs/MODELS.md, "KV memory").
    c->opts_.reuse.segment_cache_bytes = 0;
  }
  c->engine_ = std::make_unique<Engine>(*c->model_, opts.n_threads);
  c->store_ = std::make_unique<ChunkStore>(opts.store_bytes);
  for (const auto& tier : opts.tiers) c->store_->add_tier(tier);
  std::vector<int32_t> anchor = opts.anchor;
  if (anchor.empty()) anchor = {c->bos()};
  c->cache_ = std::make_unique<ChunkCache>(*c->model_, *c->engine_, *c->pool_, *c->store_, anchor);
  c->assembler_ = std::make_unique<PromptAssembler>(*c->cache_, c->opts_.reuse);
  return c;
}

Context::~Context() = default;

int32_t Context::bos() const {
  return model_->tokenizer ? model_->tokenizer->bos() : 1;
}

void Context::clear_store() {
  store_->clear();
}

}  // namespace kamera
